//! Devices, against the real Worker: an owner token signs a browser in as a device
//! (a credential in a cookie scoped to the refresh, and a short-lived access token); the refresh
//! is the one route a cookie authenticates, behind its CSRF defence; devices are listed,
//! renamed and revoked, and a revoke takes the device's push subscriptions; an access token
//! never signs a device in and is refused after its life; devices per owner and sign-ins per
//! minute are bounded.

use handoff_api::token::{self, Expect};
use handoff_core::limits::{
    ACCESS_TOKEN_TTL_S, DEVICES_PER_OWNER_MAX, DEVICE_LIFE_MS_MAX, DEVICE_SIGN_INS_PERIOD_MS,
    DEVICE_SIGN_INS_PER_PERIOD_MAX, TOKEN_CLOCK_SKEW_S,
};
use handoff_it::peers::PushService;
use handoff_it::{key, now_s, owner, unique, Answer, Client};
use handoff_notify::DEV_VAPID_PUBLIC_KEY;
use serde_json::{json, Value};
use std::time::Duration;

/// A browser of the owner's: its cookie once signed in.
struct Browser {
    cookie: String,
    access: String,
    device: String,
}

fn sign_in(c: &Client, owner_token: &str, name: &str) -> Answer {
    c.post("/v1/devices", owner_token, json!({"name": name}))
}

fn signed_in(c: &Client, owner_token: &str, name: &str) -> Browser {
    let a = sign_in(c, owner_token, name);
    assert_eq!(a.status, 201, "{}", a.text);
    let set = a.set_cookie.clone().expect("a sign-in sets the device's cookie");
    Browser {
        cookie: set.split(';').next().unwrap().to_string(),
        access: a.body["access_token"].as_str().unwrap().to_string(),
        device: a.body["device"]["id"].as_str().unwrap().to_string(),
    }
}

fn refresh(c: &Client, cookie: Option<&str>, header: Option<&str>, origin: Option<&str>) -> Answer {
    let mut headers: Vec<(&str, &str)> = Vec::new();
    if let Some(cookie) = cookie {
        headers.push(("Cookie", cookie));
    }
    if let Some(h) = header {
        headers.push(("Handoff-Refresh", h));
    }
    if let Some(o) = origin {
        headers.push(("Origin", o));
    }
    c.send("POST", "/v1/devices/refresh", None, &headers, None)
}

fn refreshed(c: &Client, b: &Browser) -> Answer {
    refresh(c, Some(&b.cookie), Some("1"), Some(&c.base))
}

fn devices(c: &Client, token: &str) -> Vec<Value> {
    let a = c.get("/v1/devices", token);
    assert_eq!(a.status, 200, "{}", a.text);
    a.body["devices"].as_array().unwrap().clone()
}

#[test]
fn an_owner_token_signs_a_device_in_with_an_http_only_strict_cookie_scoped_to_the_refresh_and_a_short_access_token() {
    let c = Client::shared();
    let name = unique("alice");
    let alice = owner(&name);
    let a = sign_in(&c, &alice, "Chromium on Linux");
    assert_eq!(a.status, 201, "{}", a.text);
    let cookie = a.set_cookie.as_deref().unwrap();
    for part in ["handoff_device=", "; Path=/v1/devices/refresh", "; HttpOnly", "; SameSite=Strict"] {
        assert!(cookie.contains(part), "{cookie} has {part}");
    }
    assert!(cookie.contains(&format!("; Max-Age={}", DEVICE_LIFE_MS_MAX / 1000)), "{cookie}");
    assert!(!cookie.contains("Secure"), "on loopback a browser keeps no Secure cookie over HTTP: {cookie}");
    assert_eq!(a.cache_control.as_deref(), Some("no-store"));
    assert!(!a.text.contains(cookie.split(';').next().unwrap()), "the credential is in the cookie alone");
    assert_eq!(a.body["expires_in"], ACCESS_TOKEN_TTL_S);
    assert!(ACCESS_TOKEN_TTL_S <= 600);
    let access = a.body["access_token"].as_str().unwrap();
    let (claims, device) = token::verify_caller(access, &key(), now_s(), &Expect::default()).unwrap();
    assert_eq!((claims.sub.as_str(), device.as_deref()), (name.as_str(), a.body["device"]["id"].as_str()));
    assert!((claims.exp - now_s() - ACCESS_TOKEN_TTL_S).abs() <= 5, "the access token lives its named life");
    // The access token is the owner's on every owner route.
    let (id, _, _) = c.create(access);
    assert_eq!(c.get(&format!("/v1/handoffs/{id}"), &alice).status, 200);
    assert_eq!(c.get("/v1/handoffs", access).status, 200);
}

#[test]
fn a_refresh_with_the_cookie_header_and_origin_answers_a_fresh_access_token_and_marks_the_device_seen() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let b = signed_in(&c, &alice, "phone");
    let before = devices(&c, &b.access)[0]["last_seen_at"].clone();
    std::thread::sleep(Duration::from_millis(20));
    let a = refreshed(&c, &b);
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.set_cookie, None, "a refresh sets no cookie");
    assert_eq!(a.body["device"]["id"], json!(b.device));
    let fresh = a.body["access_token"].as_str().unwrap();
    assert_eq!(c.get("/v1/handoffs", fresh).status, 200);
    let listed = devices(&c, fresh);
    assert_ne!(listed[0]["last_seen_at"], before, "a refresh marks it seen");
}

#[test]
fn a_refresh_without_the_header_or_from_another_origin_is_refused_even_with_the_cookie() {
    let c = Client::shared();
    let b = signed_in(&c, &owner(&unique("alice")), "laptop");
    let me = c.base.clone();
    for (what, header, origin) in [
        ("no header", None, Some(me.as_str())),
        ("another header value", Some("0"), Some(me.as_str())),
        ("no Origin", Some("1"), None),
        ("another origin", Some("1"), Some("https://evil.example")),
    ] {
        let a = refresh(&c, Some(&b.cookie), header, origin);
        assert_eq!((a.status, a.code()), (403, "auth.forbidden"), "{what}: {}", a.text);
    }
    let none = refresh(&c, None, Some("1"), Some(&me));
    assert_eq!((none.status, none.code()), (401, "auth.required"), "{}", none.text);
    // A bearer token is no credential on the refresh, and a cookie is none elsewhere.
    let with_bearer =
        c.send("POST", "/v1/devices/refresh", Some(&b.access), &[("Handoff-Refresh", "1"), ("Origin", &me)], None);
    assert_eq!(with_bearer.code(), "auth.required");
    let cookie_only = c.send("GET", "/v1/handoffs", None, &[("Cookie", &b.cookie)], None);
    assert_eq!((cookie_only.status, cookie_only.code()), (401, "auth.required"), "every other route is bearer-only");
    assert_eq!(refreshed(&c, &b).status, 200, "the defence met, the same cookie refreshes");
}

#[test]
fn a_devices_access_token_never_signs_a_device_in_and_neither_does_a_machine_token() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let b = signed_in(&c, &alice, "phone");
    let again = sign_in(&c, &b.access, "chained");
    assert_eq!((again.status, again.code()), (403, "auth.forbidden"), "{}", again.text);
    assert_eq!(again.set_cookie, None);
    let refreshed_token = refreshed(&c, &b).body["access_token"].as_str().unwrap().to_string();
    assert_eq!(sign_in(&c, &refreshed_token, "chained").code(), "auth.forbidden", "a refreshed one neither");
    let (_, machine, _) = c.create(&alice);
    assert_eq!(sign_in(&c, &machine, "machine").code(), "auth.forbidden");
    assert_eq!(devices(&c, &alice).len(), 1, "nothing was signed in");
}

#[test]
fn an_access_token_is_refused_after_its_life() {
    let c = Client::shared();
    let name = unique("alice");
    let b = signed_in(&c, &owner(&name), "phone");
    // Minted as the service mints it, its life ago (and the skew the service tolerates).
    let gone = token::access_token(
        &name,
        &b.device,
        &key(),
        now_s() - ACCESS_TOKEN_TTL_S - TOKEN_CLOCK_SKEW_S - 1,
        &Expect::default(),
    );
    let a = c.get("/v1/handoffs", &gone);
    assert_eq!((a.status, a.code()), (401, "auth.invalid"), "{}", a.text);
    assert!(a.text.contains("expired"), "{}", a.text);
    let live = token::access_token(&name, &b.device, &key(), now_s() - ACCESS_TOKEN_TTL_S + 30, &Expect::default());
    assert_eq!(c.get("/v1/handoffs", &live).status, 200, "within its life it is accepted");
}

#[test]
fn devices_are_listed_with_the_current_one_marked_renamed_and_revoked_and_a_revoked_devices_refresh_is_auth_revoked() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let phone = signed_in(&c, &alice, "phone");
    let desk = signed_in(&c, &alice, "desk");
    let listed = devices(&c, &phone.access);
    let seen: Vec<(&str, bool)> =
        listed.iter().map(|d| (d["name"].as_str().unwrap(), d["current"].as_bool().unwrap())).collect();
    assert_eq!(seen, [("phone", true), ("desk", false)]);
    assert!(devices(&c, &alice).iter().all(|d| d["current"] == false), "an owner token is from no device");

    let renamed = c.send(
        "PATCH",
        &format!("/v1/devices/{}", desk.device),
        Some(&phone.access),
        &[],
        Some(br#"{"name": "office desk"}"#),
    );
    assert_eq!(
        (renamed.status, renamed.body["device"]["name"].as_str()),
        (200, Some("office desk")),
        "{}",
        renamed.text
    );
    let bad = c.send("PATCH", &format!("/v1/devices/{}", desk.device), Some(&alice), &[], Some(br#"{"name": ""}"#));
    assert_eq!((bad.status, bad.code()), (400, "request.invalid"));

    let revoked = c.send("DELETE", &format!("/v1/devices/{}", desk.device), Some(&phone.access), &[], None);
    assert_eq!(revoked.status, 204, "{}", revoked.text);
    let after = refreshed(&c, &desk);
    assert_eq!((after.status, after.code()), (401, "auth.revoked"), "{}", after.text);
    assert_eq!(after.www_authenticate.as_deref(), Some("Bearer"));
    // Its access token lasts its own life: a revoke takes effect within it.
    assert_eq!(c.get("/v1/handoffs", &desk.access).status, 200);
    let again = c.send("DELETE", &format!("/v1/devices/{}", desk.device), Some(&alice), &[], None);
    assert_eq!((again.status, again.code()), (404, "device.not_found"));
    let other = c.send("DELETE", "/v1/devices/nope", Some(&alice), &[], None);
    assert_eq!((other.status, other.code()), (404, "device.not_found"));
    // Another owner sees none of them, and cannot revoke them.
    let bob = owner(&unique("bob"));
    assert!(devices(&c, &bob).is_empty());
    let theirs = c.send("DELETE", &format!("/v1/devices/{}", phone.device), Some(&bob), &[], None);
    assert_eq!(theirs.code(), "device.not_found");
    assert_eq!(refreshed(&c, &phone).status, 200);
}

#[test]
fn revoke_all_keeps_the_callers_device_or_none_and_each_revoked_device_is_signed_out() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let all: Vec<Browser> = (0..3).map(|i| signed_in(&c, &alice, &format!("browser {i}"))).collect();
    let kept = c.post("/v1/devices/revoke-all", &all[0].access, json!({"keep_current": true}));
    assert_eq!((kept.status, kept.body["revoked"].as_u64()), (200, Some(2)), "{}", kept.text);
    assert_eq!(refreshed(&c, &all[0]).status, 200);
    for b in &all[1..] {
        assert_eq!(refreshed(&c, b).code(), "auth.revoked");
    }
    let missing = c.post("/v1/devices/revoke-all", &alice, json!({}));
    assert_eq!((missing.status, missing.code()), (400, "request.invalid"));
    let none = c.post("/v1/devices/revoke-all", &all[0].access, json!({"keep_current": false}));
    assert_eq!(none.body["revoked"], 1);
    assert_eq!(refreshed(&c, &all[0]).code(), "auth.revoked", "signing out everywhere signs this one out too");
    assert!(devices(&c, &alice).is_empty());
}

#[test]
fn revoking_a_device_removes_the_push_subscriptions_made_from_it_and_keeps_the_others() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    let service = PushService::start(DEV_VAPID_PUBLIC_KEY);
    let phone = signed_in(&c, &alice, "phone");
    let desk = signed_in(&c, &alice, "desk");
    let made = |token: &str| {
        let a = c.post("/v1/push/subscriptions", token, service.subscribe().json());
        assert_eq!(a.status, 201, "{}", a.text);
        a.body["subscription"].clone()
    };
    let from_phone = made(&phone.access);
    let from_desk = made(&desk.access);
    let from_owner = made(&alice);
    assert_eq!(from_phone["device"], json!(phone.device), "a subscription made from a device belongs to it");
    assert_eq!(from_owner["device"], Value::Null);
    assert_eq!(c.send("DELETE", &format!("/v1/devices/{}", phone.device), Some(&alice), &[], None).status, 204);
    let left: Vec<Value> = c.get("/v1/push/subscriptions", &alice).body["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].clone())
        .collect();
    assert_eq!(left, [from_desk["id"].clone(), from_owner["id"].clone()]);
    // The revoked device's access token still lives, but makes no subscription of a device gone.
    let late = c.post("/v1/push/subscriptions", &phone.access, service.subscribe().json());
    assert_eq!((late.status, late.code()), (401, "auth.revoked"), "{}", late.text);
    // A needs-you reaches the subscriptions left, and none of the phone's.
    let (id, machine, _) = c.create(&alice);
    assert_eq!(c.report(&id, &machine, 1, "needs-you", Some("which branch?")).status, 200);
    let got = service.wait_for(2, Duration::from_secs(60));
    assert_eq!(got.len(), 2, "{got:?}");
}

/// Sleeps out the sign-ins' period once, so it takes a minute.
#[test]
fn devices_per_owner_and_sign_ins_per_minute_are_bounded_and_named() {
    let c = Client::shared();
    let alice = owner(&unique("alice"));
    for i in 0..DEVICE_SIGN_INS_PER_PERIOD_MAX {
        assert_eq!(sign_in(&c, &alice, &format!("b{i}")).status, 201);
    }
    let fast = sign_in(&c, &alice, "one too many");
    assert_eq!((fast.status, fast.code()), (429, "device.rate_limited"), "{}", fast.text);
    assert_eq!(fast.retry_after.as_deref(), Some("60"));
    assert_eq!(fast.set_cookie, None, "a refused sign-in sets no cookie");
    std::thread::sleep(Duration::from_millis(DEVICE_SIGN_INS_PERIOD_MS as u64 + 1_000));
    for i in DEVICE_SIGN_INS_PER_PERIOD_MAX..DEVICES_PER_OWNER_MAX {
        let a = sign_in(&c, &alice, &format!("b{i}"));
        assert_eq!(a.status, 201, "{}", a.text);
    }
    let full = sign_in(&c, &alice, "one too many");
    assert_eq!((full.status, full.code()), (409, "device.too_many"), "{}", full.text);
    assert_eq!(devices(&c, &alice).len(), DEVICES_PER_OWNER_MAX);
    let bad = c.post("/v1/devices", &alice, json!({"name": "x".repeat(65)}));
    assert_eq!((bad.status, bad.code()), (400, "request.invalid"));
}
