//! Bearer tokens: JWT (RFC 7519) signed with HS256 under `HANDOFF_SIGNING_KEY`.
//!
//! Only `{"alg":"HS256"}` is accepted (so `alg: none` and every other algorithm are refused),
//! `exp` is required and honoured with [`TOKEN_CLOCK_SKEW_S`] of skew, and the signature is
//! compared in constant time by `hmac`.
//!
//! Owner tokens are signed with the signing key itself, which an identity provider may share.
//! Machine tokens are this service's own: signed with [`machine_key`], a key derived from the
//! signing key, so that no other service holding the signing key accepts one (as an owner's or
//! at all), and a token signed with the signing key is never a machine's here.
//!
//! An access token minted from a signed-in device (`POST /v1/devices` and its refresh) is an
//! owner's, short-lived ([`ACCESS_TOKEN_TTL_S`]) and signed with [`device_key`], a third key
//! derived the same way: it names its device (`did`), passes nowhere else, and is told apart
//! from an identity provider's owner token by its key alone, so that it never signs a device in.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use handoff_core::limits::{
    ACCESS_TOKEN_TTL_S, MACHINE_CREDENTIAL_TTL_S, MACHINE_TOKEN_TTL_S, SIGNING_KEY_BYTES_MIN, TOKEN_BYTES_MAX,
    TOKEN_CLOCK_SKEW_S,
};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The development key that `scripts/dev` and `scripts/test` use when `HANDOFF_SIGNING_KEY`
/// is unset. Public by design: never use it for a deployed environment.
pub const DEV_SIGNING_KEY: &str = "handoff-development-key-do-not-deploy";

pub use handoff_core::role::Role;

/// The claims this service reads. Unknown claims are ignored, as RFC 7519 asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub role: Role,
    /// The hand-off a machine token is for; owner tokens carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hid: Option<String>,
    pub exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// A machine token's hand-off life (epoch ms it was minted at or after): a hand-off
    /// created again after an erasure refuses tokens minted for an earlier life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inc: Option<u64>,
    /// A machine credential's machine name (its `inc` is when the machine was enrolled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mch: Option<String>,
}

/// Why a token was refused. All of them answer 401 `auth.invalid`; the reason is for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    TooLong,
    Malformed,
    Algorithm,
    Signature,
    Expired,
    NotYetValid,
    MissingHandoff,
    /// A machine token without `inc`: it would be bound to no life of its hand-off, and so
    /// outlive an erasure and a re-create. Every mint sets it.
    MissingIncarnation,
    /// `HANDOFF_TOKEN_ISSUER` is set and the token's `iss` is missing or another.
    Issuer,
    /// `HANDOFF_TOKEN_AUDIENCE` is set and the token's `aud` does not name it.
    Audience,
    /// Signed with the key of the other role: a machine token with the signing key (so not
    /// minted by this service), or an owner token with the machine key.
    WrongKey,
    /// Signed with the device key but naming no device (`did`), or not as an owner's.
    MissingDevice,
    /// A machine credential without its machine (`mch`) or its enrolment (`inc`).
    MissingMachine,
}

impl TokenError {
    pub fn message(self) -> &'static str {
        match self {
            TokenError::TooLong => "the token is too long",
            TokenError::Malformed => "the token is not a well-formed JWT with sub, role and exp",
            TokenError::Algorithm => "only HS256 tokens are accepted",
            TokenError::Signature => "the token's signature does not verify",
            TokenError::Expired => "the token has expired",
            TokenError::NotYetValid => "the token is not valid yet",
            TokenError::MissingHandoff => "a machine token must name its hand-off (hid)",
            TokenError::MissingIncarnation => "a machine token must name the life of its hand-off (inc)",
            TokenError::Issuer => "the token's issuer (iss) is not the one this service accepts",
            TokenError::Audience => "the token's audience (aud) does not name this service",
            TokenError::WrongKey => "the token's role does not match the key it is signed with: machine tokens are minted by this service only",
            TokenError::MissingDevice => "a device's access token must be an owner's and name its device (did)",
            TokenError::MissingMachine => "a machine credential's token must name its machine (mch) and enrolment (inc)",
        }
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

/// What a deployment may require of a token beyond its signature: an issuer and an audience
/// (`HANDOFF_TOKEN_ISSUER`, `HANDOFF_TOKEN_AUDIENCE`), so that an owner can reuse the HS256
/// tokens of their identity provider. Unset, neither claim is read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    pub issuer: Option<String>,
    pub audience: Option<String>,
}

/// `iss` and `aud` as RFC 7519 defines them: `aud` is one string or an array of strings.
#[derive(Deserialize, Serialize)]
struct Registered {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aud: Option<Audience>,
}

#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn names(&self, wanted: &str) -> bool {
        match self {
            Audience::One(a) => a == wanted,
            Audience::Many(all) => all.iter().any(|a| a == wanted),
        }
    }
}

/// Whether `key` may sign tokens in an environment: anywhere but `local`, the public
/// development key and keys under [`SIGNING_KEY_BYTES_MIN`] bytes are refused, since anyone
/// can mint (or guess) an owner token with them.
pub fn key_is_usable(key: &[u8], local: bool) -> bool {
    if local {
        return !key.is_empty();
    }
    key != DEV_SIGNING_KEY.as_bytes() && key.len() >= SIGNING_KEY_BYTES_MIN
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length")
}

/// What the machine key is derived under: a label of this service's own.
const MACHINE_KEY_LABEL: &[u8] = b"handoff machine token key v1";

/// The key machine tokens are signed with: HMAC-SHA256 of a fixed label under the signing key.
/// Whoever holds the signing key can derive it (this service, and tools that mint their own
/// tokens); a service that verifies HS256 with the signing key alone can never verify a
/// machine token, whatever claims it checks.
pub fn machine_key(key: &[u8]) -> [u8; 32] {
    let mut derive = mac(key);
    derive.update(MACHINE_KEY_LABEL);
    derive.finalize().into_bytes().into()
}

/// What the device key is derived under.
const DEVICE_KEY_LABEL: &[u8] = b"handoff device access token key v1";

/// The key access tokens minted from a device are signed with, derived as [`machine_key`] is:
/// no service that verifies with the signing key alone accepts one.
pub fn device_key(key: &[u8]) -> [u8; 32] {
    let mut derive = mac(key);
    derive.update(DEVICE_KEY_LABEL);
    derive.finalize().into_bytes().into()
}

/// What the machine credential key is derived under.
const CREDENTIAL_KEY_LABEL: &[u8] = b"handoff machine credential key v1";

/// The key machine credentials are signed with, derived as [`machine_key`] is: a credential
/// is this service's own, and no token of another key is ever one.
pub fn credential_key(key: &[u8]) -> [u8; 32] {
    let mut derive = mac(key);
    derive.update(CREDENTIAL_KEY_LABEL);
    derive.finalize().into_bytes().into()
}

/// The device an access token names.
#[derive(Deserialize, Serialize)]
struct DeviceClaim {
    #[serde(default)]
    did: Option<String>,
}

/// Whether `signature` signs `signed` under `key`, compared in constant time.
fn signs(key: &[u8], signed: &str, signature: &[u8]) -> bool {
    let mut check = mac(key);
    check.update(signed.as_bytes());
    check.verify_slice(signature).is_ok()
}

/// Verifies `token` at `now_s` (seconds since the epoch), requiring no issuer or audience.
pub fn verify(token: &str, key: &[u8], now_s: i64) -> Result<Claims, TokenError> {
    verify_with(token, key, now_s, &Expect::default())
}

/// Verifies `token` at `now_s`, and its `iss` and `aud` where `expect` names them.
pub fn verify_with(token: &str, key: &[u8], now_s: i64, expect: &Expect) -> Result<Claims, TokenError> {
    verify_caller(token, key, now_s, expect).map(|(claims, _)| claims)
}

/// [`verify_with`], and the device an owner's access token was minted from (`None` for a token
/// of the identity provider, or a machine's).
pub fn verify_caller(
    token: &str,
    key: &[u8],
    now_s: i64,
    expect: &Expect,
) -> Result<(Claims, Option<String>), TokenError> {
    if token.len() > TOKEN_BYTES_MAX {
        return Err(TokenError::TooLong);
    }
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let header: Header = decode_json(header_b64)?;
    if header.alg != "HS256" {
        return Err(TokenError::Algorithm);
    }
    let signature = URL_SAFE_NO_PAD.decode(signature_b64).map_err(|_| TokenError::Malformed)?;
    let signed = &token[..header_b64.len() + 1 + payload_b64.len()];
    let (role, from_device) = if signs(key, signed, &signature) {
        (Role::Owner, false)
    } else if signs(&machine_key(key), signed, &signature) {
        (Role::Machine, false)
    } else if signs(&device_key(key), signed, &signature) {
        (Role::Owner, true)
    } else if signs(&credential_key(key), signed, &signature) {
        (Role::Credential, false)
    } else {
        return Err(TokenError::Signature);
    };

    let claims: Claims = decode_json(payload_b64)?;
    if claims.role != role {
        return Err(TokenError::WrongKey);
    }
    if !crate::input::is_id(&claims.sub) {
        return Err(TokenError::Malformed);
    }
    if now_s > claims.exp.saturating_add(TOKEN_CLOCK_SKEW_S) {
        return Err(TokenError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| now_s < nbf.saturating_sub(TOKEN_CLOCK_SKEW_S)) {
        return Err(TokenError::NotYetValid);
    }
    check_role_claims(&claims)?;
    if expect.issuer.is_some() || expect.audience.is_some() {
        let registered: Registered = decode_json(payload_b64)?;
        if let Some(issuer) = &expect.issuer {
            if registered.iss.as_deref() != Some(issuer.as_str()) {
                return Err(TokenError::Issuer);
            }
        }
        if let Some(audience) = &expect.audience {
            if !registered.aud.as_ref().is_some_and(|aud| aud.names(audience)) {
                return Err(TokenError::Audience);
            }
        }
    }
    if !from_device {
        return Ok((claims, None));
    }
    let device = decode_json::<DeviceClaim>(payload_b64)?.did;
    match device {
        Some(did) if handoff_core::owner::devices::is_device_id(&did) && claims.role == Role::Owner => {
            Ok((claims, Some(did)))
        }
        _ => Err(TokenError::MissingDevice),
    }
}

/// What each role's claims must name: a machine token its hand-off and life, a machine
/// credential its machine and enrolment.
fn check_role_claims(claims: &Claims) -> Result<(), TokenError> {
    if claims.role == Role::Machine && claims.hid.is_none() {
        return Err(TokenError::MissingHandoff);
    }
    if claims.role == Role::Machine && claims.inc.is_none() {
        return Err(TokenError::MissingIncarnation);
    }
    if claims.role == Role::Credential
        && (claims.inc.is_none() || !claims.mch.as_deref().is_some_and(crate::input::is_id))
    {
        return Err(TokenError::MissingMachine);
    }
    Ok(())
}

fn decode_json<T: for<'de> Deserialize<'de>>(part: &str) -> Result<T, TokenError> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Malformed)?;
    handoff_core::json::from_slice(&bytes).map_err(|_| TokenError::Malformed)
}

/// Signs `claims` as an HS256 JWT with `key` as it is (an owner token: give a machine token
/// [`machine_key`], or mint it with [`machine_token_at`]).
pub fn mint(claims: &Claims, key: &[u8]) -> String {
    mint_with(claims, &Expect::default(), key)
}

/// [`mint`], carrying `expect`'s issuer and audience as `iss` and `aud` where they are set.
pub(crate) fn mint_with(claims: &Claims, expect: &Expect, key: &[u8]) -> String {
    mint_full(claims, expect, None, key)
}

/// [`mint_with`], naming `device` as `did` where it is given.
fn mint_full(claims: &Claims, expect: &Expect, device: Option<&str>, key: &[u8]) -> String {
    #[derive(Serialize)]
    struct Full<'a> {
        #[serde(flatten)]
        claims: &'a Claims,
        #[serde(flatten)]
        registered: Registered,
        #[serde(skip_serializing_if = "Option::is_none")]
        did: Option<&'a str>,
    }
    let registered = Registered { iss: expect.issuer.clone(), aud: expect.audience.clone().map(Audience::One) };
    let full = Full { claims, registered, did: device };
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&full).expect("claims serialise"));
    let mut signer = mac(key);
    signer.update(header.as_bytes());
    signer.update(b".");
    signer.update(payload.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(signer.finalize().into_bytes());
    format!("{header}.{payload}.{signature}")
}

/// A machine token minted now (to the second), for tools that mint their own: it acts on the
/// life of the hand-off current at `now_s` (its `inc` is the end of that second).
pub fn machine_token(owner: &str, handoff_id: &str, key: &[u8], now_s: i64) -> String {
    machine_token_at(owner, handoff_id, key, now_s.saturating_mul(1000).saturating_add(999), &Expect::default())
}

/// The machine token every create answer carries, minted at `now_ms` (its `inc`, which a new
/// hand-off takes as its life, and below which a later create ends the tokens before it):
/// valid [`MACHINE_TOKEN_TTL_S`], signed with [`machine_key`], with the deployment's `iss`
/// and `aud` where it sets them.
pub fn machine_token_at(owner: &str, handoff_id: &str, key: &[u8], now_ms: i64, expect: &Expect) -> String {
    let claims = Claims {
        sub: owner.to_string(),
        role: Role::Machine,
        hid: Some(handoff_id.to_string()),
        exp: now_ms.div_euclid(1000) + MACHINE_TOKEN_TTL_S,
        nbf: None,
        inc: Some(now_ms.max(0) as u64),
        mch: None,
    };
    mint_with(&claims, expect, &machine_key(key))
}

/// A machine credential for `owner`'s machine `machine`, enrolled at `enrolled_at` (ms, its
/// `inc`): valid [`MACHINE_CREDENTIAL_TTL_S`] unless the machine is revoked sooner, signed
/// with [`credential_key`].
pub fn machine_credential(
    owner: &str,
    machine: &str,
    enrolled_at: i64,
    key: &[u8],
    now_s: i64,
    expect: &Expect,
) -> String {
    let claims = Claims {
        sub: owner.to_string(),
        role: Role::Credential,
        hid: None,
        exp: now_s.saturating_add(MACHINE_CREDENTIAL_TTL_S),
        nbf: None,
        inc: Some(enrolled_at.max(0) as u64),
        mch: Some(machine.to_string()),
    };
    mint_with(&claims, expect, &credential_key(key))
}

/// An owner's access token minted from device `device` at `now_s`: valid
/// [`ACCESS_TOKEN_TTL_S`], signed with [`device_key`], with the deployment's `iss` and `aud`
/// where it sets them.
pub fn access_token(owner: &str, device: &str, key: &[u8], now_s: i64, expect: &Expect) -> String {
    let claims = Claims {
        sub: owner.to_string(),
        role: Role::Owner,
        hid: None,
        exp: now_s.saturating_add(ACCESS_TOKEN_TTL_S),
        nbf: None,
        inc: None,
        mch: None,
    };
    mint_full(&claims, expect, Some(device), &device_key(key))
}

/// An owner token, for development tools and tests.
pub fn owner_token(owner: &str, ttl_s: i64, key: &[u8], now_s: i64) -> String {
    let claims = Claims {
        sub: owner.to_string(),
        role: Role::Owner,
        hid: None,
        exp: now_s + ttl_s,
        nbf: None,
        inc: None,
        mch: None,
    };
    mint(&claims, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"k";
    const NOW: i64 = 1_800_000_000;

    fn owner(exp: i64) -> Claims {
        Claims { sub: "alice".into(), role: Role::Owner, hid: None, exp, nbf: None, inc: None, mch: None }
    }

    #[test]
    fn a_minted_token_verifies_to_its_claims() {
        let t = mint(&owner(NOW + 10), KEY);
        assert_eq!(verify(&t, KEY, NOW), Ok(owner(NOW + 10)));
        let m = machine_token("alice", "ho_1", KEY, NOW);
        let c = verify(&m, KEY, NOW + MACHINE_TOKEN_TTL_S).unwrap();
        assert_eq!((c.role, c.hid.as_deref()), (Role::Machine, Some("ho_1")));
    }

    #[test]
    fn expiry_allows_sixty_seconds_of_skew_and_no_more() {
        let t = mint(&owner(NOW), KEY);
        assert!(verify(&t, KEY, NOW + 60).is_ok());
        assert_eq!(verify(&t, KEY, NOW + 61), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_signed_with_another_key_is_refused() {
        let t = mint(&owner(NOW + 10), b"other");
        assert_eq!(verify(&t, KEY, NOW), Err(TokenError::Signature));
    }

    #[test]
    fn alg_none_and_other_algorithms_are_refused() {
        let t = mint(&owner(NOW + 10), KEY);
        let rest = t.split_once('.').unwrap().1;
        for alg in ["none", "HS512", "RS256"] {
            let h = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"{alg}"}}"#));
            assert_eq!(verify(&format!("{h}.{rest}"), KEY, NOW), Err(TokenError::Algorithm));
        }
    }

    #[test]
    fn a_tampered_payload_or_a_malformed_token_is_refused() {
        let t = mint(&owner(NOW + 10), KEY);
        let parts: Vec<&str> = t.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(r#"{"sub":"mallory","role":"owner","exp":9999999999}"#);
        assert_eq!(verify(&format!("{}.{}.{}", parts[0], forged, parts[2]), KEY, NOW), Err(TokenError::Signature));
        for bad in ["", "a.b", "a.b.c.d", "!!.!!.!!", &t[..t.len() - 1]] {
            assert!(verify(bad, KEY, NOW).is_err(), "{bad}");
        }
        assert_eq!(verify(&"a".repeat(TOKEN_BYTES_MAX + 1), KEY, NOW), Err(TokenError::TooLong));
    }

    #[test]
    fn exp_is_required_and_a_machine_token_must_name_its_hand_off() {
        let no_exp = {
            let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#);
            let p = URL_SAFE_NO_PAD.encode(br#"{"sub":"alice","role":"owner"}"#);
            let mut m = mac(KEY);
            m.update(format!("{h}.{p}").as_bytes());
            format!("{h}.{p}.{}", URL_SAFE_NO_PAD.encode(m.finalize().into_bytes()))
        };
        assert_eq!(verify(&no_exp, KEY, NOW), Err(TokenError::Malformed));
        let m = Claims {
            sub: "alice".into(),
            role: Role::Machine,
            hid: None,
            exp: NOW + 10,
            nbf: None,
            inc: None,
            mch: None,
        };
        let machine = machine_key(KEY);
        assert_eq!(verify(&mint(&m, &machine), KEY, NOW), Err(TokenError::MissingHandoff));
        let no_life = Claims { hid: Some("ho_1".into()), ..m };
        assert_eq!(
            verify(&mint(&no_life, &machine), KEY, NOW),
            Err(TokenError::MissingIncarnation),
            "bound to no life, it would outlive an erasure"
        );
        assert!(verify(&mint(&Claims { inc: Some(1), ..no_life }, &machine), KEY, NOW).is_ok());
    }

    fn signed(payload: &str) -> String {
        let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#);
        let p = URL_SAFE_NO_PAD.encode(payload);
        let mut m = mac(KEY);
        m.update(format!("{h}.{p}").as_bytes());
        format!("{h}.{p}.{}", URL_SAFE_NO_PAD.encode(m.finalize().into_bytes()))
    }

    #[test]
    fn an_issuer_and_an_audience_are_checked_only_where_the_deployment_sets_them() {
        let exp = NOW + 10;
        let with = signed(&format!(
            r#"{{"sub":"alice","role":"owner","exp":{exp},"iss":"https://id.example","aud":["x","handoff"]}}"#
        ));
        let without = signed(&format!(r#"{{"sub":"alice","role":"owner","exp":{exp}}}"#));
        let other_aud =
            signed(&format!(r#"{{"sub":"alice","role":"owner","exp":{exp},"iss":"https://id.example","aud":"else"}}"#));
        let expect = Expect { issuer: Some("https://id.example".into()), audience: Some("handoff".into()) };
        assert!(verify_with(&with, KEY, NOW, &expect).is_ok());
        assert!(verify(&without, KEY, NOW).is_ok(), "unset, neither claim is read");
        assert_eq!(verify_with(&without, KEY, NOW, &expect), Err(TokenError::Issuer));
        assert_eq!(verify_with(&other_aud, KEY, NOW, &expect), Err(TokenError::Audience));
        let only_aud = Expect { issuer: None, audience: Some("else".into()) };
        assert!(verify_with(&other_aud, KEY, NOW, &only_aud).is_ok(), "a single-string aud names its audience");
        let wrong_iss = Expect { issuer: Some("https://other".into()), audience: None };
        assert_eq!(verify_with(&with, KEY, NOW, &wrong_iss), Err(TokenError::Issuer));
    }

    /// What another service sharing the signing key does with a token: verify HS256 under the
    /// key, then read `sub` and `exp` only.
    fn accepted_elsewhere(token: &str, key: &[u8]) -> bool {
        let (signed, signature) = token.rsplit_once('.').unwrap();
        signs(key, signed, &URL_SAFE_NO_PAD.decode(signature).unwrap())
    }

    #[test]
    fn a_machine_token_follows_the_issuer_settings_verifies_here_alone_and_never_passes_as_an_owners() {
        let expect = Expect { issuer: Some("https://id.example".into()), audience: Some("handoff".into()) };
        for settings in [Expect::default(), expect.clone()] {
            let m = machine_token_at("alice", "ho_1", KEY, NOW * 1000, &settings);
            let claims = verify_with(&m, KEY, NOW, &settings).expect("this service accepts its own machine token");
            assert_eq!(
                (claims.role, claims.hid.as_deref(), claims.inc),
                (Role::Machine, Some("ho_1"), Some(NOW as u64 * 1000))
            );
            let payload: serde_json::Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(m.split('.').nth(1).unwrap()).unwrap()).unwrap();
            assert_eq!(
                payload.get("iss").and_then(|v| v.as_str()),
                settings.issuer.as_deref(),
                "iss exactly where it is set"
            );
            assert_eq!(
                payload.get("aud").and_then(|v| v.as_str()),
                settings.audience.as_deref(),
                "aud exactly where it is set"
            );
            assert!(!accepted_elsewhere(&m, KEY), "a service verifying with the signing key alone never accepts it");
            // Re-signed with the signing key, as an owner's token would be, it is refused here.
            let (signed, _) = m.rsplit_once('.').unwrap();
            let mut s = mac(KEY);
            s.update(signed.as_bytes());
            let forged = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(s.finalize().into_bytes()));
            assert_eq!(verify_with(&forged, KEY, NOW, &settings), Err(TokenError::WrongKey));
        }
        // Minted without the settings, the deployment that sets them refuses it; owner tokens
        // signed with the machine key are never an owner's.
        let bare = machine_token_at("alice", "ho_1", KEY, NOW * 1000, &Expect::default());
        assert_eq!(verify_with(&bare, KEY, NOW, &expect), Err(TokenError::Issuer));
        let owner_with_machine_key = mint(&owner(NOW + 10), &machine_key(KEY));
        assert_eq!(verify(&owner_with_machine_key, KEY, NOW), Err(TokenError::WrongKey));
        assert_ne!(machine_key(KEY), machine_key(b"other"), "the machine key follows the signing key");
        assert!(
            accepted_elsewhere(&owner_token("alice", 60, KEY, NOW), KEY),
            "owner tokens stay the identity provider's kind"
        );
    }

    const DEVICE: &str = "dv_AAAAAAAAAAAAAAAAAAAA-_";

    #[test]
    fn an_access_token_from_a_device_is_an_owners_names_its_device_lasts_its_ttl_and_passes_nowhere_else() {
        let t = access_token("alice", DEVICE, KEY, NOW, &Expect::default());
        let (claims, device) = verify_caller(&t, KEY, NOW, &Expect::default()).unwrap();
        assert_eq!((claims.role, claims.sub.as_str(), device.as_deref()), (Role::Owner, "alice", Some(DEVICE)));
        assert_eq!(claims.exp, NOW + ACCESS_TOKEN_TTL_S);
        assert!(ACCESS_TOKEN_TTL_S <= 600, "at most 10 minutes");
        assert_eq!(
            verify_caller(&t, KEY, NOW + ACCESS_TOKEN_TTL_S + TOKEN_CLOCK_SKEW_S + 1, &Expect::default()).unwrap_err(),
            TokenError::Expired,
            "refused after its life"
        );
        assert!(!accepted_elsewhere(&t, KEY), "a service verifying with the signing key alone never accepts it");
        // An identity provider's owner token is from no device, whatever claims it carries.
        let idp = signed(&format!(r#"{{"sub":"alice","role":"owner","exp":{},"did":"{DEVICE}"}}"#, NOW + 10));
        assert_eq!(verify_caller(&idp, KEY, NOW, &Expect::default()).unwrap().1, None);
        // Signed with the device key, a token naming no device, or a machine's, is refused.
        let no_device = mint(&owner(NOW + 10), &device_key(KEY));
        assert_eq!(verify(&no_device, KEY, NOW), Err(TokenError::MissingDevice));
        let machine = Claims { role: Role::Machine, hid: Some("ho_1".into()), inc: Some(1), ..owner(NOW + 10) };
        assert_eq!(
            verify(&mint_full(&machine, &Expect::default(), Some(DEVICE), &device_key(KEY)), KEY, NOW),
            Err(TokenError::WrongKey)
        );
        assert_ne!(device_key(KEY), machine_key(KEY), "each kind of token has its own key");
    }

    #[test]
    fn a_token_is_not_valid_before_its_nbf_less_sixty_seconds_of_skew() {
        let c = Claims { nbf: Some(NOW), ..owner(NOW + 600) };
        let t = mint(&c, KEY);
        assert_eq!(verify(&t, KEY, NOW - 61), Err(TokenError::NotYetValid));
        assert!(verify(&t, KEY, NOW - 60).is_ok());
        assert!(verify(&t, KEY, NOW).is_ok());
        assert!(verify(&t, KEY, NOW + 1).is_ok());
    }

    #[test]
    fn a_machine_token_lasts_its_ttl_and_an_owner_token_the_ttl_it_is_given() {
        let m = verify(&machine_token("alice", "ho_1", KEY, NOW), KEY, NOW).unwrap();
        assert_eq!(m.exp, NOW + MACHINE_TOKEN_TTL_S);
        let o = verify(&owner_token("alice", 300, KEY, NOW), KEY, NOW).unwrap();
        assert_eq!(o, owner(NOW + 300));
    }

    #[test]
    fn a_token_of_exactly_the_size_cap_is_read_and_not_refused_as_too_long() {
        let at_cap = "a".repeat(TOKEN_BYTES_MAX);
        assert_eq!(verify(&at_cap, KEY, NOW), Err(TokenError::Malformed));
    }

    #[test]
    fn an_audience_array_that_does_not_name_this_service_is_refused() {
        let exp = NOW + 10;
        let t = signed(&format!(r#"{{"sub":"alice","role":"owner","exp":{exp},"aud":["x","y"]}}"#));
        let expect = Expect { issuer: None, audience: Some("handoff".into()) };
        assert_eq!(verify_with(&t, KEY, NOW, &expect), Err(TokenError::Audience));
    }

    #[test]
    fn every_refusal_says_why_in_words_of_its_own() {
        use TokenError::*;
        let all = [
            TooLong,
            Malformed,
            Algorithm,
            Signature,
            Expired,
            NotYetValid,
            MissingHandoff,
            MissingIncarnation,
            Issuer,
            Audience,
            WrongKey,
            MissingDevice,
            MissingMachine,
        ];
        let messages: std::collections::BTreeSet<&str> = all.iter().map(|e| e.message()).collect();
        assert_eq!(messages.len(), all.len(), "one message per reason");
        assert!(Expired.message().contains("expired"));
        assert!(messages.iter().all(|m| m.contains("token")), "{messages:?}");
    }

    #[test]
    fn outside_local_the_development_key_and_short_keys_are_not_usable() {
        let strong = [7u8; SIGNING_KEY_BYTES_MIN];
        assert!(key_is_usable(&strong, false));
        assert!(!key_is_usable(&strong[..SIGNING_KEY_BYTES_MIN - 1], false));
        assert!(!key_is_usable(DEV_SIGNING_KEY.as_bytes(), false));
        assert!(!key_is_usable(b"", false));
        assert!(key_is_usable(DEV_SIGNING_KEY.as_bytes(), true), "local development keeps the public key");
        assert!(!key_is_usable(b"", true));
    }
}
