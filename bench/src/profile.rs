//! `handoff-bench --profile ROUTE`: where a request's CPU goes, from workerd's own sampling
//! profiler. workerd runs with its inspector on; after a warm-up, this program starts V8's
//! CPU profiler over the DevTools protocol (`Profiler.start`), sends a bounded number of
//! requests of one route one after another, stops it (`Profiler.stop`) and sums each sampled
//! function's self time, grouped as:
//!
//! - **wasm**: the Worker's WebAssembly, by Rust symbol (a build that keeps names: `scripts/profile`
//!   builds one); with `--peer`, the TypeScript peer's own code (`worker.js`) in its place;
//! - **glue**: the JavaScript that wasm-bindgen and worker-build generate around it;
//! - **runtime**: the runtime's built-ins (Request, Headers, Response, streams, SQL, …), the
//!   functions with no script of their own, and workerd's internal JavaScript;
//! - **gc**: V8's garbage collector;
//! - **program**: time V8 attributes to no JavaScript frame (workerd's C++ outside a call).
//!
//! Idle time is left out: the shares are of the time the isolate was busy.
//!
//! With `--before-build DIR`, two builds are profiled on a workerd each, in rounds whose order
//! alternates (`rounds::rotation`), and each group is quoted before → after as the median over
//! the rounds, with the range, and after ÷ before as the median of the rounds' ratios.

use crate::load::{Api, Req};
use crate::rounds::{self, Spread};
use crate::server::Server;
use crate::service;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// Sampling interval asked of V8 (µs).
pub const SAMPLING_INTERVAL_US: u64 = 100;
/// Requests sent before the profile starts, so that it sees a warm isolate, unless
/// `--warmup-requests` says (more, to see whether V8 has yet optimised the code it runs).
pub const WARMUP_REQUESTS: usize = 200;
/// The most `--warmup-requests` takes: a few minutes of reports.
pub const WARMUP_REQUESTS_MAX: usize = 100_000;
/// Requests profiled unless `--requests` says.
pub const REQUESTS_DEFAULT: usize = 2_000;
/// Functions listed under the categories, unless `HANDOFF_PROFILE_TOP` says more (a stage-by-stage
/// table sums every function: `docs/benchmarks.md`).
const TOP_FUNCTIONS: usize = 25;

fn top_functions() -> usize {
    std::env::var("HANDOFF_PROFILE_TOP").ok().and_then(|v| v.parse().ok()).unwrap_or(TOP_FUNCTIONS)
}
/// Functions listed under a before → after comparison.
const TOP_FUNCTIONS_COMPARED: usize = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /v1/health`: no object.
    Health,
    /// `GET /v1/bench/floor`: an object round trip, no auth, no storage.
    Floor,
    /// `GET /v1/handoffs/:id` as the owner.
    Get,
    /// `POST /v1/handoffs/:id/report`, each a real change.
    Report,
    /// `POST /v1/handoffs/:id/turns?dry_run=true`: the package row's compile and briefing.
    Package,
    /// `POST /v1/handoffs/:id/events`: phase 7's events row, 32-event batches by one writer.
    Events,
}

impl Route {
    pub fn parse(word: &str) -> Option<Route> {
        match word {
            "health" => Some(Route::Health),
            "floor" => Some(Route::Floor),
            "get" => Some(Route::Get),
            "report" => Some(Route::Report),
            "package" => Some(Route::Package),
            "events" => Some(Route::Events),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Route::Health => "GET /v1/health",
            Route::Floor => "GET /v1/bench/floor",
            Route::Get => "GET /v1/handoffs/:id (owner)",
            Route::Report => "POST /v1/handoffs/:id/report (each a real change)",
            Route::Package => {
                "POST /v1/handoffs/:id/turns?dry_run=true&budget=8192 (20 decisions, 20 artifacts, 100 files)"
            }
            Route::Events => "POST /v1/handoffs/:id/events (32 events a batch, one writer, 62 batches a hand-off)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    Wasm,
    Glue,
    Runtime,
    Gc,
    Program,
    Idle,
}

impl Category {
    /// The groups a profile's busy time is made of, in the tables' order.
    pub const BUSY: [Category; 5] =
        [Category::Wasm, Category::Glue, Category::Runtime, Category::Gc, Category::Program];

    fn short(self) -> &'static str {
        match self {
            Category::Wasm => "wasm",
            Category::Glue => "glue",
            Category::Runtime => "runtime",
            Category::Gc => "gc",
            Category::Program => "program",
            Category::Idle => "idle",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Category::Wasm => "the Worker's own code",
            Category::Glue => "glue (generated JS)",
            Category::Runtime => "runtime built-ins",
            Category::Gc => "garbage collection",
            Category::Program => "program (outside JS)",
            Category::Idle => "idle",
        }
    }

    /// The group of a sampled frame: by its function name for V8's pseudo-frames, else by the
    /// script it belongs to.
    pub fn of(function: &str, url: &str) -> Category {
        match function {
            "(garbage collector)" => return Category::Gc,
            "(idle)" | "(root)" => return Category::Idle,
            "(program)" => return Category::Program,
            _ => {}
        }
        if url.starts_with("wasm://") || url.ends_with(".wasm") {
            Category::Wasm
        } else if url.ends_with("index.js") || url.ends_with("shim.mjs") || url.contains("/worker/") {
            Category::Glue
        } else if url.ends_with("worker.js") {
            // The TypeScript peer's own code (`--peer`).
            Category::Wasm
        } else {
            Category::Runtime
        }
    }
}

/// One function's self time in the profile.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub category: Category,
    pub self_us: u64,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub route: Route,
    pub requests: usize,
    /// Requests sent before the profile started.
    pub warmup: usize,
    /// Busy time (all but idle) per category, µs.
    pub categories: Vec<(Category, u64)>,
    pub functions: Vec<Function>,
    pub busy_us: u64,
    pub wall: Duration,
}

/// A Rust symbol as V8 shows it, without the `::h0123…` hash and the `$` of an unnamed function.
pub fn clean_symbol(name: &str) -> String {
    let name = name.trim_start_matches('$');
    match name.rfind("::h") {
        Some(at) if name[at + 3..].len() == 16 && name[at + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => {
            name[..at].to_string()
        }
        _ => name.to_string(),
    }
}

/// Sums self time per function from a `Profiler.stop` profile: sample `i` lasts until sample
/// `i + 1` (`timeDeltas[i + 1]`).
pub fn summarise(profile: &Value, route: Route, warmup: usize, requests: usize, wall: Duration) -> Profile {
    let nodes: Vec<&Value> = profile["nodes"].as_array().into_iter().flatten().collect();
    // An anonymous function is named by its caller, the nearest one with a name.
    let mut parent: HashMap<u64, u64> = HashMap::new();
    let mut named: HashMap<u64, String> = HashMap::new();
    for node in &nodes {
        let id = node["id"].as_u64().unwrap_or(0);
        for child in node["children"].as_array().into_iter().flatten().filter_map(Value::as_u64) {
            parent.insert(child, id);
        }
        let function = node["callFrame"]["functionName"].as_str().unwrap_or("");
        if !function.is_empty() && !function.starts_with('(') {
            named.insert(id, clean_symbol(function));
        }
    }
    let caller = |mut id: u64| {
        while let Some(up) = parent.get(&id) {
            if let Some(name) = named.get(up) {
                return name.clone();
            }
            id = *up;
        }
        "the event loop".to_string()
    };
    let mut frames: HashMap<u64, (String, Category)> = HashMap::new();
    for node in &nodes {
        let frame = &node["callFrame"];
        let function = frame["functionName"].as_str().unwrap_or("");
        let url = frame["url"].as_str().unwrap_or("");
        let category = Category::of(function, url);
        let id = node["id"].as_u64().unwrap_or(0);
        let name =
            if function.is_empty() { format!("(anonymous, from {})", caller(id)) } else { clean_symbol(function) };
        let label = match category {
            Category::Runtime if !url.is_empty() => format!("{name} ({})", url.rsplit('/').next().unwrap_or(url)),
            _ => name,
        };
        frames.insert(node["id"].as_u64().unwrap_or(0), (label, category));
    }
    let samples: Vec<u64> = profile["samples"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    let deltas: Vec<u64> =
        profile["timeDeltas"].as_array().into_iter().flatten().map(|d| d.as_i64().unwrap_or(0).max(0) as u64).collect();
    let mut by_function: HashMap<(String, Category), u64> = HashMap::new();
    for (i, node) in samples.iter().enumerate() {
        let lasted = deltas.get(i + 1).copied().unwrap_or(0);
        if let Some(frame) = frames.get(node) {
            *by_function.entry(frame.clone()).or_default() += lasted;
        }
    }
    let mut categories: HashMap<Category, u64> = HashMap::new();
    for ((_, category), us) in &by_function {
        *categories.entry(*category).or_default() += us;
    }
    let mut categories: Vec<(Category, u64)> = categories.into_iter().filter(|(c, _)| *c != Category::Idle).collect();
    categories.sort();
    let busy_us = categories.iter().map(|(_, us)| us).sum();
    let mut functions: Vec<Function> = by_function
        .into_iter()
        .filter(|((_, c), _)| *c != Category::Idle)
        .map(|((name, category), self_us)| Function { name, category, self_us })
        .collect();
    functions.sort_by(|a, b| b.self_us.cmp(&a.self_us).then(a.name.cmp(&b.name)));
    Profile { route, requests, warmup, categories, functions, busy_us, wall }
}

pub fn table(p: &Profile) -> String {
    let per = |us: u64| us as f64 / p.requests.max(1) as f64;
    let share = |us: u64| 100.0 * us as f64 / p.busy_us.max(1) as f64;
    let mut out = format!(
        "profile of {}: {} requests one after another in {:.1} s, after {} to warm up; the isolate was busy {:.0} µs per request\n",
        p.route.name(),
        p.requests,
        p.wall.as_secs_f64(),
        p.warmup,
        per(p.busy_us)
    );
    out.push_str(&format!("  {:<26} {:>10} {:>7}\n", "self time by group", "µs/req", "share"));
    for (category, us) in &p.categories {
        out.push_str(&format!("  {:<26} {:>10.1} {:>6.1}%\n", category.name(), per(*us), share(*us)));
    }
    let top = top_functions();
    out.push_str(&format!("  top {top} functions by self time\n"));
    for f in p.functions.iter().take(top) {
        let name: String = f.name.chars().take(if top > TOP_FUNCTIONS { 400 } else { 90 }).collect();
        out.push_str(&format!(
            "  {:>8.1} µs {:>5.1}%  {:<7} {name}\n",
            per(f.self_us),
            share(f.self_us),
            f.category.short()
        ));
    }
    out
}

/// µs per request of one profile: of one group, or of the whole busy time (`None`).
pub fn per_request(p: &Profile, group: Option<Category>) -> f64 {
    let us = match group {
        None => p.busy_us,
        Some(group) => p.categories.iter().find(|(c, _)| *c == group).map_or(0, |(_, us)| *us),
    };
    us as f64 / p.requests.max(1) as f64
}

/// Two builds of one route, profiled in rounds: `before[r]` and `after[r]` are round r's.
#[derive(Debug, Clone)]
pub struct Compared {
    pub route: Route,
    pub requests: usize,
    /// Where each build was: `[before, after]`.
    pub builds: [String; 2],
    pub before: Vec<Profile>,
    pub after: Vec<Profile>,
}

/// One figure before → after over the rounds: each side's median with its range, and after ÷
/// before, the median of the rounds' ratios (each of one round's two profiles) with its range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub before: Option<Spread>,
    pub after: Option<Spread>,
    pub ratio: Option<Spread>,
}

impl Change {
    pub fn of(before: &[f64], after: &[f64]) -> Change {
        Change {
            before: Spread::of(before),
            after: Spread::of(after),
            ratio: Spread::of(&rounds::ratios(after, before)),
        }
    }
}

/// A function's name as two builds can share it: wasm-bindgen suffixes each import of its glue
/// with a hash of the build (`__wbg_handle_d47f161f9b04574c`), which is dropped here.
pub fn comparable_name(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((stem, hash))
            if name.starts_with("__wbg") && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            stem
        }
        _ => name,
    }
}

/// Each function's self time in µs per request, round by round (0 in a round it was not
/// sampled in), keyed by its comparable name and group.
pub fn functions_by_round(profiles: &[Profile]) -> HashMap<(String, Category), Vec<f64>> {
    let mut out: HashMap<(String, Category), Vec<f64>> = HashMap::new();
    for (round, p) in profiles.iter().enumerate() {
        for f in &p.functions {
            let rounds = out
                .entry((comparable_name(&f.name).to_string(), f.category))
                .or_insert_with(|| vec![0.0; profiles.len()]);
            rounds[round] += f.self_us as f64 / p.requests.max(1) as f64;
        }
    }
    out
}

fn show_spread(s: Option<Spread>) -> String {
    match s {
        Some(s) => format!("{:>7.1} ({:.1}–{:.1})", s.median, s.min, s.max),
        None => "-".into(),
    }
}

/// The before → after table of one route.
pub fn compare_table(c: &Compared) -> String {
    let rounds = c.before.len().min(c.after.len());
    let wall =
        |ps: &[Profile]| rounds::median(&ps.iter().map(|p| p.wall.as_secs_f64()).collect::<Vec<_>>()).unwrap_or(0.0);
    let mut out = format!(
        "profile of {}, before → after: {rounds} rounds of {} requests one after another on each build, each after {} to warm up, {:.1} s / {:.1} s each (median)\n\
         \x20 before: {}\n\
         \x20 after:  {}\n\
         \x20 the rounds alternate which build goes first: round 0 before, after; round 1 after, before; and so on\n\
         \x20 µs/req: µs of busy isolate per request, the build's median over the rounds (its lowest–highest)\n\
         \x20 after ÷ before: the median over the rounds of (after's ÷ before's, both of that round), then the lowest–highest of those ratios\n",
        c.route.name(),
        c.requests,
        c.before.first().map_or(WARMUP_REQUESTS, |p| p.warmup),
        wall(&c.before),
        wall(&c.after),
        c.builds[0],
        c.builds[1],
    );
    out.push_str(&format!(
        "  {:<26} {:>24}    {:>24}  {:>16}\n",
        "self time by group", "before µs/req", "after µs/req", "after ÷ before"
    ));
    let groups = Category::BUSY.iter().map(|&g| (g.name(), Some(g))).chain([("busy per request", None)]);
    for (name, group) in groups {
        let figure = |ps: &[Profile]| ps.iter().take(rounds).map(|p| per_request(p, group)).collect::<Vec<f64>>();
        let change = Change::of(&figure(&c.before), &figure(&c.after));
        out.push_str(&format!(
            "  {:<26} {:>24} →  {:>24}  {:>16}\n",
            name,
            show_spread(change.before),
            show_spread(change.after),
            rounds::show(change.ratio)
        ));
    }
    let (before, after) = (functions_by_round(&c.before[..rounds]), functions_by_round(&c.after[..rounds]));
    let median = |v: Option<&Vec<f64>>| v.and_then(|v| rounds::median(v)).unwrap_or(0.0);
    let mut top: Vec<(&(String, Category), f64, f64)> =
        after.iter().map(|(key, a)| (key, median(before.get(key)), median(Some(a)))).collect();
    top.sort_by(|x, y| y.2.total_cmp(&x.2).then(x.0.cmp(y.0)));
    out.push_str(&format!(
        "  top {TOP_FUNCTIONS_COMPARED} functions by the after build's median self time, µs/req before → after\n"
    ));
    for ((name, group), b, a) in top.into_iter().take(TOP_FUNCTIONS_COMPARED) {
        let name: String = name.chars().take(90).collect();
        out.push_str(&format!("  {b:>8.1} → {a:>8.1}  {:<7} {name}\n", group.short()));
    }
    out
}

/// The DevTools connection to workerd's isolate.
struct Inspector {
    socket: WebSocket<TcpStream>,
    next_id: u64,
}

impl Inspector {
    /// Connects to the first target workerd's inspector lists.
    async fn connect(api: &Api, port: u16) -> Result<Inspector, String> {
        let list = api
            .client
            .get(format!("http://127.0.0.1:{port}/json/list"))
            .send()
            .await
            .map_err(|e| format!("inspector list: {e}"))?;
        let text = list.text().await.map_err(|e| format!("inspector list: {e}"))?;
        let targets: Value = serde_json::from_str(&text).map_err(|e| format!("inspector list: {e}: {text}"))?;
        let url = targets
            .as_array()
            .and_then(|t| t.first())
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .ok_or_else(|| format!("the inspector lists no target: {targets}"))?
            .to_string();
        let stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("inspector: {e}"))?;
        stream.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
        let (socket, _) =
            tungstenite::client(url.as_str(), stream).map_err(|e| format!("inspector handshake ({url}): {e}"))?;
        Ok(Inspector { socket, next_id: 1 })
    }

    /// Sends a command and reads until its answer (events in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"id": id, "method": method, "params": params}).to_string();
        self.socket.send(Message::text(message)).map_err(|e| format!("{method}: {e}"))?;
        loop {
            let frame = self.socket.read().map_err(|e| format!("{method}: {e}"))?;
            let Message::Text(text) = frame else { continue };
            let answer: Value = serde_json::from_str(text.as_str()).map_err(|e| format!("{method}: {e}"))?;
            if answer["id"].as_u64() == Some(id) {
                if answer.get("error").is_some() {
                    return Err(format!("{method}: {}", answer["error"]));
                }
                return Ok(answer["result"].clone());
            }
        }
    }
}

/// Profiles `requests` requests of `route` against `server`, whose inspector is on
/// `inspector_port`, after `warmup` requests.
pub async fn run(
    server: &Server,
    inspector_port: u16,
    route: Route,
    (warmup, requests): (usize, usize),
    key: &[u8],
) -> Result<Profile, String> {
    Session::start(server, inspector_port, route, key).await?.profile(warmup, requests).await
}

/// One route on one workerd, profiled as many times as asked: its hand-off is made once, and
/// its requests are numbered across the profiles (each report a change).
pub struct Session {
    api: Api,
    inspector_port: u16,
    route: Route,
    handoff: service::Handoff,
    /// The events route's hand-offs, each taking a turn's worth of batches: made before each
    /// profile starts, as many as its requests need.
    events: Vec<service::Handoff>,
    sent: u64,
}

impl Session {
    pub async fn start(server: &Server, inspector_port: u16, route: Route, key: &[u8]) -> Result<Session, String> {
        let api = Api::new(&server.base(), Duration::from_secs(30));
        let owner = service::owner_token("profile-owner", key);
        let handoff = match route {
            Route::Package => service::create_with_work(&api, &owner, "profile-session").await?,
            _ => service::create(&api, &owner, "profile-session").await?,
        };
        Ok(Session { api, inspector_port, route, events: vec![handoff.clone()], handoff, sent: 0 })
    }

    fn request(&self, n: u64) -> Req {
        match self.route {
            Route::Health => Req::get("/v1/health", None),
            Route::Floor => service::floor(),
            Route::Get => service::get(&self.handoff),
            Route::Report => service::report(&self.handoff, n),
            Route::Package => service::preview(&self.handoff),
            Route::Events => service::events(&self.events, n - 1),
        }
    }

    /// Sends `count` requests one after another, each answered 200.
    async fn send(&mut self, count: usize) -> Result<(), String> {
        for _ in 0..count {
            self.sent += 1;
            let req = self.request(self.sent);
            let (status, body) = self.api.send(&req).await?;
            if status != 200 {
                return Err(format!("{} answered {status}: {body}", req.path));
            }
        }
        Ok(())
    }

    /// Warms the isolate with `warmup` requests (after another workerd ran, as on the first
    /// call), then profiles `requests` requests.
    pub async fn profile(&mut self, warmup: usize, requests: usize) -> Result<Profile, String> {
        if self.route == Route::Events {
            let batches = self.sent + (warmup + requests) as u64;
            let owner = self.handoff.owner_token.clone();
            while (self.events.len() as u64) * service::BATCHES_PER_TURN < batches {
                let session = format!("profile-events-{}", self.events.len());
                self.events.push(service::create(&self.api, &owner, &session).await?);
            }
        }
        self.send(warmup).await?;
        let mut inspector = Inspector::connect(&self.api, self.inspector_port).await?;
        inspector.call("Profiler.enable", json!({}))?;
        inspector.call("Profiler.setSamplingInterval", json!({"interval": SAMPLING_INTERVAL_US}))?;
        inspector.call("Profiler.start", json!({}))?;
        let started = Instant::now();
        let sent = self.send(requests).await;
        let wall = started.elapsed();
        let stopped = inspector.call("Profiler.stop", json!({}))?;
        sent?;
        Ok(summarise(&stopped["profile"], self.route, warmup, requests, wall))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_grouped_by_pseudo_name_then_by_script() {
        assert_eq!(Category::of("(garbage collector)", ""), Category::Gc);
        assert_eq!(Category::of("(program)", ""), Category::Program);
        assert_eq!(Category::of("(idle)", ""), Category::Idle);
        assert_eq!(Category::of("handoff::router::handle", "wasm://wasm/0012ab34"), Category::Wasm);
        assert_eq!(Category::of("__wbg_get_1234", "file:///x/index.js"), Category::Glue);
        assert_eq!(Category::of("get", ""), Category::Runtime);
    }

    #[test]
    fn a_rust_symbol_loses_its_hash_and_nothing_else() {
        assert_eq!(clean_symbol("handoff_core::turn::apply::h0123456789abcdef"), "handoff_core::turn::apply");
        assert_eq!(clean_symbol("$func42"), "func42");
        assert_eq!(clean_symbol("serde_json::de::from_str::hshort"), "serde_json::de::from_str::hshort");
    }

    #[test]
    fn self_time_is_each_samples_interval_and_idle_is_left_out() {
        let profile = json!({
            "nodes": [
                {"id": 1, "callFrame": {"functionName": "(root)", "url": ""}},
                {"id": 2, "callFrame": {"functionName": "handoff::router::handle::h0123456789abcdef", "url": "wasm://wasm/1"}},
                {"id": 3, "callFrame": {"functionName": "(garbage collector)", "url": ""}},
                {"id": 4, "callFrame": {"functionName": "(idle)", "url": ""}},
            ],
            "samples": [2, 2, 3, 4, 2],
            "timeDeltas": [0, 100, 300, 50, 1000],
        });
        let p = summarise(&profile, Route::Floor, WARMUP_REQUESTS, 2, Duration::from_millis(1));
        assert_eq!(p.busy_us, 100 + 300 + 50, "the last sample has no interval after it; idle is out");
        assert_eq!(p.categories, vec![(Category::Wasm, 400), (Category::Gc, 50)]);
        assert_eq!(p.functions[0].name, "handoff::router::handle");
    }

    fn profile(wasm_us: u64, glue_us: u64, requests: usize, functions: &[(&str, Category, u64)]) -> Profile {
        Profile {
            route: Route::Floor,
            requests,
            warmup: WARMUP_REQUESTS,
            categories: vec![(Category::Wasm, wasm_us), (Category::Glue, glue_us)],
            functions: functions
                .iter()
                .map(|&(name, category, self_us)| Function { name: name.into(), category, self_us })
                .collect(),
            busy_us: wasm_us + glue_us,
            wall: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_group_per_request_is_its_time_over_the_requests_and_an_absent_group_is_zero() {
        let p = profile(1_000, 500, 10, &[]);
        assert_eq!(per_request(&p, Some(Category::Wasm)), 100.0);
        assert_eq!(per_request(&p, Some(Category::Gc)), 0.0);
        assert_eq!(per_request(&p, None), 150.0);
    }

    #[test]
    fn before_and_after_are_medians_and_their_ratio_is_the_median_of_the_rounds() {
        let change = Change::of(&[100.0, 200.0, 120.0], &[50.0, 220.0, 60.0]);
        assert_eq!(change.before, Some(Spread { median: 120.0, min: 100.0, max: 200.0 }));
        assert_eq!(change.after, Some(Spread { median: 60.0, min: 50.0, max: 220.0 }));
        // Round by round 0.5, 1.1, 0.5: the round where both were slow does not move the median.
        assert_eq!(change.ratio.map(|r| (r.median, r.min)), Some((0.5, 0.5)));
        assert!((change.ratio.unwrap().max - 1.1).abs() < 1e-9);
    }

    #[test]
    fn glue_names_lose_the_builds_hash_so_two_builds_line_up() {
        assert_eq!(comparable_name("__wbg_handle_d47f161f9b04574c"), "__wbg_handle");
        assert_eq!(comparable_name("__wbg___wbindgen_number_get_934b640d0889af78"), "__wbg___wbindgen_number_get");
        assert_eq!(comparable_name("handoff::router::handle"), "handoff::router::handle");
        assert_eq!(comparable_name("__wbg_handle_short"), "__wbg_handle_short");
        let before =
            [profile(0, 0, 10, &[("__wbg_handle_0123456789abcdef", Category::Glue, 100)]), profile(0, 0, 10, &[])];
        let by_round = functions_by_round(&before);
        assert_eq!(
            by_round[&("__wbg_handle".to_string(), Category::Glue)],
            [10.0, 0.0],
            "absent from a round: 0 there"
        );
    }

    #[test]
    fn the_comparison_table_quotes_each_group_and_the_busy_time() {
        let before =
            vec![profile(1_000, 1_000, 10, &[]), profile(2_000, 1_000, 10, &[]), profile(1_200, 1_000, 10, &[])];
        let after = vec![profile(500, 1_000, 10, &[]), profile(2_200, 1_000, 10, &[]), profile(600, 1_000, 10, &[])];
        let c = Compared { route: Route::Floor, requests: 10, builds: ["b".into(), "a".into()], before, after };
        let t = compare_table(&c);
        let line = |start: &str| t.lines().find(|l| l.trim_start().starts_with(start)).unwrap_or_default().to_string();
        let wasm = line("the Worker's own code");
        assert!(wasm.contains("120.0 (100.0–200.0) →") && wasm.contains("→         60.0 (50.0–220.0)"), "{t}");
        assert!(line("the Worker's own code").ends_with("0.50 0.50–1.10"), "{t}");
        assert!(line("glue").ends_with("1.00 1.00–1.00"), "{t}");
        assert!(line("busy per request").contains("220.0 (200.0–300.0)"), "{t}");
        assert!(t.contains("3 rounds"), "{t}");
    }
}
