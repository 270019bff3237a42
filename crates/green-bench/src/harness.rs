//! Child processes: a server pinned to its CPU, a microbenchmark, the Go
//! program built from `go/main.go`.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use green_bench::servers::Kind;

/// The servers' CPU and the load generator's.
pub const SERVER_CPU: usize = 0;
pub const CLIENT_CPU: usize = 1;

/// `cmd` with its process pinned to `cpu` from its first instruction (so
/// the Go runtime's threads and tokio's are too).
fn pinned(mut cmd: Command, cpu: usize) -> Command {
    // SAFETY: the closure runs between fork and exec; it only makes the
    // sched_setaffinity system call (through bench_util::pin: a zeroed
    // cpu_set_t on the stack, no allocation, no lock), which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            bench_util::pin(cpu);
            Ok(())
        });
    }
    cmd
}

/// The Go program, built into `dir` (None with the reason when it cannot
/// be: no `go`, or the build failed).
pub fn build_go(dir: &Path) -> Result<PathBuf, String> {
    bench_util::run::build_go(&Path::new(env!("CARGO_MANIFEST_DIR")).join("go/main.go"), &dir.join("green-bench-go"))
}

pub use bench_util::run::go_version;

/// A server started for one point, killed when dropped.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    /// Its standard error, read by a thread until it ends.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it; what it printed on its standard error.
    pub fn finish(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread reading `r` to its end.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// How a server is started.
pub struct ServerSetup<'a> {
    pub slice_us: u64,
    pub long_ms: f64,
    pub long_iters: u64,
    pub go: Option<&'a Path>,
}

/// Starts a `kind` server on 127.0.0.1:`port`, pinned to [`SERVER_CPU`];
/// returns once it listens.
pub fn start(kind: Kind, port: u16, s: &ServerSetup) -> Result<Server, String> {
    let mut cmd = match kind {
        Kind::Go => {
            let go = s.go.ok_or("no Go program")?;
            let mut c = Command::new(go);
            c.args(["serve", &port.to_string(), &s.long_ms.to_string()]).env("GOMAXPROCS", "1");
            c
        }
        k => {
            let mut c = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
            let slice = if k == Kind::GreenFine { green_bench::servers::FINE_SLICE_US } else { s.slice_us };
            c.args(["serve", k.name(), &port.to_string(), &slice.to_string(), &s.long_iters.to_string()]);
            c
        }
    };
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    let mut child = pinned(cmd, SERVER_CPU).spawn().map_err(|e| format!("cannot start the {} server: {e}", kind.name()))?;
    let stderr = child.stderr.take().map(drain);
    let out = child.stdout.take().ok_or("no server stdout")?;
    let mut line = String::new();
    let _ = BufReader::new(out).read_line(&mut line);
    let server = Server { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), stderr };
    if line.trim() != "ready" {
        let err = server.finish();
        return Err(format!("the {} server did not start: {}", kind.name(), err.lines().last().unwrap_or("").trim()));
    }
    Ok(server)
}

/// Runs a microbenchmark child pinned to [`SERVER_CPU`]: `exe micro KIND
/// ARGS` for green threads and pthreads, the Go program's `micro ARGS`
/// for goroutines; its output lines, each split at spaces, or why not.
pub fn micro(kind: &str, args: &[String], go: Option<&Path>, limit: Duration) -> Result<Vec<Vec<String>>, String> {
    let mut cmd = if kind == "go" {
        let mut c = Command::new(go.ok_or("no Go program")?);
        c.arg("micro").args(args).env("GOMAXPROCS", "1");
        c
    } else {
        let mut c = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
        c.args(["micro", kind]).args(args);
        c
    };
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    let mut child = pinned(cmd, SERVER_CPU).spawn().map_err(|e| e.to_string())?;
    // The pipes are drained by threads, so a chatty child cannot block.
    let out = drain(child.stdout.take().ok_or("no stdout")?);
    let err = drain(child.stderr.take().ok_or("no stderr")?);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(s);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    match status {
        None => Err(format!("killed after {} s", limit.as_secs())),
        Some(s) if !s.success() => Err(format!("{s}: {}", err.lines().last().unwrap_or("").trim())),
        Some(_) => Ok(out.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).filter(|v: &Vec<String>| !v.is_empty()).collect()),
    }
}
