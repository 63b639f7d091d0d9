//! The hand-off API as the bench uses it: tokens signed like the service's, creating
//! hand-offs, and the requests each phase repeats.

use crate::load::{Api, Req};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Owner tokens the bench mints live this long: longer than any run.
const TOKEN_TTL_S: i64 = 3600;

pub fn now_s() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970").as_secs() as i64
}

pub fn owner_token(owner: &str, key: &[u8]) -> Arc<str> {
    handoff_api::token::owner_token(owner, TOKEN_TTL_S, key, now_s()).into()
}

/// A hand-off the bench created: its id and the machine token its create answer carried.
#[derive(Debug, Clone)]
pub struct Handoff {
    pub id: Arc<str>,
    pub owner_token: Arc<str>,
    pub machine_token: Arc<str>,
}

/// Creates the hand-off of `session` (201 the first time; 200 for a session that has one).
pub async fn create(api: &Api, owner_token: &Arc<str>, session: &str) -> Result<Handoff, String> {
    let body = json!({"session": session, "machine": "bench-machine", "size": "large"}).to_string();
    let answer = api.json(&Req::post("/v1/handoffs", owner_token.clone(), body), &[200, 201]).await?;
    let id = answer["handoff"]["id"].as_str().ok_or("create: no id")?;
    let machine = answer["machine_token"].as_str().ok_or("create: no machine token")?;
    Ok(Handoff { id: id.into(), owner_token: owner_token.clone(), machine_token: machine.into() })
}

/// Creates `count` hand-offs with up to `connections` creates in flight; `owner_of(i)` names
/// the owner of the i-th (the same owner for all, or one owner each).
pub async fn create_many(
    api: &Api,
    count: usize,
    connections: usize,
    prefix: &str,
    key: &[u8],
    owner_of: impl Fn(usize) -> String,
) -> Result<Vec<Handoff>, String> {
    let tokens: Vec<Arc<str>> = (0..count).map(|i| owner_token(&owner_of(i), key)).collect();
    let next = Arc::new(AtomicU64::new(0));
    let tokens = Arc::new(tokens);
    let mut tasks = Vec::new();
    for _ in 0..connections.min(count) {
        let (api, next, tokens, prefix) = (api.clone(), next.clone(), tokens.clone(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= tokens.len() {
                    return Ok::<_, String>(made);
                }
                made.push((i, create(&api, &tokens[i], &format!("{prefix}-{i}")).await?));
            }
        }));
    }
    let mut all = Vec::with_capacity(count);
    for task in tasks {
        all.extend(task.await.map_err(|e| e.to_string())??);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, h)| h).collect())
}

/// The machine's report on turn 1 with the summary numbered `n`: a real change every time,
/// since no two reports carry the same summary (the version moves, the record is written,
/// the owner's index is sent its row and waiters are woken).
pub fn report(handoff: &Handoff, n: u64) -> Req {
    let body = json!({"turn": 1, "status": "running", "summary": format!("bench: step {n} of the turn is done")}).to_string();
    Req::post(format!("/v1/handoffs/{}/report", handoff.id), handoff.machine_token.clone(), body)
}

/// The owner reads the hand-off: authentication and a Durable Object round trip, no storage
/// (the object keeps the record in memory once read).
pub fn get(handoff: &Handoff) -> Req {
    Req::get(format!("/v1/handoffs/{}", handoff.id), Some(handoff.owner_token.clone()))
}

/// A wait for any version above `after`, held for up to `timeout_s`.
pub fn wait(handoff: &Handoff, after: u64, timeout_s: u64) -> Req {
    Req::get(format!("/v1/handoffs/{}/wait?after={after}&timeout={timeout_s}", handoff.id), Some(handoff.owner_token.clone()))
}

pub fn floor() -> Req {
    Req::get("/v1/bench/floor", None)
}
