//! The Worker under test: workerd run directly on a generated configuration, with no wrangler
//! and no Miniflare in front of it, so that every request the bench sends reaches the Worker
//! through workerd's own HTTP socket.
//!
//! The configuration is the tests' ([`handoff_it::workerd`]), plus `HANDOFF_BENCH_FLOOR=1`,
//! which opens the floor route.

use handoff_it::workerd;
use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long workerd may take to answer its first request before the bench gives up.
pub const START_S_MAX: u64 = 60;

#[derive(Clone)]
pub struct Options {
    pub repo: PathBuf,
    pub build: PathBuf,
    pub workerd: PathBuf,
    pub port: u16,
    pub signing_key: String,
    /// Open workerd's DevTools inspector on this port (for `--profile`).
    pub inspector_port: Option<u16>,
    /// Run the TypeScript reference (`build` holds its bundle, `worker.js`) instead of this
    /// Worker, with its hops made this way.
    pub peer: Option<Hops>,
    /// V8's command-line flags, in workerd's configuration (`--v8-flag`, for `--profile`).
    pub v8_flags: Vec<String>,
}

/// How the TypeScript reference makes its two hops (Worker → hand-off object → owner index):
/// its `HANDOFF_PEER_HOPS` binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hops {
    /// A Request to the object's `fetch` handler, its Response passed on.
    Fetch,
    /// Methods called on the stubs.
    Rpc,
}

impl Hops {
    pub fn as_str(self) -> &'static str {
        match self {
            Hops::Fetch => "fetch",
            Hops::Rpc => "rpc",
        }
    }

    pub fn parse(word: &str) -> Option<Hops> {
        [Hops::Fetch, Hops::Rpc].into_iter().find(|h| h.as_str() == word)
    }
}

/// The TypeScript reference's one module (`bench/reference/`, bundled by scripts/bench).
pub const PEER_MODULES: [(&str, &str); 1] = [("worker.js", "esModule")];

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    child: Child,
    /// From spawning workerd to its first answered request (`/v1/health`).
    pub start_to_first_answer: Duration,
}

impl Server {
    /// Copies the build into a fresh folder (so that a rebuild during the run does not change
    /// what is measured), writes the configuration, starts workerd and waits for its answer.
    pub fn start(options: &Options, dir: &Path) -> Result<Server, String> {
        // Another server on the port would answer the health check in workerd's place.
        if std::net::TcpListener::bind(("127.0.0.1", options.port)).is_err() {
            return Err(format!("127.0.0.1:{} is in use; pick another --port", options.port));
        }
        // The spread phase holds 1,000 open hand-offs of one owner: past the named open cap,
        // which a bench Worker may raise (HANDOFF_BENCH_OPEN_HANDOFFS_MAX, local only).
        let open_max = crate::SPREAD_HANDOFFS.to_string();
        let vars = [
            ("HANDOFF_SIGNING_KEY", options.signing_key.as_str()),
            ("HANDOFF_BENCH_FLOOR", "1"),
            ("HANDOFF_BENCH_OPEN_HANDOFFS_MAX", open_max.as_str()),
        ];
        match options.peer {
            Some(hops) => {
                let vars = [&vars[..], &[("HANDOFF_PEER_HOPS", hops.as_str())]].concat();
                workerd::lay_out_modules(&options.repo, &options.build, dir, options.port, &vars, &PEER_MODULES)?
            }
            None => workerd::lay_out(&options.repo, &options.build, dir, options.port, &vars)?,
        }
        if !options.v8_flags.is_empty() {
            let path = dir.join("config.capnp");
            let config = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            fs::write(&path, workerd::with_v8_flags(&config, &options.v8_flags))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }

        let log = fs::File::create(dir.join("workerd.log")).map_err(|e| e.to_string())?;
        let mut command = Command::new(&options.workerd);
        command
            .current_dir(dir)
            .args(["serve", "config.capnp"])
            .args(options.inspector_port.map(|p| format!("--inspector-addr=127.0.0.1:{p}")))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        // workerd must not outlive the bench, whatever ends the bench.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let started = Instant::now();
        let child = command.spawn().map_err(|e| format!("{}: {e}", options.workerd.display()))?;
        let mut server =
            Server { port: options.port, dir: dir.to_path_buf(), child, start_to_first_answer: Duration::ZERO };
        server.start_to_first_answer = server.wait_first_answer(started)?;
        Ok(server)
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls `/v1/health` with a plain blocking socket every 2 ms: the first 200 ends the wait.
    fn wait_first_answer(&mut self, started: Instant) -> Result<Duration, String> {
        let deadline = started + Duration::from_secs(START_S_MAX);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("workerd exited ({status}); its log:\n{}", self.log()));
            }
            if health_answers(self.port) {
                return Ok(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(format!("workerd did not answer within {START_S_MAX} s; its log:\n{}", self.log()))
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("workerd.log")).unwrap_or_default()
    }

    /// workerd's resident memory, from /proc (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// workerd's CPU time so far (user + system, all its threads).
    pub fn cpu_time(&self) -> Duration {
        crate::stats::cpu_time(&self.pid().to_string())
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn health_answers(port: u16) -> bool {
    use std::io::Write;
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}
