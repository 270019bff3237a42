//! sync-bench: issue 13's benchmarks of `turquoise::sync` (see the
//! library's documentation).
//!
//! ```text
//! sync-bench [--quick] [--no-ck] [--no-go] [--write-docs]
//! sync-bench --micro KIND WHAT N...   (green-bench's microbenchmarks, in a child)
//! ```
//!
//! Prints markdown; with `--write-docs` replaces section 10 of
//! `docs/benchmarks.md` up to its hand-written notes ([`NOTES`]) and
//! writes `docs/plots/sync-*.svg`.

mod plot;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use bench_util::run::Spread;
use sync_bench::ec::{self, Flavour};
use sync_bench::{activities, fences, prims, Row, Sizes};

/// Where the hand-written notes after section 10 start: kept.
const NOTES: &str = "<!-- sync-bench notes: written by hand after a run; sync-bench --write-docs keeps what follows -->";

struct Opts {
    quick: bool,
    ck: bool,
    go: bool,
    write_docs: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts { quick: false, ck: true, go: true, write_docs: false };
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--no-ck" => o.ck = false,
            "--no-go" => o.go = false,
            "--write-docs" => o.write_docs = true,
            "-h" | "--help" => {
                println!("usage: sync-bench [--quick] [--no-ck] [--no-go] [--write-docs]");
                std::process::exit(0);
            }
            x => return Err(format!("unknown argument {x:?} (try --help)")),
        }
    }
    Ok(o)
}

/// A peer program's rows (its output lines), or why there are none.
/// `prefix` goes before each line (for a program that does not print the
/// "what name" words).
fn run_peer(exe: &Path, args: &[String], env: &[(&str, &str)], prefix: &str) -> Result<Vec<Row>, String> {
    let o = Command::new(exe).args(args).envs(env.iter().copied()).output().map_err(|e| format!("{}: {e}", exe.display()))?;
    if !o.status.success() {
        return Err(format!("{} failed ({}): {}", exe.display(), o.status, String::from_utf8_lossy(&o.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| Row::parse(&format!("{prefix}{l}"))).collect())
}

/// Concurrency Kit's side: `c/ck_bench.c` built against libck and run.
fn ck(dir: &Path, s: Sizes, good: usize) -> Result<Vec<Row>, String> {
    if !Path::new("/usr/include/ck_ec.h").exists() {
        return Err("libck is missing (no /usr/include/ck_ec.h): the ck columns are skipped; `apt-get install libck-dev` adds them".into());
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/ck_bench.c");
    let exe = bench_util::run::build_c(&src, &dir.join("ck_bench"), &["-lck"]).map_err(|e| format!("{e}: the ck columns are skipped"))?;
    let mut rows = run_peer(&exe, &[s.batches, s.n, s.rounds, good].map(|v| v.to_string()), &[], "")?;
    // Its plain store, fetch_add and bare futex, apart from ours.
    rows.iter_mut().filter(|r| !r.name.starts_with("ck_")).for_each(|r| r.name.push_str(" (C)"));
    Ok(rows)
}

/// Go's side: `go/main.go` built and run (locks), and green-bench's Go
/// program's channel ping-pong (`micro chan N`: the median, min and max of
/// 7 batches, ns per switch, half a round trip) with 2 and 1 threads, and
/// with one thread its spawn+join and memory per idle goroutine (next to
/// activities).
fn go(dir: &Path, s: Sizes, idle: usize) -> Result<Vec<Row>, String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = bench_util::run::build_go(&manifest.join("go/main.go"), &dir.join("sync-bench-go"))?;
    let mut rows = run_peer(&exe, &[s.batches.to_string(), (s.n / 4).to_string()], &[], "")?;
    let green = bench_util::run::build_go(&manifest.join("../green-bench/go/main.go"), &dir.join("green-bench-go"))?;
    for (what, procs) in [("pingpong_os", "2"), ("pingpong_green", "1")] {
        let args = ["micro".to_string(), "chan".into(), (s.n / 40).to_string()];
        for mut r in run_peer(&green, &args, &[("GOMAXPROCS", procs)], &format!("{what} go "))? {
            if procs == "1" {
                rows.push(Row { what: "act_switch".into(), ..r.clone() });
            }
            r.samples.iter_mut().for_each(|v| *v *= 2.0);
            rows.push(r);
        }
    }
    let one = [("GOMAXPROCS", "1")];
    rows.extend(run_peer(&green, &["micro".into(), "spawn".into(), (s.n / 200).to_string()], &one, "act_spawn go ")?);
    let o = Command::new(&green).args(["micro", "idle", &idle.to_string()]).envs(one).output().map_err(|e| format!("{}: {e}", green.display()))?;
    rows.extend(String::from_utf8_lossy(&o.stdout).lines().find_map(|l| activities::idle_rows("go", l)).into_iter().flatten());
    Ok(rows)
}

/// Memory per idle activity, green thread and pthread: green-bench's
/// `idle N` in a child process of this program each (`--micro`), so that
/// no earlier measurement's freed memory or cached stacks hide any.
fn idle(n: usize) -> Result<Vec<Row>, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for (kind, name) in [("activity", "activity (parked in thread::sleep)"), ("green", "preemptive green thread (parked in thread::sleep)"), ("pthread", "OS thread (std::thread::sleep)")] {
        let o = Command::new(&me).args(["--micro", kind, "idle", &n.to_string()]).output().map_err(|e| format!("{}: {e}", me.display()))?;
        let out = String::from_utf8_lossy(&o.stdout);
        let r = out.lines().find_map(|l| activities::idle_rows(name, l)).ok_or_else(|| format!("--micro {kind} idle {n} printed no idle line ({}): {}", o.status, String::from_utf8_lossy(&o.stderr).trim()))?;
        rows.extend(r);
    }
    Ok(rows)
}

struct Run {
    rows: Vec<Row>,
    notes: Vec<String>,
    machine: String,
    versions: String,
    date: String,
    commit: String,
    load: (String, String),
    seconds: f64,
    quick: bool,
}

impl Run {
    fn get(&self, what: &str, name: &str) -> Option<Spread> {
        self.rows.iter().find(|r| r.what == what && r.name == name).and_then(|r| Spread::of(&r.samples))
    }

    fn names(&self, what: &str) -> Vec<String> {
        self.rows.iter().filter(|r| r.what == what).map(|r| r.name.clone()).collect()
    }
}

/// Nanoseconds with a unit that keeps three digits or so.
fn ns(v: f64) -> String {
    match v.abs() {
        a if a >= 1e8 => format!("{:.2} s", v / 1e9),
        a if a >= 1e6 => format!("{:.2} ms", v / 1e6),
        a if a >= 1e4 => format!("{:.1} us", v / 1e3),
        a if a >= 1e3 => format!("{:.2} us", v / 1e3),
        a if a >= 10.0 => format!("{v:.1} ns"),
        _ => format!("{v:.2} ns"),
    }
}

/// "median [min-max]" (batches) or "median [p10-p90]" (events).
fn cell(s: Option<Spread>, events: bool) -> String {
    match s {
        None => "-".into(),
        Some(s) if events => format!("{} [{}-{}]", ns(s.median), ns(s.p10), ns(s.p90)),
        Some(s) => format!("{} [{}-{}]", ns(s.median), ns(s.min), ns(s.max)),
    }
}

fn cycles(s: Option<Spread>) -> String {
    s.map_or("-".into(), |s| format!("{:.2} [{:.2}-{:.2}]", s.median, s.min, s.max))
}

/// A table of `whats` (columns, with headers) over the union of their names.
fn table(md: &mut String, r: &Run, first: &str, cols: &[(&str, &str)], events: bool) {
    let mut names: Vec<String> = Vec::new();
    for (what, _) in cols {
        for n in r.names(what) {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    let _ = writeln!(md, "| {first} |{}", cols.iter().map(|c| format!(" {} |", c.1)).collect::<String>());
    let _ = writeln!(md, "|---|{}", "---:|".repeat(cols.len()));
    for n in names {
        let _ = writeln!(md, "| {n} |{}", cols.iter().map(|c| format!(" {} |", cell(r.get(c.0, &n), events))).collect::<String>());
    }
    md.push('\n');
}

fn bars(r: &Run, what: &str, suffix: &str, events: bool) -> Vec<plot::Bar> {
    r.names(what)
        .into_iter()
        .filter_map(|n| r.get(what, &n).map(|s| (format!("{n}{suffix}"), s.median, if events { s.p10 } else { s.min }, if events { s.p90 } else { s.max })))
        .collect()
}

/// "yes" or "**no**".
fn met(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

fn targets(md: &mut String, r: &Run) {
    let med = |what: &str, name: &str| r.get(what, name).map(|s| s.median);
    let _ = writeln!(md, "| what | goal | measured | met |\n|---|---|---|---|");
    for (ours, theirs) in [("EventCount::increment (MP)", "ck_ec32_inc mp"), ("Producer::increment (SP)", "ck_ec32_inc sp")] {
        match (med("inc_ns", ours), med("inc_ns", theirs)) {
            (Some(a), Some(b)) => {
                let _ = writeln!(md, "| {ours}, no waiter | <= {theirs} in the same run | {} against {} ({:.2}x) | {} |", ns(a), ns(b), a / b, met(a <= b));
            }
            (Some(a), None) => {
                let _ = writeln!(md, "| {ours}, no waiter | <= {theirs} in the same run | {} (ck not measured) | ? |", ns(a));
            }
            _ => {}
        }
    }
    for (what, place) in [("wake_one", "one CPU"), ("wake_two", "two CPUs")] {
        let Some(futex) = med(what, "futex") else { continue };
        for f in [Flavour::Mp, Flavour::Sp] {
            if let Some(v) = med(what, f.name()) {
                let _ = writeln!(md, "| wake-up latency, {}, {place} | within 10% of a bare futex wake | {} against {} ({:+.1}%) | {} |", f.name(), ns(v), ns(futex), (v / futex - 1.0) * 100.0, met(v <= futex * 1.1));
            }
        }
    }
    let ck = med("good_blocked", "ck_ec32_inc sp").map_or("not measured".into(), ns);
    for (what, heavy, issue) in [("good_blocked", "heavy_blocked", "0.5 us"), ("good_spinning", "heavy_spinning", "8.4 us")] {
        let (Some(good), Some(h)) = (med(what, "Producer (SP), membarrier expedited"), med(heavy, "membarrier expedited")) else { continue };
        let state = if what == "good_blocked" { "blocked" } else { "spinning" };
        let _ = writeln!(
            md,
            "| SP waiter asleep for good, producer {state} | right after its forced barrier (issue: {issue}; ck {ck}) | {} (the barrier alone: {}) | {} |",
            ns(good),
            ns(h),
            met(good <= h + 2000.0)
        );
    }
    let go = |what: &str| r.names(what).into_iter().find(|n| n.starts_with("Go ")).and_then(|n| med(what, &n)).map_or("not measured".into(), ns);
    if let Some(d) = check_cost(r) {
        let _ = writeln!(md, "| activities: a yield check (`checkpoint()`), nothing due | <= 1 ns | {} per check | {} |", ns(d), met(d <= 1.0));
    }
    if let Some(v) = med("act_spawn", activities::SPAWN_ROW) {
        let _ = writeln!(md, "| activities: spawn+join (`spawn_local`) | <= 0.2 us (issue's Go: 320 ns; this run's: {}) | {} ({:.1}x the goal) | {} |", go("act_spawn"), ns(v), v / 200.0, met(v <= 200.0));
    }
    if let Some(v) = med("act_switch", activities::SWITCH_ROW) {
        let _ = writeln!(md, "| activities: a switch (`yield_now` between two) | <= 50 ns (issue's Go channel ping-pong: 123-140 ns; this run's: {}) | {} ({:.1}x the goal) | {} |", go("act_switch"), ns(v), v / 50.0, met(v <= 50.0));
    }
    md.push('\n');
}

/// What a yield check adds per iteration: the loop with `checkpoint()`
/// less the loop without (medians).
fn check_cost(r: &Run) -> Option<f64> {
    Some(r.get("act_check", activities::CHECK_ROWS[0])?.median - r.get("act_check", activities::CHECK_ROWS[1])?.median)
}

/// Section 10.7: activities.
fn report_activities(md: &mut String, r: &Run) {
    let _ = writeln!(md, "### 10.7 Activities (seed 004)\n\nActivities are green threads that are never preempted (`thread::Builder::new().preemptive(false)`, or `thread::spawn_local` from another activity), measured on a one-worker `turquoise` runtime pinned to CPU 0, from a root activity; the preemptive green threads from a green thread of the same kind of runtime. ns per operation, median [min-max] over batches.\n\n![spawn and switch](plots/sync-activities.svg)\n");
    let _ = writeln!(md, "**Spawn+join**, one at a time (the OS thread from the main thread, on CPU 0; Go's is green-bench's `micro spawn`, a goroutine and a `sync.WaitGroup`):\n");
    table(md, r, "spawn+join", &[("act_spawn", "ns each")], false);
    let _ = writeln!(md, "**Switches**: two threads of a kind passing the worker back and forth, ns per switch. Activities: `yield_now` in turn; taking turns on an `Rc<Cell<usize>>`, yielding while it is the other's turn; a round trip through two `turquoise::sync::mpsc::channel(1)` (two switches, each a park and a wake-up). Preemptive green threads: `yield_now` in turn. OS threads: two pinned to CPU 0 taking turns on a futex word (each turn a `FUTEX_WAKE` and a `FUTEX_WAIT`). Go: green-bench's unbuffered channel ping-pong, half a round trip, `GOMAXPROCS=1`.\n");
    table(md, r, "switch", &[("act_switch", "ns per switch")], false);
    let _ = writeln!(md, "**Memory per idle thread**: green-bench's `idle N` microbenchmark (N threads asleep; growth of `VmRSS` and `VmPTE` over N) in a child process each, so that nothing measured before hides memory; activities are started with `preemptive(false)` from a root activity and park in `thread::sleep`. OS threads have green-bench's pthread stack size.\n");
    let _ = writeln!(md, "| idle thread | resident bytes each | page-table bytes each |\n|---|---:|---:|");
    for n in r.names("act_memory") {
        let b = |what: &str| r.get(what, &n).map_or("-".into(), |s| format!("{:.0}", s.median));
        let _ = writeln!(md, "| {n} | {} | {} |", b("act_memory"), b("act_pte"));
    }
    md.push('\n');
    let _ = writeln!(md, "**A yield check with nothing due**: a loop adding `black_box(i)` to a sum, with `checkpoint()` in each iteration or not, in an activity (ns per iteration; the activity's slice still ends every slice, so a few of the checks find something due and yield with nobody else to run).\n");
    table(md, r, "loop", &[("act_check", "ns per iteration")], false);
    if let Some(d) = check_cost(r) {
        let _ = writeln!(md, "A check costs {} (difference of the medians).\n", ns(d));
    }
    let _ = writeln!(
        md,
        "**strcmp of two equal 1 MB strings** ({} bytes and a NUL), in an activity: a byte loop that stops at a difference or a NUL with a `checkpoint()` every 2^k bytes, placed two ways: a test of the byte's index in every iteration (`activities::byte_cmp`, what a check in the loop's body costs) or after each block of 2^k bytes, whose inner loop is the loop without checks (`activities::block_cmp`, the loop strip-mined); against the loop without checks and glibc's `strcmp` (through the `libc` crate; vectorised). Each batch times every variant in turn. ns per comparison, median [min-max] over batches; the overhead is against the loop without checks.\n\n![strcmp with yield checks](plots/sync-strcmp.svg)\n",
        activities::STRCMP_BYTES
    );
    let plain = r.get("act_strcmp", activities::NO_CHECKS).map(|s| s.median);
    let over = |s: Option<Spread>| match (s, plain) {
        (Some(s), Some(p)) => format!("{:+.1}%", (s.median / p - 1.0) * 100.0),
        _ => "-".into(),
    };
    let _ = writeln!(md, "| k | counter test each byte | over no checks | blocks of 2^k bytes | over no checks |\n|---:|---:|---:|---:|---:|");
    for k in 0..=activities::MAX_K {
        let (t, b) = (r.get("act_strcmp", &activities::check_row(k, false)), r.get("act_strcmp", &activities::check_row(k, true)));
        if t.is_some() || b.is_some() {
            let _ = writeln!(md, "| {k} | {} | {} | {} | {} |", cell(t, false), over(t), cell(b, false), over(b));
        }
    }
    let _ = writeln!(md, "\n| without checks | ns per comparison | ns per byte |\n|---|---:|---:|");
    for n in [activities::NO_CHECKS, activities::LIBC] {
        let s = r.get("act_strcmp", n);
        let _ = writeln!(md, "| {n} | {} | {} |", cell(s, false), s.map_or("-".into(), |s| format!("{:.3}", s.median / activities::STRCMP_BYTES as f64)));
    }
    md.push('\n');
}

fn report(r: &Run) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## 10. Synchronisation (issue 13)\n");
    let _ = writeln!(md, "Reproduce with `make bench-sync`, i.e.\n\n```sh\ncargo build --release -p sync-bench && target/release/sync-bench --write-docs\n```\n");
    let _ = writeln!(
        md,
        "(`--quick` gives a smoke run of a few seconds; without `--write-docs` the section only goes to stdout.) This run: {} mode, {:.0} s. Concurrency Kit's side (`crates/sync-bench/c/ck_bench.c`, against Debian's libck) and Go's (`go/main.go`) are built when the benchmark runs and skipped, with a note, when libck or `go` is missing. Every number below was measured in this one run, on a shared VM: compare within the run. Cells are the median [min-max] over batches for per-operation costs (each batch a loop of back-to-back operations), the median [p10-p90] over events for latencies.\n",
        if r.quick { "quick" } else { "full" },
        r.seconds
    );
    let _ = writeln!(md, "|  |  |\n|---|---|\n| machine | {} |\n| versions | {} |\n| date / commit | {} / {} |\n| load average (1/5/15 min) at start / end | {} / {} |\n", r.machine, r.versions, r.date, r.commit, r.load.0, r.load.1);
    for n in &r.notes {
        let _ = writeln!(md, "Note: {n}\n");
    }
    let _ = writeln!(md, "### Targets\n\nGoals of the issue; printed, never asserted.\n");
    targets(&mut md, r);

    let _ = writeln!(md, "### 10.1 Event counts: an increment nobody waits for\n\nA loop of increments on CPU 0, timed with `clock_gettime` and `rdtsc` (TSC cycles: the reference clock, not the core's). The C rows are ck's harness: `ck_ec32_inc` with a mode whose `single_producer` is false (`lock incl`) or true (`incl`), and the same plain store and `__atomic_fetch_add` compiled by `cc -O2`.\n\n![increment costs](plots/sync-increment.svg)\n");
    let mut names: Vec<String> = r.names("inc_ns");
    names.dedup();
    let _ = writeln!(md, "| increment | ns | TSC cycles |\n|---|---:|---:|");
    for n in &names {
        let _ = writeln!(md, "| {n} | {} | {} |", cell(r.get("inc_ns", n), false), cycles(r.get("inc_cycles", n)));
    }
    md.push('\n');

    let _ = writeln!(md, "### 10.2 Event counts: wake-up latency\n\nA waiter (an OS thread) sleeps on the event count; once its thread is seen asleep in `/proc/self/task/TID/stat`, the producer (CPU 0) reads the clock and increments; the latency runs until the waiter, back from its wait, reads the clock. The waiter is on CPU 0 too (one CPU: it runs once the producer blocks waiting for its answer) or on CPU 1 (two CPUs: the wake-up interrupts an idle virtual CPU). The bare futex is `fetch_add` + `FUTEX_WAKE` against a `FUTEX_WAIT` loop; the C harness measures its own bare futex next to ck's.\n\n![wake-up latency](plots/sync-wake.svg)\n");
    table(&mut md, r, "waiter", &[("wake_one", "one CPU"), ("wake_two", "two CPUs")], true);

    let _ = writeln!(md, "### 10.3 Event counts: until a waiter sleeps for good\n\nOurs: `wait_timeout(v, 0)` on a version nobody changes, on CPU 1, which does everything a wait does before its futex wait without deadline (the short spin, setting the flag, and for the single producer its forced barrier `fence::heavy()` and the check after it), with the producer's thread on CPU 0 blocked on a futex or spinning. ck: from the call of `ck_ec32_wait` until it calls the `wait32` op without a deadline, after its exponential back-off of timed waits (2 ms, 16 ms, 128 ms, 1 s: the default `ck_ec_ops`); few samples, each takes a second.\n");
    table(&mut md, r, "waiter", &[("good_blocked", "producer blocked"), ("good_spinning", "producer spinning")], true);

    let _ = writeln!(md, "### 10.4 Asymmetric fences\n\nRead side: a loop of a store to a static, the barrier, a load of another static, on CPU 0 (ns per iteration; the compiler fence alone is the loop's own cost). Heavy side: `fence::heavy()` per mechanism (`fence::use_mechanism`), called on CPU 1 with the process's other thread on CPU 0 blocked on a futex or spinning.\n\n![heavy fence latency](plots/sync-heavy.svg)\n");
    table(&mut md, r, "read side", &[("light", "ns per iteration")], false);
    table(&mut md, r, "heavy side", &[("heavy_blocked", "other thread blocked"), ("heavy_spinning", "other thread spinning")], true);

    let _ = writeln!(md, "### 10.5 Locks\n\nLock+unlock of a mutex around a counter (ns each): one OS thread on CPU 0; then two OS threads on CPUs 0 and 1 hammering the same mutex (elapsed time per lock+unlock of either). tokio's is `blocking_lock` outside any runtime; Go's is `sync.Mutex` (two goroutines, `GOMAXPROCS=2`).\n\n![locks](plots/sync-locks.svg)\n");
    table(&mut md, r, "mutex", &[("lock_uncontended", "uncontended"), ("lock_contended", "2 threads contending")], false);

    let _ = writeln!(md, "### 10.6 Channels and parking\n\nA round trip (ns): one side sends a number, the other sends it back. OS threads (not pinned) through a pair of channels of capacity 1; tokio's between two tasks of a current-thread runtime; Go's unbuffered channels between two goroutines with `GOMAXPROCS=2` (OS-thread table) and `GOMAXPROCS=1` (green table), from green-bench's Go program (its spread is min-max over 7 batches). Green threads: two of a one-worker `turquoise` runtime, through `turquoise::sync::mpsc::channel(1)` or taking turns under a `turquoise::sync::Mutex` with a `Condvar` (each turn parks one thread and unparks the other).\n\n![round trips](plots/sync-pingpong.svg)\n");
    table(&mut md, r, "between OS threads / tasks", &[("pingpong_os", "round trip")], false);
    table(&mut md, r, "between green threads (one worker) / goroutines (GOMAXPROCS=1)", &[("pingpong_green", "round trip")], false);
    report_activities(&mut md, r);
    md
}

fn plots(dir: &Path, r: &Run) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    // File, title, log axis, latencies (p10-p90) or batches (min-max), and
    // the rows: (what, label suffix).
    let charts: [(&str, &str, bool, bool, &[(&str, &str)]); 6] = [
        ("increment", "Increment with no waiter (ns, median and min-max of batches)", false, false, &[("inc_ns", "")]),
        ("wake", "Wake-up latency of a sleeping waiter (ns, median and p10-p90)", true, true, &[("wake_one", ", one CPU"), ("wake_two", ", two CPUs")]),
        ("heavy", "fence::heavy() per mechanism (ns, median and p10-p90)", true, true, &[("heavy_blocked", ", other blocked"), ("heavy_spinning", ", other spinning")]),
        ("locks", "Mutex lock+unlock (ns, median and min-max)", true, false, &[("lock_uncontended", ", uncontended"), ("lock_contended", ", 2 threads")]),
        ("pingpong", "Channel / park round trip (ns, median and min-max)", true, false, &[("pingpong_os", ""), ("pingpong_green", " (green / GOMAXPROCS=1)")]),
        ("activities", "Activities: spawn+join and switch (ns, median and min-max)", true, false, &[("act_spawn", ": spawn+join"), ("act_switch", ": switch")]),
    ];
    for (file, title, log, events, whats) in charts {
        let rows: Vec<plot::Bar> = whats.iter().flat_map(|(what, suffix)| bars(r, what, suffix, events)).collect();
        plot::bars(&dir.join(format!("sync-{file}.svg")), title, "ns", &rows, log)?;
    }
    let curves: Vec<(String, Vec<plot::Point>)> = [(false, "counter test each byte"), (true, "blocks of 2^k bytes")]
        .iter()
        .map(|&(blocks, label)| (label.to_string(), (0..=activities::MAX_K).filter_map(|k| r.get("act_strcmp", &activities::check_row(k, blocks)).map(|s| (f64::from(k), s.median / 1e6, s.p10 / 1e6, s.p90 / 1e6))).collect()))
        .collect();
    let levels: Vec<(String, f64)> = [activities::NO_CHECKS, activities::LIBC].iter().filter_map(|n| r.get("act_strcmp", n).map(|s| (n.to_string(), s.median / 1e6))).collect();
    plot::curves(&dir.join("sync-strcmp.svg"), "strcmp of two equal 1 MB strings, a yield check every 2^k bytes (ms, median and p10-p90)", "k", "ms per comparison", &curves, &levels)?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() >= 3 && args[0] == "--micro" {
        let nums: Vec<u64> = args[3..].iter().filter_map(|a| a.parse().ok()).collect();
        green_bench::micro::main(&args[1], &args[2], &nums);
    }
    let o = parse_args().unwrap_or_else(|e| {
        eprintln!("sync-bench: {e}");
        std::process::exit(2);
    });
    let s = if o.quick { Sizes::QUICK } else { Sizes::FULL };
    let start = std::time::Instant::now();
    let load_start = bench_util::loadavg();
    let tmp: PathBuf = std::env::temp_dir().join(format!("sync-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&tmp);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let step = |what: &str| eprintln!("sync-bench: {what} ({:.0} s)", start.elapsed().as_secs_f64());

    step("increments");
    rows.extend(ec::increments(s));
    if o.ck {
        step("Concurrency Kit (ck_ec)");
        match ck(&tmp, s, if o.quick { 1 } else { 3 }) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("sync-bench: {e}");
                notes.push(e);
            }
        }
    }
    step("wake-up latency");
    for two in [false, true] {
        for f in [Flavour::Futex, Flavour::Mp, Flavour::Sp] {
            rows.push(ec::wake(f, two, s.rounds));
        }
    }
    step("until asleep");
    rows.extend(ec::until_asleep(s));
    step("fences");
    rows.extend(fences::light_side(s));
    rows.extend(fences::heavy_side(s));
    step("locks");
    rows.extend(prims::lock_unlock(s));
    step("channels");
    rows.extend(prims::pingpong_os(s));
    rows.extend(prims::pingpong_green(s));
    step("activities");
    rows.extend(activities::spawn(s));
    rows.extend(activities::switch(s));
    rows.extend(activities::check(s));
    rows.extend(activities::strcmp(s, activities::MAX_K));
    let idle_n = if o.quick { 1000 } else { 10_000 };
    match idle(idle_n) {
        Ok(r) => rows.extend(r),
        Err(e) => {
            eprintln!("sync-bench: memory per idle activity: {e}");
            notes.push(format!("memory per idle activity not measured: {e}"));
        }
    }
    if o.go {
        step("Go");
        match go(&tmp, s, idle_n) {
            Ok(r) => rows.extend(r.into_iter().map(|mut r| {
                r.name = match r.what.as_str() {
                    "lock_uncontended" | "lock_contended" => "Go sync.Mutex".into(),
                    "pingpong_os" => "Go unbuffered channels, GOMAXPROCS=2".into(),
                    "act_spawn" => "Go goroutine (go + WaitGroup), GOMAXPROCS=1".into(),
                    "act_switch" => "Go goroutines, unbuffered channels, GOMAXPROCS=1".into(),
                    "act_memory" | "act_pte" => "Go goroutine (time.Sleep), GOMAXPROCS=1".into(),
                    _ => "Go unbuffered channels, GOMAXPROCS=1".into(),
                };
                r
            })),
            Err(e) => {
                eprintln!("sync-bench: Go skipped: {e}");
                notes.push(format!("Go skipped: {e}"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let cc = bench_util::run::command("cc", &["--version"]).and_then(|v| v.lines().next().map(str::to_owned)).unwrap_or_else(|| "no cc".into());
    let run = Run {
        rows,
        notes,
        machine: bench_util::machine(),
        versions: format!("{} / {} / go {} / {} (libck {})", bench_util::run::rustc(), cc, bench_util::run::go_version(), "ck_ec32", bench_util::run::command("dpkg-query", &["-W", "-f=${Version}", "libck-dev"]).unwrap_or_else(|| "?".into())),
        date: bench_util::run::date(),
        commit: bench_util::run::commit(),
        load: (load_start, bench_util::loadavg()),
        seconds: start.elapsed().as_secs_f64(),
        quick: o.quick,
    };
    let md = report(&run);
    println!("{md}");
    if o.write_docs {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        if let Err(e) = plots(&docs.join("plots"), &run) {
            eprintln!("sync-bench: plots: {e}");
        }
        let path = docs.join("benchmarks.md");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let new = bench_util::docs::replace_section(&old, bench_util::docs::SYNC_MARKER, &md, &[NOTES]);
        if let Err(e) = std::fs::write(&path, new) {
            eprintln!("sync-bench: writing {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}
