//! Devices: a console's sign-in that lasts on one browser, until the owner signs it out or
//! revokes it, it goes unused for [`DEVICE_IDLE_MS_MAX`], or it reaches [`DEVICE_LIFE_MS_MAX`].
//! The owner's index keeps each device with the hash of its credential (never the credential);
//! the Worker mints the short-lived access token, which the index hands back only when it
//! admits the sign-in or the refresh. These are the rules; `Index` carries them out.

use crate::error::{Code, Refusal};
use crate::limits::{
    DEVICES_PER_OWNER_MAX, DEVICE_IDLE_MS_MAX, DEVICE_LIFE_MS_MAX, DEVICE_NAME_BYTES_MAX, DEVICE_SIGN_INS_PERIOD_MS,
    DEVICE_SIGN_INS_PER_PERIOD_MAX,
};
use crate::time::EpochMs;
use serde::{Deserialize, Serialize};

/// One signed-in device, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub id: String,
    pub name: String,
    pub created_at: EpochMs,
    pub last_seen_at: EpochMs,
}

/// A device as the index stores it: with the SHA-256 of its credential's secret (hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredDevice {
    pub device: Device,
    pub secret_hash: String,
}

/// What the Worker minted for a device, handed back only when the index admits the sign-in or
/// the refresh: the access token, its life, and (on a sign-in) the cookie that carries the
/// device's credential. The index stores none of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    pub access_token: String,
    pub expires_in: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<String>,
}

/// Whether a device's sign-in still lasts at `now`: used within its idle time, and younger
/// than its whole life.
pub fn lasts(device: &Device, now: EpochMs) -> bool {
    let idle = now.saturating_sub(device.last_seen_at) < DEVICE_IDLE_MS_MAX;
    let young = now.saturating_sub(device.created_at) < DEVICE_LIFE_MS_MAX;
    idle && young
}

/// The devices whose sign-in has ended by `now`: the index removes them (and what belongs to them).
pub fn ended(devices: &[StoredDevice], now: EpochMs) -> Vec<String> {
    devices.iter().filter(|d| !lasts(&d.device, now)).map(|d| d.device.id.clone()).collect()
}

/// A new sign-in, given the devices that still last and the sign-ins made in the period
/// before `now`: refused past the owner's devices or past the sign-ins per period.
pub fn admit_sign_in(lasting: usize, recent_sign_ins: usize) -> Result<(), Refusal> {
    if lasting >= DEVICES_PER_OWNER_MAX {
        return Err(Refusal::new(
            Code::DeviceTooMany,
            format!("an owner has at most {DEVICES_PER_OWNER_MAX} signed-in devices; revoke one first"),
        ));
    }
    if recent_sign_ins >= DEVICE_SIGN_INS_PER_PERIOD_MAX {
        return Err(Refusal::new(
            Code::DeviceRateLimited,
            format!(
                "an owner may sign in {DEVICE_SIGN_INS_PER_PERIOD_MAX} devices per {} s; try again later",
                DEVICE_SIGN_INS_PERIOD_MS / 1000
            ),
        ));
    }
    Ok(())
}

/// The sign-ins counted at `now` are those made at or after this moment.
pub fn sign_ins_since(now: EpochMs) -> EpochMs {
    now.saturating_sub(DEVICE_SIGN_INS_PERIOD_MS).saturating_add(1)
}

/// A refresh with a credential whose secret hashes to `secret_hash`: the device, seen now, when
/// it is held, the hash is its own and its sign-in lasts; otherwise 401 `auth.revoked`, the
/// same for each, so that a refusal tells nothing of which.
pub fn refresh(held: Option<&StoredDevice>, secret_hash: &str, now: EpochMs) -> Result<Device, Refusal> {
    let revoked = || {
        Refusal::new(
            Code::AuthRevoked,
            "this device's sign-in has ended (signed out, revoked or expired); sign in again",
        )
    };
    let held = held.ok_or_else(revoked)?;
    if !same(held.secret_hash.as_bytes(), secret_hash.as_bytes()) {
        return Err(revoked());
    }
    if !lasts(&held.device, now) {
        return Err(revoked());
    }
    Ok(Device { last_seen_at: now, ..held.device.clone() })
}

/// Two hashes compared without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// A device's name: one line, not blank, at most [`DEVICE_NAME_BYTES_MAX`] bytes.
pub fn check_name(name: &str) -> Result<(), Refusal> {
    crate::text::single_line("name", name, DEVICE_NAME_BYTES_MAX)
}

/// Whether `id` has the shape of a device's id: `dv_` and 22 characters of base64url.
pub fn is_device_id(id: &str) -> bool {
    id.strip_prefix("dv_").is_some_and(|rest| {
        rest.len() == 22 && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// What a revoke-all removes: every device but the one kept.
pub fn revoked_by_all<'a>(devices: &'a [StoredDevice], keep: Option<&str>) -> Vec<&'a str> {
    devices.iter().map(|d| d.device.id.as_str()).filter(|id| Some(*id) != keep).collect()
}

#[cfg(test)]
mod tests;
