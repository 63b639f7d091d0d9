//! Every binding and variable the Worker reads, by name, and what each switches. The test and
//! bench routes exist only where `HANDOFF_ENV` is `local` *and* their variable is `1`, so that
//! no deployed environment can open them whatever its variables say.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use handoff_api::admission::Setting;
use handoff_api::error::ApiError;
use handoff_api::token::{self, Expect};
use handoff_core::decider::Caps;
use handoff_core::role::PerRole;
use worker::{console_error, web_sys, Env, Result};

/// The hand-offs' Durable Object namespace, as in wrangler.toml.
pub const HANDOFFS: &str = "HANDOFFS";
/// The owners' index Durable Object namespace, as in wrangler.toml.
pub const OWNER_INDEX: &str = "OWNER_INDEX";
/// The pending enrolments' Durable Object namespace (one object, across owners).
pub const ENROLMENTS: &str = "ENROLMENTS";
/// The owners' machines' Durable Object namespace (one object per owner).
pub const MACHINES: &str = "MACHINES";
/// `development`, `staging` or `production`, as in wrangler.toml, or `local`, which only local
/// runs set (`--var`); absent or any other value is deployed.
pub const ENV: &str = "HANDOFF_ENV";
/// The HS256 signing key (a secret in deployed environments).
pub const SIGNING_KEY: &str = "HANDOFF_SIGNING_KEY";
/// Optional: the `iss` every token must carry.
pub const TOKEN_ISSUER: &str = "HANDOFF_TOKEN_ISSUER";
/// Optional: the `aud` every token must name.
pub const TOKEN_AUDIENCE: &str = "HANDOFF_TOKEN_AUDIENCE";
/// Test hooks (`/v1/test/*`), local only: set by `scripts/test` on the command line.
pub const TEST_HOOKS: &str = "HANDOFF_TEST_HOOKS";
/// With test hooks: a lower cap on each role's waits, so a test can fill it.
pub const TEST_WAITERS_MAX: &str = "HANDOFF_TEST_WAITERS_MAX";
/// With test hooks: a lower cap on each role's watching sockets, so a test can fill it.
pub const TEST_WATCHERS_MAX: &str = "HANDOFF_TEST_WATCHERS_MAX";
/// The benchmark's floor route (`/v1/bench/floor`), local only: set by `scripts/bench`.
pub const BENCH_FLOOR: &str = "HANDOFF_BENCH_FLOOR";
/// The VAPID private key (a secret; base64url of the P-256 scalar). Outside `local` the
/// public development pair is refused.
pub const VAPID_PRIVATE_KEY: &str = "HANDOFF_VAPID_PRIVATE_KEY";
/// The contact VAPID tokens name (`mailto:` or `https:`); required outside `local`.
pub const VAPID_SUBJECT: &str = "HANDOFF_VAPID_SUBJECT";
/// With test hooks: a lower cap on an owner's pending webhook deliveries, so a test can fill it.
pub const TEST_WEBHOOK_PENDING_MAX: &str = "HANDOFF_TEST_WEBHOOK_PENDING_MAX";
/// Days a closed hand-off is kept (`handoff_core::retention`); absent is the named default.
pub const RETENTION_DAYS: &str = "HANDOFF_RETENTION_DAYS";
/// With test hooks: a lower cap on each owner's open hand-offs, so a test can reach it.
pub const TEST_OPEN_HANDOFFS_MAX: &str = "HANDOFF_TEST_OPEN_HANDOFFS_MAX";
/// With the bench floor: another cap on each owner's open hand-offs, so that the benchmark can
/// spread its load over more hand-offs of one owner than the named cap.
pub const BENCH_OPEN_HANDOFFS_MAX: &str = "HANDOFF_BENCH_OPEN_HANDOFFS_MAX";
/// The runtime's rate-limiting binding that counts each owner's creates (wrangler.toml's
/// `[[ratelimits]]`, `simple.limit` = `CREATES_PER_OWNER_PER_MINUTE_MAX`).
pub const CREATE_LIMITER: &str = "CREATE_LIMITER";

fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|v| v.to_string())
}

/// Whether this is a local run (`wrangler dev`, `workerd serve` from the tests).
pub fn is_local(env: &Env) -> bool {
    var(env, ENV).as_deref() == Some("local")
}

fn local_switch(env: &Env, name: &str) -> bool {
    is_local(env) && var(env, name).as_deref() == Some("1")
}

pub fn test_hooks_on(env: &Env) -> bool {
    local_switch(env, TEST_HOOKS)
}

pub fn bench_floor_on(env: &Env) -> bool {
    local_switch(env, BENCH_FLOOR)
}

/// A test's cap from `name`, where test hooks are on and it is set.
fn test_cap(env: &Env, name: &str) -> Option<usize> {
    test_hooks_on(env).then(|| var(env, name).and_then(|v| v.parse().ok())).flatten()
}

/// The caps a hand-off's session holds its waits and watching sockets to: the named limits,
/// or the lower ones a test sets where test hooks are on (so that a cap can be reached without
/// ten thousand connections).
pub fn caps(env: &Env) -> Caps {
    let mut caps = Caps::default();
    if let Some(n) = test_cap(env, TEST_WAITERS_MAX) {
        caps.waiters = PerRole::new(n, n);
    }
    if let Some(n) = test_cap(env, TEST_WATCHERS_MAX) {
        caps.watchers = PerRole::new(n, n);
    }
    caps
}

/// The cap on an owner's pending webhook deliveries: the named limit, or a test's lower one.
pub fn webhook_pending_max(env: &Env) -> usize {
    test_cap(env, TEST_WEBHOOK_PENDING_MAX).unwrap_or(handoff_core::limits::WEBHOOK_PENDING_PER_OWNER_MAX)
}

/// The endpoint rule of this environment.
pub fn endpoints(env: &Env) -> handoff_notify::Environment {
    if is_local(env) {
        handoff_notify::Environment::Local
    } else {
        handoff_notify::Environment::Deployed
    }
}

/// This environment's push sender, or `None` where push is misconfigured
/// (`handoff_api::notifications::push_sender` says when).
pub fn push_sender(env: &Env) -> Option<handoff_notify::Sender> {
    let key = env.secret(VAPID_PRIVATE_KEY).map(|s| s.to_string()).ok().or_else(|| var(env, VAPID_PRIVATE_KEY));
    handoff_api::notifications::push_sender(key.as_deref(), var(env, VAPID_SUBJECT).as_deref(), endpoints(env))
}

/// The signing key: a secret, or a plain variable in local runs.
fn signing_key(env: &Env) -> Option<String> {
    env.secret(SIGNING_KEY).map(|s| s.to_string()).ok().or_else(|| var(env, SIGNING_KEY))
}

/// What a token must carry beyond its signature, where the deployment says so.
fn token_expect(env: &Env) -> Expect {
    let set = |name| var(env, name).filter(|v| !v.is_empty());
    Expect { issuer: set(TOKEN_ISSUER), audience: set(TOKEN_AUDIENCE) }
}

/// Whether this environment can authenticate anyone: a key is set and, outside `local`, is
/// neither the public development key nor too short.
fn auth_ready(env: &Env, key: Option<&str>) -> bool {
    key.is_some_and(|k| token::key_is_usable(k.as_bytes(), is_local(env)))
}

/// What the router reads of its environment on every request, read once per isolate.
///
/// A deployment's variables and secrets cannot change under a running isolate (a new
/// secret or variable is a new version of the Worker, which starts new isolates), so
/// reading them again on each request only paid for crossings into JavaScript: seven of
/// them on every request, which `scripts/profile` showed (issue 12).
fn read_setting(env: &Env) -> Setting {
    let key = signing_key(env);
    let ready = auth_ready(env, key.as_deref());
    Setting {
        store_bound: env.durable_object(HANDOFFS).is_ok() && env.durable_object(OWNER_INDEX).is_ok(),
        machines_bound: env.durable_object(ENROLMENTS).is_ok() && env.durable_object(MACHINES).is_ok(),
        // Only a usable key ([`auth_ready`]): `None` fails closed.
        key: key.filter(|_| ready),
        expect: token_expect(env),
        test_hooks: test_hooks_on(env),
        bench_floor: bench_floor_on(env),
        // Its public key is derived by the runtime's WebCrypto when asked: `crate::webcrypto::vapid_key`.
        push_key: push_sender(env).map(|sender| sender.key.pkcs8()),
        endpoints: endpoints(env),
    }
}

thread_local! {
    static SETTING: std::cell::OnceCell<std::rc::Rc<Setting>> = const { std::cell::OnceCell::new() };
}

/// This isolate's [`Setting`], read from `env` the first time.
pub fn setting(env: &Env) -> std::rc::Rc<Setting> {
    SETTING.with(|c| c.get_or_init(|| std::rc::Rc::new(read_setting(env))).clone())
}

/// The name of an owner's index object.
pub fn owner_index_name(owner: &str) -> String {
    format!("owner:{owner}")
}

/// The name of `owner`'s `Machines` object.
pub fn machines_name(owner: &str) -> String {
    format!("machines:{owner}")
}

/// The one 503 (`Refusal::unavailable`), with what failed and what the runtime said logged.
pub fn unavailable(what: &str, cause: &dyn std::fmt::Display) -> ApiError {
    console_error!("{what}: {cause}");
    ApiError::unavailable()
}

/// [`unavailable`], answered.
pub fn store_failed(what: &str, cause: &dyn std::fmt::Display) -> Result<web_sys::Response> {
    crate::http::refusal(&unavailable(what, cause))
}

/// The cap on one owner's open hand-offs: the named limit, or the one a local test (with test
/// hooks) or the benchmark (with its floor) sets.
pub fn open_handoffs_cap(env: &Env) -> usize {
    let bench = bench_floor_on(env).then(|| var(env, BENCH_OPEN_HANDOFFS_MAX).and_then(|v| v.parse().ok())).flatten();
    test_cap(env, TEST_OPEN_HANDOFFS_MAX).or(bench).unwrap_or(handoff_core::limits::OPEN_HANDOFFS_PER_OWNER_MAX)
}

/// This environment's retention; a value the core refuses is logged and the default kept.
pub fn retention(env: &Env) -> handoff_core::retention::Retention {
    handoff_core::retention::Retention::parse(var(env, RETENTION_DAYS).as_deref()).unwrap_or_else(|e| {
        console_error!("{e}; keeping the default");
        handoff_core::retention::Retention::default()
    })
}

/// Whether the runtime's rate limiter lets `owner` create another hand-off now. Where the
/// binding is absent (a Worker run without wrangler) or the runtime fails to answer, the create
/// goes on: the owner's open cap still bounds what it can make the service hold.
pub async fn creation_allowed(env: &Env, owner: &str) -> bool {
    use wasm_bindgen::JsCast;
    let raw: &wasm_bindgen::JsValue = env.as_ref();
    let Ok(limiter) = js_sys::Reflect::get(raw, &CREATE_LIMITER.into()) else {
        return true;
    };
    let Ok(limit) = js_sys::Reflect::get(&limiter, &"limit".into()).and_then(|f| f.dyn_into::<js_sys::Function>())
    else {
        return true;
    };
    let options = js_sys::Object::new();
    if js_sys::Reflect::set(&options, &"key".into(), &owner.into()).is_err() {
        return true;
    }
    let outcome = match limit
        .call1(&limiter, &options)
        .map(|p| worker::wasm_bindgen_futures::JsFuture::from(p.unchecked_into::<js_sys::Promise>()))
    {
        Ok(pending) => pending.await,
        Err(e) => Err(e),
    };
    match outcome.and_then(|o| js_sys::Reflect::get(&o, &"success".into())) {
        Ok(success) => success.as_bool() != Some(false),
        Err(e) => {
            console_error!("the create rate limiter failed: {}", worker::Error::from(e));
            true
        }
    }
}
