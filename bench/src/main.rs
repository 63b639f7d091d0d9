//! `handoff-bench`: the hand-off Worker on workerd, measured against its own floor.
//!
//! One run, side by side: (1) the floor route, (2) reports on one hand-off, (3) reports spread
//! over 1,000 hand-offs, (4) long-poll fan-out, (5) the .wasm size and the start time, (6) native
//! micro-benchmarks of the pure core. Prints a table and writes the same figures as JSON.
//!
//! Requests go only to 127.0.0.1, to a workerd this program starts and stops; every loop is
//! bounded by a count or a deadline.

mod fanout;
mod load;
mod micro;
mod peer;
mod profile;
mod report;
mod rounds;
mod server;
mod service;
mod stats;
mod watch;

use load::{Api, Shape};
use report::{Pair, Results, SizeStart, Spread};
use server::{Options, Server};
use stats::Throughput;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Every figure of the issue at 32 connections, as the issue asks.
const CONNECTIONS: usize = 32;
/// Hand-offs the spread phase reports over.
pub(crate) const SPREAD_HANDOFFS: usize = 1_000;
/// Waiters held in the fan-out rounds, one round (and one fresh hand-off) each, over /wait and
/// then over the watch.
const FANOUT_WAITERS: [usize; 3] = [100, 1_000, 9_000];
/// Each kind's fan-out starts with one round of this many clients that is not recorded, as the
/// load phases start after a warm-up: a fresh isolate's first round also times V8 compiling the
/// code and the runtime growing its pools, which a deployed object serving people has done long
/// before (and which the first recorded round showed at up to twice the later rounds' time).
const FANOUT_WARM_UP: usize = 1_000;
/// The Worker holds 10,000 owner waits, and 10,000 owner watches, per hand-off. These machines
/// cap a process at 20,000 open files (a hard limit that even root cannot raise here), and the
/// workerd this repository runs (its Rust I/O backend) holds two descriptors per connection,
/// so 9,000 is the most it can take; a workerd on kj's I/O (`scripts/bench --kj-io`) holds one
/// and takes all 10,000.
const FANOUT_WAITERS_MAX: usize = 10_000;
/// The gzipped .wasm target of the issue, in bytes (400 KB, read as 400 × 1,000).
pub const WASM_GZIP_BYTES_TARGET: u64 = 400_000;

struct Args {
    options: Options,
    out: PathBuf,
    warmup: Duration,
    window: Duration,
    keep_state: bool,
    /// The phases to run (all by default); a partial run is for development and says so.
    phases: Vec<String>,
    /// After the run, keep workerd idle this long and print its RSS every second.
    linger: Duration,
    /// Waiters held in each fan-out round, one round each.
    waiters: Vec<usize>,
    /// `--profile ROUTE`: profile that route instead of running the bench.
    profile: Option<profile::Route>,
    /// Requests profiled.
    requests: usize,
    /// Requests sent before each profile starts.
    warmup_requests: usize,
    /// The TypeScript peer's bundle (`worker.js`), for phase 7.
    peer_build: PathBuf,
    /// `--profile` the TypeScript reference instead of this Worker, with its hops made this way.
    profile_peer: Option<server::Hops>,
    /// Rounds of phase 7 and of a before/after profile, the Workers in rotated order.
    rounds: usize,
    /// `--profile` this build too (`--before-build DIR`), against `--build`, in rounds.
    before_build: Option<PathBuf>,
}

const PHASES: [&str; 6] = ["floor", "get", "report", "spread", "fanout", "peer"];
/// Phases run only when named: `watch` is the watch's fan-out rounds alone (`fanout` runs them
/// right after the same rounds over `/wait`); `events` is phase 7's floor, report and events rows
/// alone (`peer` runs them among the rest).
const NAMED_ONLY: [&str; 2] = ["watch", "events"];

impl Args {
    fn runs(&self, phase: &str) -> bool {
        self.phases.iter().any(|p| p == phase)
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: handoff-bench [--port N] [--seconds S] [--warmup S] [--out FILE] [--build DIR] [--workerd PATH] [--keep-state]\n\
         \x20                    [--phases floor,get,report,spread,fanout,watch,peer,events] [--peer-build DIR] [--waiters 100,1000,9000] [--linger S]\n\
         \x20                    [--rounds N]\n\
         \x20      handoff-bench --profile health|floor|get|report|package|events [--requests N] [--build DIR] [--peer [--peer-hops fetch|rpc] [--peer-build DIR]]\n\
         \x20      handoff-bench --profile health|floor|get|report|package|events --before-build DIR [--build DIR] [--requests N] [--rounds N]\n\
         \x20      either --profile also takes [--warmup-requests N] [--v8-flag FLAG]... (workerd's config.v8Flags, e.g. --no-liftoff)\n\
         Starts workerd on 127.0.0.1 (a free port unless --port), runs every phase for S seconds\n\
         (default 3) after a warm-up (default 1), prints the table and writes FILE\n\
         (default bench/results/latest.json). Phase 7 (peer), and a profile with --before-build,\n\
         measure their Workers in N rounds (default 3, at least 3, at most 25), in rotated order."
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/ sits in the repository").to_path_buf();
    let mut args = Args {
        options: Options {
            build: repo.join("build"),
            workerd: handoff_it::workerd::binary(&repo),
            port: 0,
            signing_key: std::env::var("HANDOFF_SIGNING_KEY")
                .unwrap_or_else(|_| handoff_api::token::DEV_SIGNING_KEY.to_string()),
            inspector_port: None,
            peer: None,
            v8_flags: Vec::new(),
            repo: repo.clone(),
        },
        out: repo.join("bench/results/latest.json"),
        warmup: Duration::from_secs(1),
        window: Duration::from_secs(3),
        keep_state: false,
        phases: PHASES.iter().map(|p| p.to_string()).collect(),
        waiters: FANOUT_WAITERS.to_vec(),
        linger: Duration::ZERO,
        profile: None,
        requests: profile::REQUESTS_DEFAULT,
        warmup_requests: profile::WARMUP_REQUESTS,
        peer_build: repo.join("build-peer"),
        profile_peer: None,
        rounds: rounds::ROUNDS_DEFAULT,
        before_build: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        let seconds =
            |v: String| Duration::from_secs_f64(v.parse::<f64>().unwrap_or_else(|_| usage()).clamp(0.1, 60.0));
        match flag.as_str() {
            "--port" => args.options.port = value().parse().unwrap_or_else(|_| usage()),
            "--seconds" => args.window = seconds(value()),
            "--warmup" => args.warmup = seconds(value()),
            "--out" => args.out = PathBuf::from(value()),
            "--build" => args.options.build = PathBuf::from(value()),
            "--workerd" => args.options.workerd = PathBuf::from(value()),
            "--keep-state" => args.keep_state = true,
            "--peer-build" => args.peer_build = PathBuf::from(value()),
            "--peer" => args.profile_peer = Some(args.profile_peer.unwrap_or(server::Hops::Rpc)),
            "--peer-hops" => args.profile_peer = Some(server::Hops::parse(&value()).unwrap_or_else(|| usage())),
            "--profile" => args.profile = Some(profile::Route::parse(&value()).unwrap_or_else(|| usage())),
            "--requests" => {
                args.requests = value().parse().ok().filter(|n| (1..=100_000).contains(n)).unwrap_or_else(|| usage())
            }
            "--warmup-requests" => {
                args.warmup_requests =
                    value().parse().ok().filter(|n| *n <= profile::WARMUP_REQUESTS_MAX).unwrap_or_else(|| usage())
            }
            // `--v8-flag=--no-liftoff` as well as `--v8-flag --no-liftoff`.
            "--v8-flag" => args.options.v8_flags.push(value()),
            v8_flag if v8_flag.starts_with("--v8-flag=") => {
                args.options.v8_flags.push(v8_flag["--v8-flag=".len()..].to_string())
            }
            "--linger" => args.linger = seconds(value()),
            "--rounds" => {
                args.rounds = value()
                    .parse()
                    .ok()
                    .filter(|n| (rounds::ROUNDS_MIN..=rounds::ROUNDS_MAX).contains(n))
                    .unwrap_or_else(|| usage())
            }
            "--before-build" => args.before_build = Some(PathBuf::from(value())),
            "--waiters" => {
                args.waiters = value().split(',').map(|n| n.parse().unwrap_or_else(|_| usage())).collect();
                if args.waiters.iter().any(|&n| n == 0 || n > FANOUT_WAITERS_MAX) {
                    usage()
                }
            }
            "--phases" => {
                args.phases = value().split(',').map(str::to_string).collect();
                if !args.phases.iter().all(|p| PHASES.contains(&p.as_str()) || NAMED_ONLY.contains(&p.as_str())) {
                    usage()
                }
            }
            _ => usage(),
        }
    }
    if args.before_build.is_some() && (args.profile.is_none() || args.profile_peer.is_some()) {
        usage()
    }
    // The bench's figures are of workerd as deployed: its V8 flags are left alone.
    let profiling_only = !args.options.v8_flags.is_empty() || args.warmup_requests != profile::WARMUP_REQUESTS;
    if profiling_only && args.profile.is_none() {
        usage()
    }
    if args.options.port == 0 {
        args.options.port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
    }
    args
}

/// Thousands of held waiters need as many sockets, here and in workerd (which inherits it).
fn raise_open_files_limit() {
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn main() {
    let args = parse_args();
    raise_open_files_limit();
    if let Some(route) = args.profile {
        return profile_route(&args, route);
    }
    let started = Instant::now();
    let load_average_start = load_average();

    // The micro-benchmarks first, while the machine is quiet.
    eprintln!("bench: micro-benchmarks of the pure core");
    let micro = micro::run_all();
    let size = report::wasm_size(&args.options.build.join("index_bg.wasm")).unwrap_or_else(|e| fail(&e));

    let run_dir = std::env::temp_dir().join(format!("handoff-bench-{}", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let outcome = runtime.block_on(measure(&args, &run_dir, size, micro));
    if !args.keep_state {
        let _ = std::fs::remove_dir_all(&run_dir);
        let _ = std::fs::remove_dir_all(tmpfs_dir());
    }
    let mut results = outcome.unwrap_or_else(|e| fail(&e));
    results.run.total_s = stats::round(started.elapsed().as_secs_f64(), 1);
    results.run.load_average_start = load_average_start;
    results.run.load_average_end = load_average();

    print!("{}", report::table(&results));
    let json = serde_json::to_string_pretty(&results).expect("results serialise") + "\n";
    if let Some(parent) = args.out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let temporary = args.out.with_extension("json.tmp");
    std::fs::write(&temporary, json)
        .and_then(|_| std::fs::rename(&temporary, &args.out))
        .unwrap_or_else(|e| fail(&e.to_string()));
    eprintln!("bench: wrote {}", args.out.display());
}

/// `--profile`: one workerd with its inspector on, one route, one table.
fn profile_route(args: &Args, route: profile::Route) {
    if let Some(before) = &args.before_build {
        return profile_before_after(args, route, before);
    }
    let run_dir = std::env::temp_dir().join(format!("handoff-profile-{}", std::process::id()));
    let mut options = Options { inspector_port: Some(free_port()), ..args.options.clone() };
    if let Some(hops) = args.profile_peer {
        options = Options { peer: Some(hops), build: args.peer_build.clone(), ..options };
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let outcome = runtime.block_on(async {
        let server = Server::start(&options, &run_dir)?;
        let inspector = options.inspector_port.unwrap_or_default();
        profile::run(
            &server,
            inspector,
            route,
            (args.warmup_requests, args.requests),
            args.options.signing_key.as_bytes(),
        )
        .await
    });
    let _ = std::fs::remove_dir_all(&run_dir);
    print_v8_flags(args);
    print!("{}", profile::table(&outcome.unwrap_or_else(|e| fail(&e))));
}

/// `--profile ROUTE --before-build DIR`: the before build and `--build` on a workerd each, both
/// started first and then profiled in `--rounds` rounds, round r in the order
/// `rounds::rotation(r, 2)`, so that neither build is always the one measured first.
fn profile_before_after(args: &Args, route: profile::Route, before: &std::path::Path) {
    let run_dir = std::env::temp_dir().join(format!("handoff-profile-{}", std::process::id()));
    let builds = [("before", before.to_path_buf()), ("after", args.options.build.clone())];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    let outcome = runtime.block_on(async {
        let mut servers = Vec::new();
        for (name, build) in &builds {
            let options = Options {
                port: free_port(),
                inspector_port: Some(free_port()),
                build: build.clone(),
                ..args.options.clone()
            };
            eprintln!(
                "profile: starting workerd for the {name} build ({}) on 127.0.0.1:{}",
                build.display(),
                options.port
            );
            let server = Server::start(&options, &run_dir.join(name))?;
            let key = args.options.signing_key.as_bytes();
            let session =
                profile::Session::start(&server, options.inspector_port.unwrap_or_default(), route, key).await?;
            servers.push((server, session));
        }
        let mut profiles: [Vec<profile::Profile>; 2] = Default::default();
        for round in 0..args.rounds {
            for side in rounds::rotation(round, builds.len()) {
                eprintln!("profile: round {round}, the {} build", builds[side].0);
                profiles[side].push(servers[side].1.profile(args.warmup_requests, args.requests).await?);
            }
        }
        let [before, after] = profiles;
        let builds = builds.map(|(_, build)| build.display().to_string());
        Ok::<_, String>(profile::Compared { route, requests: args.requests, builds, before, after })
    });
    let _ = std::fs::remove_dir_all(&run_dir);
    print_v8_flags(args);
    print!("{}", profile::compare_table(&outcome.unwrap_or_else(|e| fail(&e))));
}

/// Above a profile's table: the V8 flags its workerd ran with, where it was given any.
fn print_v8_flags(args: &Args) {
    if !args.options.v8_flags.is_empty() {
        println!("workerd ran with V8 flags {}", args.options.v8_flags.join(" "));
    }
}

/// The tmpfs folder of the diagnostic server whose objects store in memory (no fsync).
fn tmpfs_dir() -> PathBuf {
    PathBuf::from(format!("/dev/shm/handoff-bench-{}", std::process::id()))
}

/// Starts a workerd on a free port of its own, keeping `--port` for the main server.
fn start_server(args: &Args, dir: &std::path::Path, port: u16) -> Result<Server, String> {
    let options = Options { port, ..args.options.clone() };
    eprintln!("bench: starting workerd on 127.0.0.1:{port} ({})", dir.display());
    Server::start(&options, dir)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// The 1-minute load average of the machine.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next()?.parse().ok()).unwrap_or(0.0)
}

/// Watches an idle workerd's memory for `how_long`, one line a second.
fn linger(server: &Server, how_long: Duration) {
    let until = Instant::now() + how_long;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_secs(1));
        eprintln!("bench: idle workerd RSS {:.1} MiB", server.rss_kib() as f64 / 1024.0);
    }
}

fn fail(message: &str) -> ! {
    eprintln!("bench: {message}");
    std::process::exit(1)
}

async fn measure(
    args: &Args,
    run_dir: &std::path::Path,
    size: (u64, u64),
    micro: Vec<micro::Micro>,
) -> Result<Results, String> {
    let server = &start_server(args, &run_dir.join("main"), args.options.port)?;
    let api = Api::new(&server.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
    let key = args.options.signing_key.as_bytes().to_vec();
    let shape = |connections| Shape { connections, warmup: args.warmup, window: args.window };

    let start_to_first_answer_ms = stats::round(server.start_to_first_answer.as_secs_f64() * 1000.0, 1);
    // (5) The first answer that needs a Durable Object: the floor's object is made on demand.
    let first = Instant::now();
    let (status, body) = api.send(&service::floor()).await?;
    let first_object_ms = stats::round(first.elapsed().as_secs_f64() * 1000.0, 1);
    if status != 200 {
        return Err(format!(
            "GET /v1/bench/floor answered {status} ({body}): the build predates the floor route or ignores \
             HANDOFF_BENCH_FLOOR; rebuild with scripts/build"
        ));
    }

    eprintln!("bench: (1) floor");
    let floor = match args.runs("floor") {
        true => Pair {
            sequential: load::run(&api, server, shape(1), 200, |_| service::floor()).await,
            concurrent: load::run(&api, server, shape(CONNECTIONS), 200, |_| service::floor()).await,
        },
        false => Pair::skipped(CONNECTIONS),
    };

    let owner = service::owner_token("bench-owner", &key);
    let one = service::create(&api, &owner, "one-handoff").await?;
    eprintln!("bench: reading one hand-off (authentication without storage, for the breakdown)");
    let get_one = match args.runs("get") {
        true => {
            let (a, b) = (one.clone(), one.clone());
            Pair {
                sequential: load::run(&api, server, shape(1), 200, move |_| service::get(&a)).await,
                concurrent: load::run(&api, server, shape(CONNECTIONS), 200, move |_| service::get(&b)).await,
            }
        }
        false => Pair::skipped(CONNECTIONS),
    };

    eprintln!("bench: (2) reports on one hand-off");
    // Summaries are numbered from 0 in each phase, so the concurrent phase starts past the
    // sequential one's numbers: every report is a change.
    let report_one = match args.runs("report") {
        true => {
            let (a, b) = (one.clone(), one.clone());
            Pair {
                sequential: load::run(&api, server, shape(1), 200, move |n| service::report(&a, n)).await,
                concurrent: load::run(&api, server, shape(CONNECTIONS), 200, move |n| {
                    service::report(&b, 1_000_000_000 + n)
                })
                .await,
            }
        }
        false => Pair::skipped(CONNECTIONS),
    };

    eprintln!("bench: (3) reports over {SPREAD_HANDOFFS} hand-offs, of one owner and of one owner each");
    let (spread_one_owner, spread_many_owners) = match args.runs("spread") {
        true => (
            spread(&api, server, (args.warmup, args.window), &key, "spread-one-owner", |_| {
                "bench-spread-owner".to_string()
            })
            .await?,
            spread(&api, server, (args.warmup, args.window), &key, "spread-many-owners", |i| {
                format!("bench-owner-{i}")
            })
            .await?,
        ),
        false => (Throughput::skipped(CONNECTIONS), Throughput::skipped(CONNECTIONS)),
    };

    let rss_mib_after_spread = stats::round(server.rss_kib() as f64 / 1024.0, 1);

    // The same reports with the objects' SQLite files on tmpfs, where a commit costs no fsync:
    // the difference to (2) is what durable commits cost on this machine's disk.
    let report_one_tmpfs = match args.runs("report") && std::path::Path::new("/dev/shm").is_dir() {
        true => {
            eprintln!("bench: (2) again, with the objects' storage on tmpfs");
            let tmpfs = start_server(args, &tmpfs_dir(), free_port())?;
            let tmpfs_api = Api::new(&tmpfs.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
            tmpfs_api.send(&service::floor()).await?;
            let floor_seq = load::run(&tmpfs_api, &tmpfs, shape(1), 200, |_| service::floor()).await;
            let floor_con = load::run(&tmpfs_api, &tmpfs, shape(CONNECTIONS), 200, |_| service::floor()).await;
            let h = service::create(&tmpfs_api, &owner, "one-handoff").await?;
            let (a, b) = (h.clone(), h.clone());
            let pair = Pair {
                sequential: load::run(&tmpfs_api, &tmpfs, shape(1), 200, move |n| service::report(&a, n)).await,
                concurrent: load::run(&tmpfs_api, &tmpfs, shape(CONNECTIONS), 200, move |n| {
                    service::report(&b, 1_000_000_000 + n)
                })
                .await,
            };
            Some((Pair { sequential: floor_seq, concurrent: floor_con }, pair))
        }
        false => None,
    };

    // Fan-out on a fresh workerd: after (3) the main one holds 2,000 live objects, whose
    // memory would dwarf the waiters'.
    let rounds = if args.runs("fanout") || args.runs("watch") { &args.waiters[..] } else { &[] };
    let poll_rounds = if args.runs("fanout") { rounds } else { &[] };
    let mut fanouts = Vec::new();
    if !poll_rounds.is_empty() {
        eprintln!("bench: (4) long-poll fan-out, on a fresh workerd");
        let fanout_server = start_server(args, &run_dir.join("fanout"), free_port())?;
        let server = &fanout_server;
        let api = Api::new(&server.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
        let handoff = service::create(&api, &owner, "fanout-warm-up").await?;
        fanout::run(&api, server, &handoff, FANOUT_WARM_UP).await?;
        for (round, &waiters) in poll_rounds.iter().enumerate() {
            let handoff = service::create(&api, &owner, &format!("fanout-{round}-{waiters}")).await?;
            let round = fanout::run(&api, server, &handoff, waiters).await?;
            eprintln!(
                "bench:   {waiters} waiters: {} answered, p99 {} ms, max {} ms, RSS {} → {} → {} MiB",
                round.answered,
                round.p99_ms,
                round.max_ms,
                round.rss_mib_before,
                round.rss_mib_holding,
                round.rss_mib_after
            );
            fanouts.push(round);
        }
        linger(server, args.linger);
    }
    // The same rounds over the watch, side by side, on a workerd of their own: ten thousand
    // sockets of each kind would pass the open-files limit of one process here.
    let watch_server = match rounds.is_empty() {
        true => None,
        false => Some(start_server(args, &run_dir.join("watch"), free_port())?),
    };
    let mut watch_rounds = Vec::new();
    if let Some(server) = watch_server.as_ref() {
        eprintln!("bench: (4) watch fan-out, on a fresh workerd");
        let api = Api::new(&server.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
        let handoff = service::create(&api, &owner, "watch-warm-up").await?;
        watch::run(&api, server, &handoff, 1, FANOUT_WARM_UP).await?;
    }
    for (round, &watchers) in rounds.iter().enumerate() {
        let Some(server) = watch_server.as_ref() else { break };
        let api = Api::new(&server.base(), Duration::from_secs(load::REQUEST_TIMEOUT_S));
        let handoff = service::create(&api, &owner, &format!("watch-{round}-{watchers}")).await?;
        let round = watch::run(&api, server, &handoff, 1, watchers).await?;
        eprintln!(
            "bench:   {watchers} watchers: {} received, p99 {} ms, max {} ms, RSS {} → {} (live) → {} (evicted) → {} MiB",
            round.received, round.p99_ms, round.max_ms, round.rss_mib_before, round.rss_mib_holding, round.rss_mib_evicted, round.rss_mib_after
        );
        watch_rounds.push(round);
    }

    let which = if args.runs("peer") { peer::Rows::All } else { peer::Rows::ReportsAndEvents };
    let peer = match args.runs("peer") || args.runs("events") {
        true => {
            eprintln!(
                "bench: (7) beside the TypeScript reference, its hops over fetch and over RPC, each on a fresh workerd, {} rounds in rotated order",
                args.rounds
            );
            let rust = Options { port: free_port(), ..args.options.clone() };
            let reference = |hops| Options {
                port: free_port(),
                peer: Some(hops),
                build: args.peer_build.clone(),
                ..args.options.clone()
            };
            let sides = [rust, reference(server::Hops::Fetch), reference(server::Hops::Rpc)];
            Some(peer::run(&sides, run_dir, &key, args.warmup, args.window, args.rounds, which).await?)
        }
        false => None,
    };

    let mut results = Results::new(
        args,
        floor,
        get_one,
        report_one,
        report_one_tmpfs,
        Spread {
            handoffs: SPREAD_HANDOFFS,
            one_owner: spread_one_owner,
            one_owner_each: spread_many_owners,
            rss_mib_after: rss_mib_after_spread,
        },
        fanouts,
        SizeStart {
            wasm_bytes: size.0,
            wasm_gzip_bytes: size.1,
            wasm_gzip_target_bytes: WASM_GZIP_BYTES_TARGET,
            start_to_first_answer_ms,
            first_durable_object_answer_ms: first_object_ms,
        },
        micro,
    );
    results.peer = peer;
    results.watch_fanout = watch_rounds;
    Ok(results)
}

/// Creates the hand-offs, then reports at 32 connections, each report on the next hand-off
/// in turn, so that 32 different hand-offs are being written at once.
async fn spread(
    api: &Api,
    server: &Server,
    (warmup, window): (Duration, Duration),
    key: &[u8],
    prefix: &str,
    owner_of: impl Fn(usize) -> String,
) -> Result<stats::Throughput, String> {
    let handoffs = service::create_many(api, SPREAD_HANDOFFS, CONNECTIONS, prefix, key, owner_of).await?;
    let shape = Shape { connections: CONNECTIONS, warmup, window };
    Ok(spread_load(api, server, shape, std::sync::Arc::new(handoffs), 0).await)
}

/// Reports over `handoffs`, each on the next in turn, their summaries numbered from `offset`
/// (a run over the same hand-offs again starts past the last one's numbers: every report is a
/// change).
pub(crate) async fn spread_load(
    api: &Api,
    server: &Server,
    shape: Shape,
    handoffs: std::sync::Arc<Vec<service::Handoff>>,
    offset: u64,
) -> stats::Throughput {
    load::run(api, server, shape, 200, move |n| service::report(&handoffs[n as usize % handoffs.len()], offset + n))
        .await
}
