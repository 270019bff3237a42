//! turquoise-bench: the paper's Figure 4 on this machine, and the wrapper's
//! cost per poll.
//!
//! ```text
//! turquoise-bench [--quick] [--seconds S] [--rate R] [--write-docs]
//! ```
//!
//! Starts the hyper server of `server.rs` as a child process pinned to CPU
//! 1, once per configuration, and loads it from this process pinned to CPU
//! 0 (`client.rs`): open loop at R requests per second (300 by default) with
//! 0 to 2% long requests (50 ms among 500 us ones), under tokio, tokio with
//! wrapped tasks and turquoise (2 ms slices); turquoise's slice swept at 2%;
//! closed-loop throughput without long requests. Prints markdown; with
//! `--write-docs` replaces the turquoise section of `docs/benchmarks.md`
//! and writes `docs/plots/turquoise-*.svg`.

mod client;
mod plot;
mod polls;
mod server;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bench_util::{cpus, machine, pin};

/// Where the turquoise section of `docs/benchmarks.md` starts (linger-bench
/// keeps what follows it).
const MARKER: &str = "<!-- turquoise-bench: everything below is written by `cargo run --release -p turquoise-bench -- --write-docs` -->";

/// Where the timekeeping section starts (kept).
const TIMEKEEPING: &str = "<!-- timekeeping:";

const SERVER_CPU: usize = 1;
const CLIENT_CPU: usize = 0;

/// A server configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Server {
    mode: &'static str,
    slice_us: u64,
    /// linger's monitor thread keeps the deadlines (`LINGER_TIMEKEEPING=monitor`),
    /// not a timer per worker.
    monitor: bool,
}

impl Server {
    fn label(&self) -> String {
        match self.mode {
            "turquoise" if self.monitor => format!("turquoise {} ms, monitor", self.slice_us as f64 / 1000.0),
            "turquoise" => format!("turquoise {} ms", self.slice_us as f64 / 1000.0),
            "wrapped" => "tokio, wrapped".into(),
            m => m.into(),
        }
    }
}

const TOKIO: Server = Server { mode: "tokio", slice_us: 0, monitor: false };
const WRAPPED: Server = Server { mode: "wrapped", slice_us: 0, monitor: false };
const TURQUOISE: Server = Server { mode: "turquoise", slice_us: 2000, monitor: false };
const MONITORED: Server = Server { mode: "turquoise", slice_us: 2000, monitor: true };

/// Closed-loop runs per server, alternating (its throughput is compared
/// within a few percent: one run each would be noise).
const CLOSED_ROUNDS: usize = 3;

struct Running {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(s: Server, port: u16) -> Result<Running, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(["server", s.mode, &s.slice_us.to_string(), &port.to_string()])
        .env("LINGER_TIMEKEEPING", if s.monitor { "monitor" } else { "timer" })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let out = child.stdout.take().ok_or("no server stdout")?;
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).map_err(|e| e.to_string())?;
    if line.trim() != "ready" {
        let _ = child.kill();
        return Err(format!("server {s:?} did not start"));
    }
    Ok(Running { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) })
}

/// One measured point.
#[derive(Clone, Debug)]
pub struct Row {
    pub server: String,
    pub permille: u32,
    pub slice_us: u64,
    pub short_p50: u64,
    pub short_p99: u64,
    pub short_p999: u64,
    pub long_p50: u64,
    pub throughput: f64,
    pub errors: u64,
    pub shorts: u64,
}

struct Opts {
    seconds: f64,
    rate: f64,
    quick: bool,
    write_docs: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("server") {
        pin(SERVER_CPU.min(cpus() - 1));
        let mode = args.get(1).cloned().unwrap_or_default();
        let slice = Duration::from_micros(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2000));
        let port = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1337);
        if let Err(e) = server::run(&mode, slice, port) {
            eprintln!("server: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.first().map(String::as_str) == Some("closed") {
        // A closed-loop client alone (for profiling a server): PORT SECS.
        pin(CLIENT_CPU);
        let port: u16 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1337);
        let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5.0);
        let short = (500.0 * bench_util::calibrate()) as u64;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let out = rt.block_on(client::closed_loop(SocketAddr::from(([127, 0, 0, 1], port)), 4, Duration::from_secs_f64(secs), 0, short, short));
        println!("{:.0} requests/s, p50 {} us", out.throughput, out.short.value_at_quantile(0.5));
        return;
    }
    if args.first().map(String::as_str) == Some("polls") {
        // The poll-cost measurement alone (for profiling).
        let yields = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
        println!("{}", polls::markdown(&polls::measure(yields)));
        return;
    }
    let mut o = Opts { seconds: 8.0, rate: 300.0, quick: false, write_docs: false };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => {
                o.quick = true;
                o.seconds = 2.0;
            }
            "--write-docs" => o.write_docs = true,
            "--seconds" => o.seconds = it.next().and_then(|s| s.parse().ok()).unwrap_or(o.seconds),
            "--rate" => o.rate = it.next().and_then(|s| s.parse().ok()).unwrap_or(o.rate),
            "-h" | "--help" => {
                println!("usage: turquoise-bench [--quick] [--seconds S] [--rate R] [--write-docs]");
                return;
            }
            x => {
                eprintln!("turquoise-bench: unknown argument {x:?} (try --help)");
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = sweep(&o) {
        eprintln!("turquoise-bench: {e}");
        std::process::exit(1);
    }
}

fn sweep(o: &Opts) -> Result<(), String> {
    // Calibrate on the server's CPU, then move to the client's.
    pin(SERVER_CPU.min(cpus() - 1));
    let per_us = bench_util::calibrate();
    pin(CLIENT_CPU);
    let short = (500.0 * per_us) as u64;
    let long = (50_000.0 * per_us) as u64;
    let permilles: Vec<u32> = if o.quick { vec![0, 10, 20] } else { (0..=20).step_by(2).collect() };
    let slices: Vec<u64> = if o.quick { vec![1000, 5000] } else { vec![500, 1000, 5000, 10_000] };
    let mut plan: Vec<(Server, u32, bool)> = Vec::new();
    for &p in &permilles {
        for s in [TOKIO, WRAPPED, TURQUOISE] {
            plan.push((s, p, false));
        }
        if p == 0 || p == 20 {
            plan.push((MONITORED, p, false));
        }
    }
    for &sl in &slices {
        plan.push((Server { mode: "turquoise", slice_us: sl, monitor: false }, 20, false));
    }
    for _ in 0..CLOSED_ROUNDS {
        for s in [TOKIO, WRAPPED, TURQUOISE, MONITORED] {
            plan.push((s, 0, true));
        }
    }
    let bar = indicatif::ProgressBar::new(plan.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} (eta {eta})").map_err(|e| e.to_string())?);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let mut open = Vec::new();
    let mut closed = Vec::new();
    for (k, &(s, p, is_closed)) in plan.iter().enumerate() {
        bar.set_message(format!("{} at {}.{}% long{}", s.label(), p / 10, p % 10, if is_closed { ", closed loop" } else { "" }));
        let srv = start(s, 20_000 + (k as u16 % 5000))?;
        let d = Duration::from_secs_f64(o.seconds);
        // Warm-up, not recorded: connections, the servers' first requests.
        rt.block_on(client::open_loop(srv.addr, o.rate, Duration::from_millis(500), p, short, long));
        let out = rt.block_on(async {
            if is_closed {
                client::closed_loop(srv.addr, 4, d, p, short, long).await
            } else {
                client::open_loop(srv.addr, o.rate, d, p, short, long).await
            }
        });
        drop(srv);
        let row = Row {
            server: s.label(),
            permille: p,
            slice_us: s.slice_us,
            short_p50: out.short.value_at_quantile(0.5),
            short_p99: out.short.value_at_quantile(0.99),
            short_p999: out.short.value_at_quantile(0.999),
            long_p50: out.long.value_at_quantile(0.5),
            throughput: out.throughput,
            errors: out.errors,
            shorts: out.short.len(),
        };
        if is_closed {
            closed.push(row);
        } else {
            open.push(row);
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let polls = polls::measure(if o.quick { 200 } else { 1000 });
    let md = report(o, per_us, short, long, &open, &closed, &polls);
    println!("{md}");
    if o.write_docs {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        write_docs(&root.join("docs"), &md, &open).map_err(|e| e.to_string())?;
        eprintln!("wrote docs/benchmarks.md (turquoise section) and docs/plots/turquoise-*.svg");
    }
    Ok(())
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn report(o: &Opts, per_us: f64, short: u64, long: u64, open: &[Row], closed: &[Row], polls: &[polls::PollCost]) -> String {
    let mut s = String::new();
    s.push_str("## 6. turquoise: head-of-line blocking in a hyper server (paper Figure 4)\n\n");
    s.push_str(&format!(
        "Machine: {}. Command: `cargo run --release -p turquoise-bench -- --write-docs{}` ({} s per point).\n\n",
        machine(),
        if o.quick { " --quick" } else { "" },
        o.seconds
    ));
    s.push_str(&format!(
        "A hyper 1.x server pinned to CPU {SERVER_CPU} answers `GET /N` after N opaque steps ({per_us:.0} per us here: short requests N = {short}, \
         ~500 us; long ones N = {long}, ~50 ms). The client, pinned to CPU {CLIENT_CPU}, sends an open-loop stream of {} requests per second \
         over loopback keep-alive connections, long ones by a strict 1000-slot table; latency counts from when each request was due \
         (no coordinated omission). Servers: `tokio` (current-thread runtime, a task per connection), `tokio, wrapped` (the same with \
         every connection task in `turquoise::preemptible` without a time limit: the wrapper's cost), `turquoise` (`turquoise::Runtime`, \
         one worker, 2 ms slices). Latencies in ms; throughput in requests per second.\n\n",
        o.rate
    ));
    s.push_str("![short-request p99](plots/turquoise-hol-p99.svg)\n\n");
    s.push_str("| long requests | server | short p50 | short p99 | short p99.9 | long p50 | throughput |\n|---:|---|---:|---:|---:|---:|---:|\n");
    for r in open.iter().filter(|r| r.server != "turquoise 0.5 ms" && (r.slice_us == 0 || r.slice_us == 2000)) {
        s.push_str(&format!(
            "| {}.{}% | {} | {} | {} | {} | {} | {:.0} |\n",
            r.permille / 10,
            r.permille % 10,
            r.server,
            ms(r.short_p50),
            ms(r.short_p99),
            ms(r.short_p999),
            if r.permille == 0 { "-".into() } else { ms(r.long_p50) },
            r.throughput
        ));
    }
    let at = |srv: &str, p: u32| open.iter().find(|r| r.server == srv && r.permille == p);
    if let (Some(t0), Some(t20), Some(k0), Some(k20)) = (at("turquoise 2 ms", 0), at("turquoise 2 ms", 20), at("tokio", 0), at("tokio", 20)) {
        s.push_str(&format!(
            "\nAt 2% long requests, turquoise's short-request p99 is {:.1}x its own at 0% (target <= 3x); tokio's is {:.1}x its own (expected >= 10x). \
             Without long requests, turquoise's short p50 is {:+.1}% of tokio's.\n",
            t20.short_p99 as f64 / t0.short_p99.max(1) as f64,
            k20.short_p99 as f64 / k0.short_p99.max(1) as f64,
            (t0.short_p50 as f64 / k0.short_p50.max(1) as f64 - 1.0) * 100.0
        ));
    }
    s.push_str("\n**The slice**, at 2% long requests:\n\n| slice | short p50 | short p99 | short p99.9 | long p50 |\n|---:|---:|---:|---:|---:|\n");
    let mut sl: Vec<&Row> = open.iter().filter(|r| r.slice_us > 0 && r.permille == 20 && !r.server.ends_with("monitor")).collect();
    sl.sort_by_key(|r| r.slice_us);
    for r in sl {
        s.push_str(&format!("| {} ms | {} | {} | {} | {} |\n", r.slice_us as f64 / 1000.0, ms(r.short_p50), ms(r.short_p99), ms(r.short_p999), ms(r.long_p50)));
    }
    s.push_str(&format!(
        "\n**Closed loop** (4 connections back to back, no long requests): the servers' capacity, {CLOSED_ROUNDS} runs each, alternating; \
         median [min, max].\n\n| server | throughput | short p50 | short p99 |\n|---|---:|---:|---:|\n"
    ));
    let mut servers: Vec<&str> = closed.iter().map(|r| r.server.as_str()).collect();
    servers.sort();
    servers.dedup();
    let median_of = |srv: &str| -> Option<(f64, f64, f64, &Row)> {
        let mut rs: Vec<&Row> = closed.iter().filter(|r| r.server == srv).collect();
        rs.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
        let mid = *rs.get(rs.len() / 2)?;
        Some((mid.throughput, rs[0].throughput, rs[rs.len() - 1].throughput, mid))
    };
    for srv in &servers {
        if let Some((m, lo, hi, r)) = median_of(srv) {
            s.push_str(&format!("| {srv} | {m:.0} [{lo:.0}, {hi:.0}] | {} | {} |\n", ms(r.short_p50), ms(r.short_p99)));
        }
    }
    if let (Some(k), Some(t)) = (median_of("tokio"), median_of("turquoise 2 ms")) {
        s.push_str(&format!("\nturquoise's closed-loop throughput is {:+.1}% of tokio's (medians; target: within 3%).\n", (t.0 / k.0 - 1.0) * 100.0));
    }
    if let (Some(t), Some(m)) = (median_of("turquoise 2 ms"), median_of("turquoise 2 ms, monitor")) {
        s.push_str(&format!(
            "With linger's monitor thread keeping the deadlines instead of a timer per worker, {:+.1}% (medians).\n",
            (m.0 / t.0 - 1.0) * 100.0
        ));
    }
    s.push_str(&polls::markdown(polls));
    let errors: u64 = open.iter().chain(closed).map(|r| r.errors).sum();
    if errors > 0 {
        s.push_str(&format!("\n{errors} requests failed in this run.\n"));
    }
    s
}

fn write_docs(dir: &Path, md: &str, open: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = dir.join("benchmarks.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let head = match old.find(MARKER) {
        Some(i) => old[..i].to_owned(),
        None => format!("{}\n\n", old.trim_end()),
    };
    // The timekeeping section (linger-timekeeping's) comes after ours.
    let tail = old.find(TIMEKEEPING).map(|i| format!("\n{}", &old[i..])).unwrap_or_default();
    std::fs::write(&path, format!("{head}{MARKER}\n\n{md}{tail}"))?;
    std::fs::create_dir_all(dir.join("plots"))?;
    plot::p99(&dir.join("plots/turquoise-hol-p99.svg"), open)?;
    Ok(())
}
