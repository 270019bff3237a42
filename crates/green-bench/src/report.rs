//! Section 9 of `docs/benchmarks.md`, written from one run's numbers.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use green_bench::client::Outcome;
use green_bench::servers::{Kind, PTHREAD_STACK};

use crate::Opts;

/// Most pthreads the "alive" step starts: `kernel.pid_max` (32768 here)
/// counts every thread of the machine, which is shared; exhausting it would
/// stop other people's builds, so the step stops well before.
pub const PTHREAD_CAP: u64 = 10_000;

/// Targets of the issues (12 and 28). The green server's throughput at
/// least this multiple of the epoll loop's:
const EPOLL_FLOOR: f64 = 0.85;
const HOL_RATIO: f64 = 3.0;
/// Resident memory plus page tables per idle green thread.
const IDLE_BYTES: f64 = 4608.0;
const ALIVE: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sweep {
    /// Closed loop, no long requests: throughput and latency.
    Closed,
    /// Open loop at `--rate`, with and without 1% long requests.
    Hol,
}

/// One point of a web sweep (its runs are a `Vec<Sample>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub sweep: Sweep,
    pub conns: usize,
    pub kind: Kind,
    pub permille: u32,
}

/// One run of one point. Latencies in microseconds, of short requests.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub failed: Option<String>,
    pub throughput: f64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
    pub long_p50: Option<u64>,
    pub timeouts: u64,
    pub errors: u64,
    pub connected: usize,
    pub server_cpu: Option<f64>,
    /// Busy share of the server's CPU and of the client's.
    pub server_core: Option<f64>,
    pub client_core: Option<f64>,
    pub rss_kib: Option<u64>,
    pub threads: Option<u64>,
    /// From the server's standard error: failed accepts, calls that
    /// blocked the green server's worker, anything else (its first line).
    pub accept_errors: u64,
    pub accept_first: Option<String>,
    pub blocked: u64,
    pub other_log: Option<(u64, String)>,
}

impl Sample {
    pub fn from(o: &Outcome) -> Sample {
        Sample {
            failed: None,
            throughput: o.throughput,
            p50: o.short.value_at_quantile(0.5),
            p99: o.short.value_at_quantile(0.99),
            max: o.short.max(),
            long_p50: (!o.long.is_empty()).then(|| o.long.value_at_quantile(0.5)),
            timeouts: o.timeouts,
            errors: o.errors,
            connected: o.connected,
            server_cpu: o.server_cpu,
            server_core: o.cores_busy.get(crate::harness::SERVER_CPU).copied(),
            client_core: o.cores_busy.get(crate::harness::CLIENT_CPU).copied(),
            rss_kib: o.server_rss_kib,
            threads: o.server_threads,
            ..Sample::default()
        }
    }

    /// Counts what the server printed on its standard error.
    pub fn read_log(&mut self, log: &str) {
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            if let Some(n) = line.strip_prefix(green_bench::servers::BLOCKED) {
                self.blocked += n.trim().parse::<u64>().unwrap_or(1);
            } else if let Some((_, e)) = line.split_once(": accept: ") {
                self.accept_errors += 1;
                self.accept_first.get_or_insert_with(|| e.trim().to_owned());
            } else {
                let o = self.other_log.get_or_insert((0, line.trim().to_owned()));
                o.0 += 1;
            }
        }
    }

    pub fn failed(e: String) -> Sample {
        Sample { failed: Some(e), ..Sample::default() }
    }
}

/// Median, min and max of some numbers (None for none).
pub fn spread(mut v: Vec<f64>) -> Option<(f64, f64, f64)> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((v[v.len() / 2], v[0], v[v.len() - 1]))
}

/// The microbenchmarks' outputs, by (kind, measurement).
#[derive(Default)]
pub struct MicroResults(BTreeMap<(String, String), Result<Vec<Vec<String>>, String>>);

impl MicroResults {
    pub fn insert(&mut self, kind: &str, what: &str, out: Result<Vec<Vec<String>>, String>) {
        self.0.insert((kind.into(), what.into()), out);
    }

    fn line(&self, kind: &str, what: &str, name: &str) -> Result<&[String], String> {
        match self.0.get(&(kind.to_owned(), what.to_owned())) {
            None => Err("not run".into()),
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(lines)) => lines.iter().find(|l| l[0] == name).map(|l| &l[1..]).ok_or_else(|| format!("no {name} line")),
        }
    }

    fn nums(&self, kind: &str, what: &str, name: &str) -> Result<Vec<f64>, String> {
        Ok(self.line(kind, what, name)?.iter().filter_map(|s| s.parse().ok()).collect())
    }

    /// ns per unit: median, min, max of the batches.
    pub fn ns(&self, kind: &str, what: &str, name: &str) -> Result<(f64, f64, f64), String> {
        match self.nums(kind, what, name)?[..] {
            [m, lo, hi, ..] => Ok((m, lo, hi)),
            _ => Err("short line".into()),
        }
    }

    /// Resident bytes and page-table bytes per idle thread, and N.
    pub fn idle(&self, kind: &str) -> Result<(f64, f64, f64), String> {
        match self.nums(kind, "idle", "idle")?[..] {
            [n, rss0, rss1, pte0, pte1, ..] if n > 0.0 => Ok(((rss1 - rss0) * 1024.0 / n, (pte1 - pte0) * 1024.0 / n, n)),
            _ => Err("short line".into()),
        }
    }

    /// Threads alive, seconds to start them, RSS (KiB), what stopped it.
    pub fn alive(&self, kind: &str) -> Result<(u64, f64, u64, String), String> {
        let v = self.nums(kind, "alive", "alive")?;
        let reason = self.line(kind, "alive", "reason")?.join(" ");
        match v[..] {
            [n, s, rss, ..] => Ok((n as u64, s, rss as u64, reason)),
            _ => Err("short line".into()),
        }
    }
}

/// How long the "alive" step may take to start its threads (a million
/// green threads took 44 s here).
pub fn alive_secs(quick: bool) -> u64 {
    if quick {
        5
    } else {
        120
    }
}

/// What the "alive" step may add to a process's RSS: half the memory
/// available at the start, at most 12 GiB (the machine is shared).
pub fn alive_budget_kib() -> u64 {
    let avail = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("MemAvailable:")?.split_whitespace().next()?.parse::<u64>().ok()))
        .unwrap_or(8 << 20);
    (avail / 2).min(12 << 20)
}

/// Everything one run measured.
pub struct Results {
    pub machine: String,
    pub rustc: String,
    pub go_version: String,
    pub go_note: Option<String>,
    pub date: String,
    pub commit: String,
    pub load_start: String,
    pub load_end: String,
    /// Other processes' CPU use during the run (CPUs) and steal time.
    pub others: (f64, f64),
    pub seconds: f64,
    pub per_us: f64,
    /// RLIMIT_NOFILE: the hard limit found, the soft limit set, and what
    /// the run wanted (two per connection for the green server).
    pub nofile: (u64, u64, u64),
    pub web: BTreeMap<Key, Vec<Sample>>,
    pub micro: Option<MicroResults>,
}

/// CPU time, in clock ticks: (user + nice + system of the whole machine,
/// this process's user + system with its reaped children's, steal).
pub fn cpu_ticks() -> (u64, u64, u64) {
    let all: Vec<u64> = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().next().map(|l| l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect()))
        .unwrap_or_default();
    let field = |i: usize| all.get(i).copied().unwrap_or(0);
    let me: Vec<u64> = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].split_whitespace().filter_map(|x| x.parse().ok()).collect()))
        .unwrap_or_default();
    // Fields 14-17 of /proc/PID/stat (utime, stime, cutime, cstime) are
    // 11-14 after the state.
    let mine: u64 = (11..15).map(|i| me.get(i).copied().unwrap_or(0)).sum();
    (field(0) + field(1) + field(2), mine, field(7))
}

/// CPUs' worth of time other processes used between two [`cpu_ticks`],
/// and the steal time, over `secs`.
pub fn others(a: (u64, u64, u64), b: (u64, u64, u64), secs: f64) -> (f64, f64) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let other = (b.0.saturating_sub(a.0)).saturating_sub(b.1.saturating_sub(a.1)) as f64;
    (other / hz / secs.max(1e-3), b.2.saturating_sub(a.2) as f64 / hz / secs.max(1e-3))
}

fn sysctl(path: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{path}")).map(|s| s.trim().to_owned()).unwrap_or_else(|_| "?".into())
}

impl Results {
    pub fn new(_o: &Opts) -> Results {
        Results {
            machine: bench_util::machine(),
            rustc: bench_util::run::rustc(),
            go_version: crate::harness::go_version(),
            go_note: None,
            date: bench_util::run::date(),
            commit: bench_util::run::commit(),
            load_start: bench_util::loadavg(),
            load_end: String::new(),
            others: (0.0, 0.0),
            seconds: 0.0,
            per_us: 0.0,
            nofile: (0, 0, 0),
            web: BTreeMap::new(),
            micro: None,
        }
    }

    fn ok(&self, key: &Key) -> Vec<&Sample> {
        self.web.get(key).map(|v| v.iter().filter(|s| s.failed.is_none()).collect()).unwrap_or_default()
    }

    /// Median, min, max of `f` over a point's runs.
    pub fn stat(&self, key: &Key, f: impl Fn(&Sample) -> f64) -> Option<(f64, f64, f64)> {
        spread(self.ok(key).into_iter().map(f).collect())
    }

    /// The servers and connection counts of a sweep, in order.
    pub fn axes(&self, sweep: Sweep) -> (Vec<Kind>, Vec<usize>) {
        let mut kinds: Vec<Kind> = self.web.keys().filter(|k| k.sweep == sweep).map(|k| k.kind).collect();
        let mut conns: Vec<usize> = self.web.keys().filter(|k| k.sweep == sweep).map(|k| k.conns).collect();
        kinds.sort_by_key(|k| Kind::ALL.iter().position(|x| x == k));
        kinds.dedup();
        conns.sort();
        conns.dedup();
        (kinds, conns)
    }
}

/// Microseconds as milliseconds, to three significant digits or so.
pub fn ms(us: f64) -> String {
    let m = us / 1000.0;
    if m >= 100.0 {
        format!("{m:.0}")
    } else if m >= 10.0 {
        format!("{m:.1}")
    } else if m >= 1.0 {
        format!("{m:.2}")
    } else {
        format!("{m:.3}")
    }
}

/// A count with thousands separators.
pub fn count(x: f64) -> String {
    let s = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ns(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.1} us", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.2} us", x / 1000.0)
    } else {
        format!("{x:.0} ns")
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "**no**"
    }
}

fn pct(x: Option<(f64, f64, f64)>) -> String {
    x.map(|(m, _, _)| format!("{:.0}%", m * 100.0)).unwrap_or_else(|| "-".into())
}

pub fn markdown(o: &Opts, r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## 9. Green threads (issues 12 and 28)\n");
    let _ = writeln!(
        s,
        "Reproduce with `make bench-green`, i.e.\n\n```sh\ncargo build --release -p green-bench && target/release/green-bench --write-docs\n```\n\n\
         (`--quick` gives a smoke run well under a minute; without `--write-docs` the section only goes to stdout; `--help` for the knobs.) \
         This run: {} mode{}, {:.0} s. Every number below was measured in this one run, baselines included, on a shared VM: compare within the run.\n",
        if o.quick { "quick" } else { "full" },
        if o.seconds != 5.0 && !o.quick { format!(" with {} s points", o.seconds) } else { String::new() },
        r.seconds
    );
    let _ = writeln!(s, "|  |  |\n|---|---|");
    let _ = writeln!(s, "| machine | {} |", r.machine);
    let _ = writeln!(s, "| rustc / go | {} / {} |", r.rustc, r.go_version);
    let _ = writeln!(s, "| date / commit | {} / {} |", r.date, r.commit);
    let _ = writeln!(s, "| load average (1/5/15 min) at start / end | {} / {} |", r.load_start, r.load_end);
    let _ = writeln!(
        s,
        "| other processes during the run | {:.2} CPUs on average (the machine's user + system time less this run's processes', of {} CPUs); steal {:.2} CPUs |",
        r.others.0,
        bench_util::cpus(),
        r.others.1
    );
    let (hard, set, wanted) = r.nofile;
    let _ = writeln!(
        s,
        "| RLIMIT_NOFILE | hard limit {}; {} set for the load generator and every server{} |",
        count(hard as f64),
        count(set as f64),
        if set >= wanted && set > hard {
            " (raised past the hard limit, as root)".to_string()
        } else if set < wanted {
            format!(
                " ({} wanted: a connection and a little room for each server; \
                 raising the hard limit was refused, so at the largest counts they run short, see what the servers printed)",
                count(wanted as f64)
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "| vm.max_map_count / kernel.pid_max / kernel.threads-max / net.core.somaxconn | {} / {} / {} / {} |",
        sysctl("vm/max_map_count"),
        sysctl("kernel/pid_max"),
        sysctl("kernel/threads-max"),
        sysctl("net/core/somaxconn")
    );
    if let Some(n) = &r.go_note {
        let _ = writeln!(s, "| Go | {n} |");
    }
    s.push('\n');
    targets(&mut s, o, r);
    if !r.web.is_empty() {
        closed(&mut s, o, r);
        hol(&mut s, o, r);
    }
    if let Some(m) = &r.micro {
        micro(&mut s, o, m);
    }
    s
}

fn targets(s: &mut String, o: &Opts, r: &Results) {
    let _ = writeln!(s, "### Targets\n\nGoals of issues 12 and 28; printed, never asserted.\n\n| what | goal | measured | met |\n|---|---|---|---|");
    let (_, conns) = r.axes(Sweep::Closed);
    let thr = |kind, c| r.stat(&Key { sweep: Sweep::Closed, conns: c, kind, permille: 0 }, |x| x.throughput).map(|t| t.0);
    // Each comparison at every connection count: (against, goal as a
    // multiple of its throughput, how the goal reads).
    let against = [
        (Kind::Go, 1.0, "above Go's (goroutine per connection, GOMAXPROCS=1)".to_string()),
        (Kind::Epoll, EPOLL_FLOOR, format!("at least {EPOLL_FLOOR:.2}x the epoll loop's")),
        (Kind::GreenWhole, 1.0, "at least whole 2 ms slices' (no granularity: the default before)".to_string()),
    ];
    for (other, goal, what) in against {
        let ratios: Vec<(usize, f64, f64, f64)> = conns.iter().filter_map(|&c| Some((c, thr(Kind::Green, c)?, thr(other, c)?))).map(|(c, g, x)| (c, g / x, g, x)).collect();
        if ratios.is_empty() {
            continue;
        }
        let met = ratios.iter().filter(|r| r.1 >= goal).count();
        let list: Vec<String> = ratios.iter().map(|(c, x, g, y)| format!("{x:.2}x at {} ({} against {})", count(*c as f64), count(*g), count(*y))).collect();
        let _ = writeln!(
            s,
            "| green-thread server's throughput (default settings), {what} | >= {goal:.2}x | {} | {} |",
            list.join("; "),
            if met == ratios.len() { "yes".to_string() } else { format!("**no** (at {met} of {})", ratios.len()) }
        );
    }
    let (_, hconns) = r.axes(Sweep::Hol);
    let hol_kinds = [
        (Kind::Green, format!("default settings ({} ms slices, {} ms granularity)", o.slice_us as f64 / 1000.0, turquoise::DEFAULT_GRANULARITY.as_secs_f64() * 1000.0)),
        (Kind::GreenWhole, format!("whole {} ms slices", o.slice_us as f64 / 1000.0)),
        (Kind::GreenFine, format!("{} ms slices", green_bench::servers::FINE_SLICE_US as f64 / 1000.0)),
    ];
    for (kind, label) in hol_kinds {
        let ratios: Vec<(usize, f64)> = hconns.iter().filter_map(|&c| hol_ratio(r, kind, c).map(|x| (c, x))).collect();
        if ratios.is_empty() {
            continue;
        }
        let met = ratios.iter().filter(|(_, x)| *x <= HOL_RATIO).count();
        let list: Vec<String> = ratios.iter().map(|(c, x)| format!("{x:.2}x at {}", count(*c as f64))).collect();
        let _ = writeln!(
            s,
            "| green short-request p99 with 1% long requests (20 ms), against its own without, {label} | <= {HOL_RATIO:.0}x | {} connections | {} |",
            list.join(", "),
            if met == ratios.len() { "yes".to_string() } else { format!("**no** (at {met} of {})", ratios.len()) }
        );
    }
    if let Some(m) = &r.micro {
        // Issue 28: each at most Go's, measured in the same run.
        for (what, name, label) in [("spawn", "spawn_join", "spawn+join"), ("chan", "switch_chan", "switch through a channel"), ("io", "switch_io", "switch through parked I/O")] {
            if let (Ok((g, _, _)), Ok((go, _, _))) = (m.ns("green", what, name), m.ns("go", what, name)) {
                let _ = writeln!(s, "| green {label} (median), against Go's | <= 1.00x | {:.2}x ({} against {}) | {} |", g / go, ns(g), ns(go), yes(g <= go));
            }
        }
        if let Ok((b, p, n)) = m.idle("green") {
            let _ = writeln!(
                s,
                "| resident memory plus page tables per idle green thread ({} asleep) | <= 4.5 KiB | {:.0} B + {:.0} B | {} |",
                count(n),
                b,
                p,
                yes(b + p <= IDLE_BYTES)
            );
        }
        if let Ok((n, _, _, why)) = m.alive("green") {
            let _ = writeln!(s, "| green threads alive at once | {} | {} ({why}) | {} |", count(ALIVE as f64), count(n as f64), yes(n >= ALIVE));
        }
    }
    s.push('\n');
}

/// Green's (or another's) short p99 with 1% long requests over without.
pub fn hol_ratio(r: &Results, kind: Kind, conns: usize) -> Option<f64> {
    let p99 = |permille| r.stat(&Key { sweep: Sweep::Hol, conns, kind, permille }, |x| x.p99 as f64).map(|t| t.0);
    Some(p99(10)? / p99(0)?.max(1.0))
}

fn cell(x: Option<(f64, f64, f64)>, f: impl Fn(f64) -> String) -> String {
    match x {
        Some((m, lo, hi)) if lo != hi => format!("{} [{}-{}]", f(m), f(lo), f(hi)),
        Some((m, _, _)) => f(m),
        None => "-".into(),
    }
}

/// Runs that failed, or connected fewer than asked.
fn failures(r: &Results, key: &Key) -> String {
    let runs = r.web.get(key).map(Vec::as_slice).unwrap_or_default();
    let failed: Vec<&String> = runs.iter().filter_map(|s| s.failed.as_ref()).collect();
    let short = runs.iter().filter(|s| s.failed.is_none() && s.connected < key.conns).map(|s| s.connected).min();
    let mut note = String::new();
    if let Some(f) = failed.first() {
        note += &format!(" ({} runs failed: {f})", failed.len());
    }
    if let Some(c) = short {
        note += &format!(" (only {} connected)", count(c as f64));
    }
    note
}

/// What the servers of a sweep printed: failed accepts, calls that blocked
/// the green server's worker, other lines (summed over runs).
fn logs(s: &mut String, r: &Results, sweep: Sweep) {
    let mut notes = Vec::new();
    for (key, runs) in r.web.range(Key { sweep, conns: 0, kind: Kind::Green, permille: 0 }..).take_while(|(k, _)| k.sweep == sweep) {
        let accepts: u64 = runs.iter().map(|x| x.accept_errors).sum();
        let blocked: u64 = runs.iter().map(|x| x.blocked).sum();
        let other: u64 = runs.iter().filter_map(|x| x.other_log.as_ref()).map(|o| o.0).sum();
        if accepts + blocked + other == 0 {
            continue;
        }
        let mut what = Vec::new();
        if accepts > 0 {
            let first = runs.iter().find_map(|x| x.accept_first.clone()).unwrap_or_default();
            what.push(format!("{} failed accepts (`{first}`)", count(accepts as f64)));
        }
        if blocked > 0 {
            what.push(format!("{} blocking calls that blocked the worker instead of parking", count(blocked as f64)));
        }
        if other > 0 {
            let first = runs.iter().find_map(|x| x.other_log.as_ref().map(|o| o.1.clone())).unwrap_or_default();
            what.push(format!("{} other lines (first: `{first}`)", count(other as f64)));
        }
        notes.push(format!(
            "- {} at {} connections{}: {} (over {} runs)",
            key.kind.label(),
            count(key.conns as f64),
            if key.permille > 0 { ", 1% long" } else { "" },
            what.join(", "),
            runs.len()
        ));
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "What the servers printed on their standard error:\n\n{}\n", notes.join("\n"));
    }
}

fn closed(s: &mut String, o: &Opts, r: &Results) {
    let (kinds, conns) = r.axes(Sweep::Closed);
    let _ = writeln!(s, "### 9.1 A web server, thread per connection (seed 002)\n");
    let _ = writeln!(
        s,
        "Each server answers HTTP/1.1 keep-alive requests on loopback with the same work: read until the blank line, parse the request line and \
         every header line, answer a fixed 13-byte body (`crates/green-bench/src/http.rs`; Go: `go/main.go`, the same steps). The server process \
         is pinned to CPU {srv} and the load generator to CPU {cli} (`sched_setaffinity`), so each has one core. Servers: **green threads** \
         (`turquoise::thread`, a green thread per connection running blocking `std::net` code, one worker, {slice} ms slices; and the same \
         with {fine} ms slices, what a server that cares for latency more than throughput would choose), **pthreads** (a \
         `std::thread` per connection, {stack} KiB stacks, the same code), **epoll loop** (one thread, mio, edge-triggered), **tokio** \
         (current-thread runtime, a task per connection), **Go** (`net`, a goroutine per connection, `GOMAXPROCS=1`). The load generator \
         (`client.rs`, one thread over epoll) opens N connections first (not timed), then each sends its next request as soon as the \
         previous one is answered (closed loop, as the seed's wrk), {w} s of warm-up, then {m} s measured; a request answered later than \
         {t} s (or never) is a timeout. {runs} runs per point, servers alternating; cells are the median [min-max] of the runs. Latencies \
         in ms. \"server CPU\" is the server process's CPU time over the window, in CPUs, and \"server us/request\" that time per answer \
         (the median of the runs' ratios: steadier than throughput when other work takes the CPUs; it includes the loopback's TCP work \
         done in the server's system calls, about 40% of a core at full speed here). \"CPU {srv} / {cli} busy\" is the share of each \
         core that was busy, other processes included: the server's core near 1.0 means the server was the bottleneck; both near \
         1.0, the load generator bounded it as much. Both processes run the same \
         executable (which links linger's wrappers of `read`, `write`...: outside a green thread they cost one thread-local load).\n",
        srv = crate::harness::SERVER_CPU,
        cli = crate::harness::CLIENT_CPU,
        slice = o.slice_us as f64 / 1000.0,
        fine = green_bench::servers::FINE_SLICE_US as f64 / 1000.0,
        stack = PTHREAD_STACK >> 10,
        w = o.warmup,
        m = o.seconds,
        t = o.timeout_ms as f64 / 1000.0,
        runs = o.runs,
    );
    let _ = writeln!(s, "![throughput against connections](plots/green-throughput.svg)\n");
    let _ = writeln!(s, "![p99 latency against connections](plots/green-p99.svg)\n");
    let _ = writeln!(
        s,
        "| connections | server | requests/s | p50 | p99 | max | timeouts | errors | server CPU | server us/request | CPU {srv} / {cli} busy | server RSS (MiB) | server threads |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        srv = crate::harness::SERVER_CPU,
        cli = crate::harness::CLIENT_CPU,
    );
    for &c in &conns {
        for &k in &kinds {
            let key = Key { sweep: Sweep::Closed, conns: c, kind: k, permille: 0 };
            let st = |f: &dyn Fn(&Sample) -> f64| r.stat(&key, f);
            let _ = writeln!(
                s,
                "| {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                count(c as f64),
                k.label(),
                failures(r, &key),
                cell(st(&|x| x.throughput), count),
                cell(st(&|x| x.p50 as f64), ms),
                cell(st(&|x| x.p99 as f64), ms),
                cell(st(&|x| x.max as f64), ms),
                cell(st(&|x| x.timeouts as f64), count),
                cell(st(&|x| x.errors as f64), count),
                st(&|x| x.server_cpu.unwrap_or(f64::NAN)).map(|t| format!("{:.2}", t.0)).unwrap_or_else(|| "-".into()),
                cell(st(&|x| x.server_cpu.unwrap_or(f64::NAN) / x.throughput * 1e6), |v| format!("{v:.1}")),
                match (st(&|x| x.server_core.unwrap_or(f64::NAN)), st(&|x| x.client_core.unwrap_or(f64::NAN))) {
                    (Some(a), Some(b)) => format!("{:.2} / {:.2}", a.0, b.0),
                    _ => "-".into(),
                },
                st(&|x| x.rss_kib.map_or(f64::NAN, |k| k as f64 / 1024.0)).map(|t| format!("{:.0}", t.0)).unwrap_or_else(|| "-".into()),
                st(&|x| x.threads.map_or(f64::NAN, |k| k as f64)).map(|t| count(t.0)).unwrap_or_else(|| "-".into()),
            );
        }
    }
    s.push('\n');
    // Green against each other server, at each count (medians).
    let thr = |kind, c| r.stat(&Key { sweep: Sweep::Closed, conns: c, kind, permille: 0 }, |x| x.throughput).map(|t| t.0);
    let mut lines = Vec::new();
    for &c in &conns {
        let Some(g) = thr(Kind::Green, c) else { continue };
        let rel: Vec<String> = kinds.iter().filter(|&&k| k != Kind::Green).filter_map(|&k| thr(k, c).map(|x| format!("{:.2}x {}", g / x, k.label()))).collect();
        lines.push(format!("at {}: {}", count(c as f64), rel.join(", ")));
    }
    if !lines.is_empty() {
        let _ = writeln!(s, "Green threads' throughput as a multiple of the others' (medians): {}.\n", lines.join("; "));
    }
    logs(s, r, Sweep::Closed);
}

fn hol(s: &mut String, o: &Opts, r: &Results) {
    let (kinds, conns) = r.axes(Sweep::Hol);
    if conns.is_empty() {
        return;
    }
    let _ = writeln!(s, "### 9.2 Head-of-line blocking: 1% long requests\n");
    let _ = writeln!(
        s,
        "The same servers and connections, but an open loop: {rate} requests per second in all, request i due at start + i/{rate} on \
         connection i mod N (a connection still waiting for an answer sends it right after; latency counts from when it was due, so a \
         stalled server is not hidden). With 1% long requests, `GET /long` spins {long} ms of CPU in the handler (calibrated work, {per:.0} \
         opaque steps per us here), one in 100 by a fixed shuffled table: {busy:.0}% of the server's core goes to them. A closed loop would \
         not show head-of-line blocking: with the long requests the server saturates and every latency becomes N / throughput. \
         Short-request latencies in ms, median [min-max] of {runs} runs; \"x\" is the median p99 with over the median p99 without.\n",
        rate = count(o.rate),
        long = o.long_ms,
        per = r.per_us,
        busy = o.rate * 0.01 * o.long_ms / 10.0,
        runs = o.runs,
    );
    let _ = writeln!(s, "![short-request p99 with and without long requests](plots/green-hol.svg)\n");
    let _ = writeln!(
        s,
        "| connections | server | short p50, no long | short p99, no long | short p50, 1% long | short p99, 1% long | x | long p50 | timeouts | errors |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &c in &conns {
        for &k in &kinds {
            let key = |permille| Key { sweep: Sweep::Hol, conns: c, kind: k, permille };
            let (k0, k1) = (key(0), key(10));
            let _ = writeln!(
                s,
                "| {} | {}{}{} | {} | {} | {} | {} | {} | {} | {} | {} |",
                count(c as f64),
                k.label(),
                failures(r, &k0),
                failures(r, &k1),
                cell(r.stat(&k0, |x| x.p50 as f64), ms),
                cell(r.stat(&k0, |x| x.p99 as f64), ms),
                cell(r.stat(&k1, |x| x.p50 as f64), ms),
                cell(r.stat(&k1, |x| x.p99 as f64), ms),
                hol_ratio(r, k, c).map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into()),
                cell(r.stat(&k1, |x| x.long_p50.map_or(f64::NAN, |v| v as f64)), ms),
                cell(r.stat(&k1, |x| (x.timeouts) as f64), count),
                cell(r.stat(&k1, |x| (x.errors) as f64), count),
            );
        }
    }
    let _ = writeln!(s, "\nServer CPU (1.0 = saturated), median over runs, without / with long requests: {}.\n", {
        let v: Vec<String> = kinds
            .iter()
            .map(|&k| {
                let cpu = |p, c| pct(r.stat(&Key { sweep: Sweep::Hol, conns: c, kind: k, permille: p }, |x| x.server_cpu.unwrap_or(f64::NAN)));
                let per: Vec<String> = conns.iter().map(|&c| format!("{} / {}", cpu(0, c), cpu(10, c))).collect();
                format!("{} {}", k.label(), per.join(", "))
            })
            .collect();
        v.join("; ")
    });
    logs(s, r, Sweep::Hol);
}

fn micro(s: &mut String, o: &Opts, m: &MicroResults) {
    let _ = writeln!(s, "### 9.3 Microbenchmarks\n");
    let _ = writeln!(
        s,
        "Green threads (a one-worker `turquoise::Runtime`, default slice and stack), goroutines (`GOMAXPROCS=1`) and pthreads, each \
         measurement in a process of its own pinned to CPU {cpu}. Times are per operation: the median [min-max] of 7 batches after a \
         warm-up. **spawn+join**: an empty thread started and joined, one at a time, from inside a green thread (goroutine: a `WaitGroup`; \
         pthreads: `std::thread::spawn` + `join`). **switch, channel**: two threads passing a value back and forth (green: tokio's unbounded \
         mpsc awaited with `thread::block_on`; Go: unbuffered channels; pthreads: std's mpsc), per switch (half a round trip). **switch, \
         parked I/O**: the same over a socketpair with blocking 1-byte reads and writes (green: linger's park hook on the worker's reactor; \
         Go: `net.FileConn`, the netpoller; pthreads: the kernel). **idle**: N threads asleep for an hour (green `thread::sleep`, \
         `time.Sleep`, `std::thread::sleep`; pthreads with {stack} KiB stacks): growth of `VmRSS` and `VmPTE` per thread. **alive**: \
         sleeping threads started until one fails, a cap ({cap} green and Go, {pcap} pthreads: `kernel.pid_max` is shared by the whole \
         machine), {secs} s, or RSS growth of {budget} GiB (half the memory available, at most 12 GiB).\n",
        cpu = crate::harness::SERVER_CPU,
        stack = PTHREAD_STACK >> 10,
        cap = count(if o.quick { 20_000.0 } else { ALIVE as f64 }),
        pcap = count(if o.quick { 2_000.0 } else { PTHREAD_CAP as f64 }),
        secs = alive_secs(o.quick),
        budget = alive_budget_kib() >> 20,
    );
    let kinds = ["green", "go", "pthread"];
    let _ = writeln!(s, "| measure | green threads | Go | pthreads | target (green) |\n|---|---:|---:|---:|---:|");
    let row = |s: &mut String, label: &str, what: &str, name: &str, target: &str| {
        let cells: Vec<String> = kinds.iter().map(|k| m.ns(k, what, name).map(|x| cell(Some(x), ns)).unwrap_or_else(|e| format!("({e})"))).collect();
        let _ = writeln!(s, "| {label} | {} | {target} |", cells.join(" | "));
    };
    row(s, "spawn+join", "spawn", "spawn_join", "<= Go's");
    row(s, "switch, channel", "chan", "switch_chan", "<= Go's");
    row(s, "switch, parked I/O (socketpair)", "io", "switch_io", "<= Go's");
    let idle: Vec<String> = kinds.iter().map(|k| m.idle(k).map(|(b, _, _)| format!("{b:.0} B")).unwrap_or_else(|e| format!("({e})"))).collect();
    let _ = writeln!(s, "| idle: resident memory per thread | {} | with page tables <= 4608 B |", idle.join(" | "));
    let pte: Vec<String> = kinds.iter().map(|k| m.idle(k).map(|(_, p, _)| format!("{p:.0} B")).unwrap_or_else(|e| format!("({e})"))).collect();
    let _ = writeln!(s, "| idle: page tables per thread | {} |  |", pte.join(" | "));
    let alive: Vec<String> = kinds
        .iter()
        .map(|k| m.alive(k).map(|(n, secs, rss, _)| format!("{} ({secs:.1} s, RSS {:.1} GiB)", count(n as f64), rss as f64 / (1 << 20) as f64)).unwrap_or_else(|e| format!("({e})")))
        .collect();
    let _ = writeln!(s, "| alive at once | {} | {} |", alive.join(" | "), count(ALIVE as f64));
    let why: Vec<String> = kinds.iter().map(|k| m.alive(k).map(|x| x.3).unwrap_or_else(|_| "-".into())).collect();
    let _ = writeln!(s, "| what stopped it | {} |  |", why.join(" | "));
    s.push('\n');
}

