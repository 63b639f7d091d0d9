//! A console's sign-in that lasts on one browser: the device's credential and how it travels.
//!
//! The credential is `<device id>.<secret>.<owner>`: 32 random bytes of secret, which the
//! owner's index keeps only as their SHA-256. It travels in one cookie, `HttpOnly`,
//! `SameSite=Strict`, `Secure` outside loopback, whose `Path` is the refresh route alone, so
//! that a browser sends it nowhere else and a page's script never reads it. The refresh is the
//! one route that reads a cookie, so it alone carries the CSRF defence: the custom header
//! [`REFRESH_HEADER`] (which no cross-origin page can send without a preflight this service
//! never grants) and an `Origin` that is this service's own. Every other route stays bearer-only.

use crate::error::{ApiError, Code};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use handoff_core::limits::DEVICE_LIFE_MS_MAX;
use handoff_core::owner::devices::{self, Device};
use handoff_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The cookie that carries a device's credential.
pub const COOKIE: &str = "handoff_device";
/// The only path the cookie is sent to.
pub const REFRESH_PATH: &str = "/v1/devices/refresh";
/// The header a refresh must carry, set to `1`.
pub const REFRESH_HEADER: &str = "Handoff-Refresh";
/// Random bytes of a device's id and of its credential's secret.
pub const DEVICE_ID_BYTES: usize = 16;
pub const SECRET_BYTES: usize = 32;
/// The name a device signs in with when the request names none.
pub const UNNAMED: &str = "Unnamed device";

/// A device's credential, as the cookie carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub device: String,
    pub secret: String,
    pub owner: String,
}

impl Credential {
    /// A new device's credential, from the random bytes the caller drew.
    pub fn new(owner: &str, id: [u8; DEVICE_ID_BYTES], secret: [u8; SECRET_BYTES]) -> Credential {
        Credential {
            device: format!("dv_{}", URL_SAFE_NO_PAD.encode(id)),
            secret: URL_SAFE_NO_PAD.encode(secret),
            owner: owner.to_string(),
        }
    }

    /// The credential in a request's `Cookie` header, where it is one of ours.
    pub fn from_cookies(header: &str) -> Option<Credential> {
        let value = header.split(';').find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))?;
        let mut parts = value.splitn(3, '.');
        let (device, secret, owner) = (parts.next()?, parts.next()?, parts.next()?);
        let secret_ok = URL_SAFE_NO_PAD.decode(secret).is_ok_and(|s| s.len() == SECRET_BYTES);
        if !devices::is_device_id(device) || !secret_ok || !crate::input::is_id(owner) {
            return None;
        }
        Some(Credential { device: device.into(), secret: secret.into(), owner: owner.into() })
    }

    /// What the index keeps of the secret: its SHA-256, in hex.
    pub fn secret_hash(&self) -> String {
        hex::encode(handoff_core::digest::sha256(&[self.secret.as_bytes()]))
    }

    /// The `Set-Cookie` value that gives the browser at `origin` this credential for the device's
    /// whole life.
    pub fn set_cookie(&self, origin: &str) -> String {
        let secure = if is_loopback(origin) { "" } else { "; Secure" };
        let max_age_s = DEVICE_LIFE_MS_MAX / 1000;
        let (device, secret, owner) = (&self.device, &self.secret, &self.owner);
        format!("{COOKIE}={device}.{secret}.{owner}; Path={REFRESH_PATH}; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{secure}")
    }
}

/// Whether `origin` (`scheme://host[:port]`) is this machine: there a browser keeps no
/// `Secure` cookie over plain HTTP, and no one else can reach it.
pub fn is_loopback(origin: &str) -> bool {
    let host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map_or(v6, |(h, _)| h),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    host == "localhost" || host == "::1" || host.split('.').next() == Some("127") && host.split('.').count() == 4
}

/// The CSRF defence of the refresh: [`REFRESH_HEADER`]` : 1`, and an `Origin` that is the
/// request's own (`url_origin`). Either missing or another is 403 `auth.forbidden`.
pub fn check_refresh(header: Option<&str>, origin: Option<&str>, url_origin: &str) -> Result<(), ApiError> {
    if header.map(str::trim) != Some("1") {
        return Err(ApiError::new(Code::AuthForbidden, format!("a refresh must carry {REFRESH_HEADER}: 1")));
    }
    if origin.map(str::trim) != Some(url_origin) {
        return Err(ApiError::new(Code::AuthForbidden, "a refresh must come from this service's own origin"));
    }
    Ok(())
}

/// A refresh with no credential: 401 `auth.required`.
pub fn no_credential() -> ApiError {
    ApiError::new(Code::AuthRequired, "no device credential: sign in with an owner token first")
}

/// The body of the device routes, read as one type (one reader in the `.wasm`): `{"name"?}` of a
/// sign-in (the name from the browser and platform), `{"name"}` of a rename, `{"keep_current"}`
/// of a revoke-all; each route refuses the field it does not take ([`DeviceInput::only`]).
/// A field left out is `None`; `null` is refused, as the contract's types say.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceInput {
    #[serde(default, deserialize_with = "present")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub keep_current: Option<bool>,
}

fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl DeviceInput {
    /// The body, with `name` or `keep_current` (`takes`) the only field its route reads.
    pub fn only(body: &[u8], takes: &str) -> Result<DeviceInput, ApiError> {
        let input: DeviceInput = crate::input::parse_json_or_empty(body)?;
        let given = [("name", input.name.is_some()), ("keep_current", input.keep_current.is_some())];
        match given.iter().find(|(field, set)| *set && *field != takes) {
            Some((field, _)) => Err(ApiError::invalid(format!("{field}: unknown field"))),
            None => Ok(input),
        }
    }

    /// The field a route needs, or `field: missing`.
    pub fn required<T>(value: Option<T>, field: &str) -> Result<T, ApiError> {
        value.ok_or_else(|| ApiError::invalid(format!("{field}: missing field")))
    }
}

/// A device as listed: `current` marks the one the caller's token came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
    pub last_seen_at: Timestamp,
    pub current: bool,
}

impl DeviceView {
    pub fn of(device: &Device, current: bool) -> DeviceView {
        DeviceView {
            id: device.id.clone(),
            name: device.name.clone(),
            created_at: Timestamp::from_ms(device.created_at),
            last_seen_at: Timestamp::from_ms(device.last_seen_at),
            current,
        }
    }
}

/// Every answer of the device routes, as one type (one rendering in the `.wasm`, not four):
/// `{"device", "access_token", "expires_in"}` of a sign-in (201) and a refresh (200), the
/// access token valid `expires_in` seconds; `{"devices"}` of the list; `{"device"}` of a
/// rename; `{"revoked"}` (how many) of a revoke-all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceView>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_reads_back_from_its_cookie_among_others_and_a_malformed_one_is_none() {
        let c = Credential::new("alice.example:1", [7; DEVICE_ID_BYTES], [9; SECRET_BYTES]);
        let set = c.set_cookie("https://handoff.example");
        let pair = set.split(';').next().unwrap();
        assert_eq!(Credential::from_cookies(&format!("a=b; {pair}; c=d")), Some(c.clone()));
        assert_eq!(Credential::from_cookies(pair).map(|c| c.secret_hash()), Some(c.secret_hash()));
        assert_eq!(c.secret_hash().len(), 64);
        assert!(!c.secret_hash().contains(&c.secret), "only the hash is kept");
        for bad in ["", "handoff_device=", "handoff_device=x.y.z", "other=dv_AAAAAAAAAAAAAAAAAAAAAA.x.alice"] {
            assert_eq!(Credential::from_cookies(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_cookie_is_http_only_same_site_strict_scoped_to_the_refresh_and_secure_outside_loopback() {
        let c = Credential::new("alice", [1; DEVICE_ID_BYTES], [2; SECRET_BYTES]);
        let deployed = c.set_cookie("https://handoff.example");
        for part in ["; Path=/v1/devices/refresh", "; HttpOnly", "; SameSite=Strict", "; Secure"] {
            assert!(deployed.contains(part), "{deployed} has {part}");
        }
        assert!(deployed.contains(&format!("; Max-Age={}", DEVICE_LIFE_MS_MAX / 1000)));
        for local in ["http://127.0.0.1:8787", "http://localhost:1", "http://[::1]:9"] {
            assert!(!c.set_cookie(local).contains("Secure"), "{local}");
        }
        for remote in ["http://127.0.0.1.example", "https://localhost.example", "http://10.0.0.1"] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn a_device_body_takes_only_its_routes_field_and_refuses_null() {
        assert_eq!(DeviceInput::only(b"", "name").unwrap().name, None);
        assert_eq!(DeviceInput::only(br#"{"name": "x"}"#, "name").unwrap().name.as_deref(), Some("x"));
        for (body, takes) in [
            (&br#"{"name": null}"#[..], "name"),
            (br#"{"keep_current": null}"#, "keep_current"),
            (br#"{"keep_current": true}"#, "name"),
            (br#"{"name": "x"}"#, "keep_current"),
            (br#"{"other": 1}"#, "name"),
        ] {
            let refused = DeviceInput::only(body, takes).unwrap_err();
            assert_eq!(refused.code, Code::RequestInvalid, "{}", String::from_utf8_lossy(body));
        }
        assert_eq!(DeviceInput::required::<bool>(None, "keep_current").unwrap_err().code, Code::RequestInvalid);
    }

    #[test]
    fn a_refresh_without_the_header_or_from_another_origin_is_forbidden() {
        let me = "https://handoff.example";
        assert!(check_refresh(Some("1"), Some(me), me).is_ok());
        for (header, origin) in
            [(None, Some(me)), (Some("0"), Some(me)), (Some("1"), None), (Some("1"), Some("https://evil.example"))]
        {
            assert_eq!(
                check_refresh(header, origin, me).unwrap_err().code,
                Code::AuthForbidden,
                "{header:?} {origin:?}"
            );
        }
    }
}
