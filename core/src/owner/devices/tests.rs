use super::*;
use proptest::prelude::*;

const T0: EpochMs = 1_700_000_000_000;

fn device(created_at: EpochMs, last_seen_at: EpochMs) -> StoredDevice {
    let device = Device { id: "dv_AAAAAAAAAAAAAAAAAAAAAA".into(), name: "phone".into(), created_at, last_seen_at };
    StoredDevice { device, secret_hash: "ab".repeat(32) }
}

proptest! {
    /// A refresh holds exactly when the hash is the device's own, it was seen within its idle
    /// time and it is younger than its whole life; every other case is the one `auth.revoked`.
    #[test]
    fn a_refresh_holds_exactly_within_the_idle_time_and_the_whole_life_with_the_devices_own_hash(
        age in 0i64..2 * DEVICE_LIFE_MS_MAX,
        idle in 0i64..2 * DEVICE_IDLE_MS_MAX,
        own in any::<bool>(),
    ) {
        let now = T0 + age;
        let held = device(T0, now - idle.min(age));
        let hash = if own { held.secret_hash.clone() } else { "cd".repeat(32) };
        let answer = refresh(Some(&held), &hash, now);
        let holds = own && idle.min(age) < DEVICE_IDLE_MS_MAX && age < DEVICE_LIFE_MS_MAX;
        prop_assert_eq!(answer.is_ok(), holds);
        match answer {
            Ok(d) => prop_assert_eq!(d.last_seen_at, now),
            Err(e) => prop_assert_eq!(e.code, Code::AuthRevoked),
        }
    }
}

#[test]
fn a_sign_in_past_the_devices_or_the_sign_ins_per_period_is_refused_with_its_own_code() {
    assert!(admit_sign_in(DEVICES_PER_OWNER_MAX - 1, DEVICE_SIGN_INS_PER_PERIOD_MAX - 1).is_ok());
    assert_eq!(admit_sign_in(DEVICES_PER_OWNER_MAX, 0).unwrap_err().code, Code::DeviceTooMany);
    assert_eq!(admit_sign_in(0, DEVICE_SIGN_INS_PER_PERIOD_MAX).unwrap_err().code, Code::DeviceRateLimited);
    assert_eq!(sign_ins_since(T0), T0 - DEVICE_SIGN_INS_PERIOD_MS + 1, "the period is the last minute, now included");
}

#[test]
fn a_device_name_is_one_line_within_its_bytes_and_an_id_has_its_shape() {
    assert!(check_name("Chromium on Linux").is_ok());
    for bad in ["", " ", "a\nb", &"x".repeat(DEVICE_NAME_BYTES_MAX + 1)] {
        assert!(check_name(bad).is_err(), "{bad:?}");
    }
    assert!(is_device_id("dv_AAAAAAAAAAAAAAAAAAAA-_"));
    for bad in ["dv_short", "wh_AAAAAAAAAAAAAAAAAAAA-_", "dv_AAAAAAAAAAAAAAAAAAAA.-", ""] {
        assert!(!is_device_id(bad), "{bad}");
    }
}

#[test]
fn revoke_all_keeps_only_the_device_named() {
    let mut a = device(T0, T0);
    a.device.id = "dv_a".into();
    let mut b = device(T0, T0);
    b.device.id = "dv_b".into();
    let all = [a, b];
    assert_eq!(revoked_by_all(&all, Some("dv_b")), ["dv_a"]);
    assert_eq!(revoked_by_all(&all, None), ["dv_a", "dv_b"]);
    assert_eq!(revoked_by_all(&all, Some("dv_c")), ["dv_a", "dv_b"], "keeping a device not held keeps none");
}
