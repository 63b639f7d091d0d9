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

use crate::load::{Api, Req};
use crate::server::Server;
use crate::service;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket};

/// Sampling interval asked of V8 (µs).
pub const SAMPLING_INTERVAL_US: u64 = 100;
/// Requests sent before the profile starts, so that it sees a warm isolate.
pub const WARMUP_REQUESTS: usize = 200;
/// Requests profiled unless `--requests` says.
pub const REQUESTS_DEFAULT: usize = 2_000;
/// Functions listed under the categories.
const TOP_FUNCTIONS: usize = 25;

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
}

impl Route {
    pub fn parse(word: &str) -> Option<Route> {
        match word {
            "health" => Some(Route::Health),
            "floor" => Some(Route::Floor),
            "get" => Some(Route::Get),
            "report" => Some(Route::Report),
            "package" => Some(Route::Package),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Route::Health => "GET /v1/health",
            Route::Floor => "GET /v1/bench/floor",
            Route::Get => "GET /v1/handoffs/:id (owner)",
            Route::Report => "POST /v1/handoffs/:id/report (each a real change)",
            Route::Package => "POST /v1/handoffs/:id/turns?dry_run=true&budget=8192 (20 decisions, 20 artifacts, 100 files)",
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
        Some(at) if name[at + 3..].len() == 16 && name[at + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => name[..at].to_string(),
        _ => name.to_string(),
    }
}

/// Sums self time per function from a `Profiler.stop` profile: sample `i` lasts until sample
/// `i + 1` (`timeDeltas[i + 1]`).
pub fn summarise(profile: &Value, route: Route, requests: usize, wall: Duration) -> Profile {
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
        let name = if function.is_empty() { format!("(anonymous, from {})", caller(id)) } else { clean_symbol(function) };
        let label = match category {
            Category::Runtime if !url.is_empty() => format!("{name} ({})", url.rsplit('/').next().unwrap_or(url)),
            _ => name,
        };
        frames.insert(node["id"].as_u64().unwrap_or(0), (label, category));
    }
    let samples: Vec<u64> = profile["samples"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    let deltas: Vec<u64> = profile["timeDeltas"].as_array().into_iter().flatten().map(|d| d.as_i64().unwrap_or(0).max(0) as u64).collect();
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
    Profile { route, requests, categories, functions, busy_us, wall }
}

pub fn table(p: &Profile) -> String {
    let per = |us: u64| us as f64 / p.requests.max(1) as f64;
    let share = |us: u64| 100.0 * us as f64 / p.busy_us.max(1) as f64;
    let mut out = format!(
        "profile of {}: {} requests one after another in {:.1} s; the isolate was busy {:.0} µs per request\n",
        p.route.name(),
        p.requests,
        p.wall.as_secs_f64(),
        per(p.busy_us)
    );
    out.push_str(&format!("  {:<26} {:>10} {:>7}\n", "self time by group", "µs/req", "share"));
    for (category, us) in &p.categories {
        out.push_str(&format!("  {:<26} {:>10.1} {:>6.1}%\n", category.name(), per(*us), share(*us)));
    }
    out.push_str(&format!("  top {TOP_FUNCTIONS} functions by self time\n"));
    for f in p.functions.iter().take(TOP_FUNCTIONS) {
        let group = match f.category {
            Category::Wasm => "wasm",
            Category::Glue => "glue",
            Category::Runtime => "runtime",
            Category::Gc => "gc",
            Category::Program => "program",
            Category::Idle => "idle",
        };
        let name: String = f.name.chars().take(90).collect();
        out.push_str(&format!("  {:>8.1} µs {:>5.1}%  {:<7} {name}\n", per(f.self_us), share(f.self_us), group));
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
        let list = api.client.get(format!("http://127.0.0.1:{port}/json/list")).send().await.map_err(|e| format!("inspector list: {e}"))?;
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
        let (socket, _) = tungstenite::client(url.as_str(), stream).map_err(|e| format!("inspector handshake ({url}): {e}"))?;
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

/// Profiles `requests` requests of `route` against `server`, whose inspector is on `inspector_port`.
pub async fn run(server: &Server, inspector_port: u16, route: Route, requests: usize, key: &[u8]) -> Result<Profile, String> {
    let api = Api::new(&server.base(), Duration::from_secs(30));
    let owner = service::owner_token("profile-owner", key);
    let handoff = match route {
        Route::Package => service::create_with_work(&api, &owner, "profile-session").await?,
        _ => service::create(&api, &owner, "profile-session").await?,
    };
    let request = |n: u64| -> Req {
        match route {
            Route::Health => Req::get("/v1/health", None),
            Route::Floor => service::floor(),
            Route::Get => service::get(&handoff),
            Route::Report => service::report(&handoff, n),
            Route::Package => service::preview(&handoff),
        }
    };
    let mut n = 0;
    let mut send = |count: usize| {
        let reqs: Vec<Req> = (0..count)
            .map(|_| {
                n += 1;
                request(n)
            })
            .collect();
        let api = api.clone();
        async move {
            for req in &reqs {
                let (status, body) = api.send(req).await?;
                if status != 200 {
                    return Err(format!("{} answered {status}: {body}", req.path));
                }
            }
            Ok::<(), String>(())
        }
    };
    send(WARMUP_REQUESTS).await?;
    let mut inspector = Inspector::connect(&api, inspector_port).await?;
    inspector.call("Profiler.enable", json!({}))?;
    inspector.call("Profiler.setSamplingInterval", json!({"interval": SAMPLING_INTERVAL_US}))?;
    inspector.call("Profiler.start", json!({}))?;
    let started = Instant::now();
    let sent = send(requests).await;
    let wall = started.elapsed();
    let stopped = inspector.call("Profiler.stop", json!({}))?;
    sent?;
    Ok(summarise(&stopped["profile"], route, requests, wall))
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
        let p = summarise(&profile, Route::Floor, 2, Duration::from_millis(1));
        assert_eq!(p.busy_us, 100 + 300 + 50, "the last sample has no interval after it; idle is out");
        assert_eq!(p.categories, vec![(Category::Wasm, 400), (Category::Gc, 50)]);
        assert_eq!(p.functions[0].name, "handoff::router::handle");
    }
}
