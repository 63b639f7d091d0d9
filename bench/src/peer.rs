//! The TypeScript peer, side by side (issue 12): the measured routes written as a Workers team
//! would write them by default in TypeScript (`bench/reference/worker.ts`), run on the same
//! workerd from the same configuration, and driven by the same load generator. Each row is
//! measured on this Worker and then on the peer, one right after the other, each on a workerd
//! of its own started fresh for this phase, so that the two see the same machine.

use crate::load::{self, Api, Req, Shape};
use crate::server::{Options, Server};
use crate::service;
use crate::stats::Throughput;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// One route, on both Workers, sequential and at `connections`.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: &'static str,
    pub rust: Vec<Throughput>,
    pub peer: Vec<Throughput>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Peer {
    pub rows: Vec<Row>,
}

/// The n-th request of a row, on its side's hand-off.
type MakeRequest = fn(&service::Handoff, u64) -> Req;

/// Both Workers started, each with one hand-off to report on.
struct Side {
    server: Server,
    api: Api,
    one: service::Handoff,
}

async fn side(options: &Options, dir: &Path, key: &[u8]) -> Result<Side, String> {
    let server = Server::start(options, dir)?;
    let api = Api::new(&server.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
    let owner = service::owner_token("peer-owner", key);
    let one = service::create(&api, &owner, "peer-one").await?;
    Ok(Side { server, api, one })
}

pub async fn run(rust: &Options, peer: &Options, run_dir: &Path, key: &[u8], warmup: Duration, window: Duration) -> Result<Peer, String> {
    let r = side(rust, &run_dir.join("peer-rust"), key).await?;
    let t = side(peer, &run_dir.join("peer-ts"), key).await?;
    let shapes = [1, crate::CONNECTIONS];
    let mut rows = Vec::new();
    let routes: [(&'static str, MakeRequest); 3] = [
        ("trivial route (GET /v1/health)", |_, _| Req::get("/v1/health", None)),
        ("floor (route, reach an object, answer)", |_, _| service::floor()),
        ("reports on one hand-off", |h, n| service::report(h, n)),
    ];
    for (name, make) in routes {
        let mut row = Row { name, rust: Vec::new(), peer: Vec::new() };
        for (i, connections) in shapes.into_iter().enumerate() {
            let shape = Shape { connections, warmup, window };
            // Summaries numbered apart per shape: every report is a change.
            let offset = i as u64 * 1_000_000_000;
            for (s, out) in [(&r, &mut row.rust), (&t, &mut row.peer)] {
                let one = s.one.clone();
                out.push(load::run(&s.api, &s.server, shape, 200, move |n| make(&one, offset + n)).await);
            }
        }
        rows.push(row);
    }
    let mut row = Row { name: "reports over 1,000 hand-offs, one owner", rust: Vec::new(), peer: Vec::new() };
    for (s, out) in [(&r, &mut row.rust), (&t, &mut row.peer)] {
        out.push(crate::spread(&s.api, &s.server, (warmup, window), key, "peer-spread", |_| "peer-spread-owner".into()).await?);
    }
    rows.push(row);
    Ok(Peer { rows })
}

/// The rows, each shape with this Worker's figures, the peer's and their ratios.
pub fn table(p: &Peer) -> String {
    let mut out = String::from(
        "7 beside the TypeScript peer (bench/reference/worker.ts), each row measured on both, one after the other\n\
         \x20                                            conns |  rust req/s  peer req/s  ×peer | rust cpuµs  peer cpuµs  ×peer\n",
    );
    for row in &p.rows {
        for (rust, peer) in row.rust.iter().zip(&row.peer) {
            let ratio = |a: f64, b: f64| if b > 0.0 { format!("{:.2}", a / b) } else { "-".into() };
            out.push_str(&format!(
                "  {:<42} {:>5} | {:>10.0}  {:>10.0}  {:>5} | {:>10.0}  {:>10.0}  {:>5}\n",
                row.name,
                rust.connections,
                rust.requests_per_s,
                peer.requests_per_s,
                ratio(rust.requests_per_s, peer.requests_per_s),
                rust.workerd_cpu_us_per_request,
                peer.workerd_cpu_us_per_request,
                ratio(rust.workerd_cpu_us_per_request, peer.workerd_cpu_us_per_request),
            ));
        }
    }
    out.push_str("  ×peer: this Worker's figure over the peer's (throughput: above 1 is faster; CPU: below 1 is cheaper)\n");
    out
}
