//! Markdown report: machine info, targets, one table per benchmark.

use std::fmt::Write;

use crate::accuracy::Point;
use crate::latency::{Key, Latency};
use crate::machine::Machine;
use crate::memory::Memory;
use crate::run::{Mode as RunMode, Outcome};
use crate::stats::{fmt_bytes, fmt_ns, fmt_pct, fmt_us, median, Summary};
use crate::throughput::{label, Mode, Throughput};

pub const COMMAND: &str = "cargo run --release -p linger-bench -- --write-docs";

/// Everything one run measured (a section is `None` when it was skipped).
pub struct Results {
    pub machine: Machine,
    pub quick: bool,
    pub secs: f64,
    pub load_end: String,
    pub latency: Option<Latency>,
    pub accuracy: Option<Vec<Point>>,
    pub libloops: Option<Vec<crate::libloops::LoopRow>>,
    pub throughput: Option<Throughput>,
    pub memory: Option<Memory>,
    pub run: Option<Outcome>,
}

pub struct Target {
    pub what: String,
    pub goal: String,
    pub measured: String,
    pub met: bool,
}

fn t(what: &str, goal: &str, measured: String, met: bool) -> Target {
    Target { what: what.into(), goal: goal.into(), measured, met }
}

pub fn targets(r: &Results) -> Vec<Target> {
    let mut v = Vec::new();
    if let Some(l) = &r.latency {
        // Issue 7's targets, from Rust and from C alike.
        for (what, key, goal) in [
            ("launch + return (median)", Key::LaunchReturn, 60.0),
            ("C: linger_launch + return (median)", Key::CLaunchReturn, 60.0),
            ("resume after pause (median)", Key::ResumePause, 40.0),
            ("C: linger_resume after pause (median)", Key::CResumePause, 40.0),
            ("pause round trip (median)", Key::PauseRoundTrip, 40.0),
        ] {
            let m = l.get(key).p50;
            v.push(t(what, &format!("<= {goal} ns"), fmt_ns(m), m <= goal));
        }
        let pre = l.get(Key::PreemptResume).p50;
        let sig = l.get(Key::Tgkill).p50;
        let raw = l.get(Key::RawTimerCycle).p50;
        v.push(t(
            "preempt + resume, 5 us slices (median time beyond the slice)",
            "<= 2x raw signal round trip",
            format!(
                "{} = {:.2}x the {} signal round trip (and {:.2}x a raw one-shot timer cycle, {})",
                fmt_ns(pre),
                pre / sig,
                fmt_ns(sig),
                pre / raw,
                fmt_ns(raw)
            ),
            pre <= 2.0 * sig,
        ));
        let exp = l.get(Key::PreemptExpired).p50;
        v.push(t(
            "preempt + resume, deadline already passed (no timer lateness)",
            "<= 2x raw signal round trip",
            format!("{} = {:.2}x", fmt_ns(exp), exp / sig),
            exp <= 2.0 * sig,
        ));
        let c = l.get(Key::CancelPaused).p50;
        v.push(t("cancel of a paused function (median)", "<= 5 us", fmt_ns(c), c <= 5_000.0));
    }
    if let Some(a) = &r.accuracy {
        let worst = |f: fn(&Point) -> f64| {
            a.iter().map(|p| (f(p), p.timeout_ns)).fold((f64::NEG_INFINITY, 0), |m, x| if x.0 > m.0 { x } else { m })
        };
        let (p50, at50) = worst(|p| p.linger.p50);
        let ok50 = a.iter().filter(|p| p.linger.p50 <= 5_000.0).count();
        v.push(t(
            "timeout overrun p50 (all timeouts)",
            "<= 5 us",
            format!("worst {} (at {}); met at {ok50} of {} timeouts", fmt_ns(p50), fmt_us(at50 / 1000), a.len()),
            ok50 == a.len(),
        ));
        let (p99, at99) = worst(|p| p.linger.p99);
        let ok99 = a.iter().filter(|p| p.linger.p99 <= 20_000.0).count();
        v.push(t(
            "timeout overrun p99 (all timeouts)",
            "<= 20 us",
            format!("worst {} (at {}); met at {ok99} of {} timeouts", fmt_ns(p99), fmt_us(at99 / 1000), a.len()),
            ok99 == a.len(),
        ));
    }
    if let Some(tp) = &r.throughput {
        for (us, goal) in [(100, 0.95), (1000, 0.99)] {
            if let Some(c) = tp.find(Mode::Linger(us)) {
                let x = tp.ratio(c);
                v.push(t(
                    &format!("throughput in {} slices vs direct", fmt_us(us)),
                    &format!(">= {}", fmt_pct(goal)),
                    fmt_pct(x),
                    x >= goal,
                ));
            }
        }
    }
    if let Some(m) = &r.memory {
        v.push(t(
            "resident memory per paused function",
            "<= 16 KiB",
            fmt_bytes(m.per_fn_bytes),
            m.per_fn_bytes <= 16.0 * 1024.0,
        ));
    }
    v
}

fn row(s: &mut String, cells: &[String]) {
    let _ = writeln!(s, "| {} |", cells.join(" | "));
}

/// A table header; columns from `right` on are right-aligned (numbers).
fn header(s: &mut String, cells: &[&str], right: usize) {
    let _ = writeln!(s, "| {} |", cells.join(" | "));
    let _ = writeln!(s, "|{}", (0..cells.len()).map(|i| if i < right { "---|" } else { "---:|" }).collect::<String>());
}

fn sum_cells(x: &Summary, f: fn(f64) -> String) -> Vec<String> {
    vec![f(x.p50), f(x.p10), f(x.p90), f(x.p99), f(x.max)]
}

pub fn markdown(r: &Results, with_plots: bool) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let _ = writeln!(s, "# linger benchmarks\n");
    let _ = writeln!(
        s,
        "Reproduce with:\n\n```sh\nmake bench   # cargo build --release -p linger-run, then:\n{COMMAND}\n```\n"
    );
    let _ = writeln!(
        s,
        "(`-- --quick` gives a short, rougher run; without `--write-docs` the tables only go to stdout.) \
         This run: {} mode, {:.0} s. Every number below was measured in this one run, baselines included; \
         the machine is a shared VM, so compare ratios within the run rather than absolute numbers across runs.\n",
        if r.quick { "quick" } else { "full" },
        r.secs
    );
    let _ = writeln!(s, "## Machine\n");
    header(&mut s, &["", ""], 2);
    let env = if m.env.is_empty() { "none".to_owned() } else { m.env.join(", ") };
    for (k, v) in [
        ("CPU", m.cpu.clone()),
        ("cores", m.cores.to_string()),
        ("kernel", m.kernel.clone()),
        ("glibc", m.glibc.clone()),
        ("rustc", m.rustc.clone()),
        ("date", m.date.clone()),
        ("commit", m.commit.clone()),
        ("load average (1/5/15 min) at start / end", format!("{} / {}", m.loadavg, r.load_end)),
        ("vm.max_map_count", m.max_map_count.clone()),
        (
            "linger signal / default stack",
            format!(
                "{} (SIGRTMAX-{}) / {}",
                m.linger_signal,
                libc::SIGRTMAX() - m.linger_signal,
                fmt_bytes(m.stack_size as f64)
            ),
        ),
        ("LINGER_* environment", env),
    ] {
        row(&mut s, &[k.to_owned(), v]);
    }
    s.push('\n');

    let ts = targets(r);
    if !ts.is_empty() {
        let _ = writeln!(s, "## Targets\n");
        let _ = writeln!(s, "Goals set for this implementation; printed, never asserted.\n");
        header(&mut s, &["what", "goal", "measured", "met"], 4);
        for x in &ts {
            row(
                &mut s,
                &[x.what.clone(), x.goal.clone(), x.measured.clone(), if x.met { "yes" } else { "**no**" }.into()],
            );
        }
        s.push('\n');
    }

    if let Some(l) = &r.latency {
        latency(&mut s, l, with_plots);
    }
    if let Some(a) = &r.accuracy {
        accuracy(&mut s, a, with_plots);
    }
    if let Some(l) = &r.libloops {
        libloops(&mut s, l, with_plots);
    }
    if let Some(tp) = &r.throughput {
        throughput(&mut s, tp, with_plots);
    }
    if let Some(mem) = &r.memory {
        memory(&mut s, mem);
    }
    if let Some(o) = &r.run {
        run(&mut s, o, with_plots);
    }
    s
}

fn latency(s: &mut String, l: &Latency, plots: bool) {
    let _ = writeln!(s, "## 1. Latency (paper Table 2 analogue)\n");
    let _ = writeln!(
        s,
        "Sub-microsecond operations are timed in batches of back-to-back calls and reported as the \
         distribution of per-call batch means; the others are timed one by one (each sample includes \
         one `clock_gettime`, see the first row). \"paper\" is the paper's Table 2 (libinger on an Intel Xeon \
         E5-2683 v4, Linux 4.12.6, glibc 2.29; mean ± deviation, us), from a different machine and a design \
         with per-function library copies: a reference, not a like-for-like comparison. Its `launch()` timed a \
         body that calls `pause()` at once, like our \"launch until pause()\" row.\n"
    );
    header(s, &["operation", "", "samples", "median", "p10", "p90", "p99", "max", "mean", "paper (us)"], 3);
    for r in &l.rows {
        let mut c =
            vec![r.name.to_owned(), if r.baseline { "baseline" } else { "**linger**" }.into(), r.method.clone()];
        c.extend(sum_cells(&r.s, fmt_ns));
        c.push(fmt_ns(r.s.mean));
        c.push(r.paper.unwrap_or("").to_owned());
        row(s, &c);
    }
    let pre = l.get(Key::PreemptResume).p50;
    let exp = l.get(Key::PreemptExpired).p50;
    let sig = l.get(Key::Tgkill).p50;
    let _ = writeln!(
        s,
        "\nSwitches: a Rust resume until the function pauses again takes {} against {} for a bare corosensei \
         resume + suspend, and launch + return {} against {}. Beyond the bare switch, each resume reads the TSC \
         for its deadline (an `rdtsc`, a few tens of cycles). Rust's `pause()` is inlined into the function, so the switch \
         happens in the function's own frame; C's `linger_pause` is a call, and a return across the switch is \
         mispredicted on each side of the round trip, which with the atomic swap on the handle's slot is most \
         of the difference of the C row ({}).",
        fmt_ns(l.get(Key::ResumePause).p50),
        fmt_ns(l.get(Key::CoroutineSwitch).p50),
        fmt_ns(l.get(Key::LaunchReturn).p50),
        fmt_ns(l.get(Key::CoroutineLaunch).p50),
        fmt_ns(l.get(Key::CResumePause).p50),
    );
    let _ = writeln!(
        s,
        "\nPreemption cycle: a whole `resume(5 us)` of a spinning function takes {} (median; p99 {}), of which \
         {} is beyond the slice: {:.2}x a raw `tgkill` signal round trip ({}) and {:.2}x a raw one-shot \
         timer cycle ({}), which like linger pays for arming a timer and for the timer's lateness. With a \
         deadline that has already passed when the timer is armed (1 ns slices) the signal arrives during \
         the arming system call inside the runtime, and the preemption is taken as a deferred one when the \
         function is switched in: {} per cycle, {:.2}x the signal round trip and {:.2}x a raw timer armed for \
         a passed deadline ({}). The mean column includes the rare expensive samples (a timer re-arm, a spurious \
         expiry, a descheduled thread) that the median hides.\n",
        fmt_ns(l.preempt_cycle.p50),
        fmt_ns(l.preempt_cycle.p99),
        fmt_ns(pre),
        pre / sig,
        fmt_ns(sig),
        pre / l.get(Key::RawTimerCycle).p50,
        fmt_ns(l.get(Key::RawTimerCycle).p50),
        fmt_ns(exp),
        exp / sig,
        exp / l.get(Key::RawTimerExpired).p50,
        fmt_ns(l.get(Key::RawTimerExpired).p50),
    );
    counters(s, "latency benchmarks", &l.counters);
    if plots {
        let _ = writeln!(s, "![latency: median with p10-p90 bars, log scale](plots/latency.svg)\n");
    }
}

fn counters(s: &mut String, what: &str, c: &linger::Stats) {
    let _ = writeln!(
        s,
        "linger counters over the {what}: {} launches, {} completions, {} pauses, {} preemptions \
         ({} deferred), {} deferrals, {} spurious timer signals, {} cancels unwound, {} reclaimed, worst \
         deadline-to-handler overrun {}.\n",
        c.launches,
        c.completions,
        c.pauses,
        c.preemptions,
        c.deferred_preemptions,
        c.deferrals,
        c.spurious_signals,
        c.cancels_unwound,
        c.cancels_reclaimed,
        fmt_ns(c.worst_overrun_ns as f64)
    );
}

fn accuracy(s: &mut String, a: &[Point], plots: bool) {
    let _ = writeln!(s, "## 2. Timeout accuracy\n");
    let _ = writeln!(
        s,
        "A function that spins in our own code is launched with each timeout; overrun = time when `launch` \
         returns - (time just before `launch` + timeout). Baseline: a raw one-shot POSIX timer on \
         CLOCK_MONOTONIC aimed at this thread, armed for the same timeout while the thread spins until its \
         empty handler has run; overrun = time the spinning loop sees that - deadline. Both alternate sample \
         by sample. Targets: p50 <= 5 us, p99 <= 20 us.\n"
    );
    header(
        s,
        &[
            "timeout",
            "samples",
            "linger p50",
            "p99",
            "max",
            "raw timer p50",
            "p99",
            "max",
            "linger deferrals",
            "p50 / p99 met",
        ],
        1,
    );
    for p in a {
        row(
            s,
            &[
                fmt_us(p.timeout_ns / 1000),
                p.linger.n.to_string(),
                fmt_ns(p.linger.p50),
                fmt_ns(p.linger.p99),
                fmt_ns(p.linger.max),
                fmt_ns(p.raw.p50),
                fmt_ns(p.raw.p99),
                fmt_ns(p.raw.max),
                p.counters.deferrals.to_string(),
                format!("{} / {}", yn(p.linger.p50 <= 5_000.0), yn(p.linger.p99 <= 20_000.0)),
            ],
        );
    }
    let d50 = median(&a.iter().map(|p| p.linger.p50 - p.raw.p50).collect::<Vec<_>>());
    let d99 = median(&a.iter().map(|p| p.linger.p99 - p.raw.p99).collect::<Vec<_>>());
    let _ = writeln!(
        s,
        "\nMedian over the timeouts of (linger - raw timer): {} at p50, {} at p99 (positive: linger later).\n",
        fmt_ns(d50),
        fmt_ns(d99)
    );
    if plots {
        let _ = writeln!(s, "![timeout overrun percentiles vs timeout](plots/accuracy.svg)\n");
    }
}

/// Slack the issue allows library loops over the spin loop's p99.
pub const LIBLOOP_SLACK_NS: f64 = 50_000.0;

fn libloops(s: &mut String, rows: &[crate::libloops::LoopRow], plots: bool) {
    let _ = writeln!(s, "### Library-heavy loops
");
    let _ = writeln!(
        s,
        "Endless loops that spend most of their time in libc or `std`, launched with a {} us timeout, \
         round-robin with the spin loop (never deferred) in the same run; overrun as above. A deadline that \
         lands in library code is deferred and taken when the library call returns to the loop (a return \
         trap; `return_traps`), or else by a timer retry. Target: p99 <= spin p99 + 50 us.\n",
        crate::libloops::TIMEOUT_US
    );
    header(s, &["loop", "samples", "p50", "p99", "max", "deferrals", "return traps", "p99 met"], 1);
    let spin_p99 = rows.first().map_or(f64::NAN, |r| r.overrun.p99);
    for r in rows {
        row(
            s,
            &[
                r.name.to_string(),
                r.overrun.n.to_string(),
                fmt_ns(r.overrun.p50),
                fmt_ns(r.overrun.p99),
                fmt_ns(r.overrun.max),
                r.counters.deferrals.to_string(),
                r.counters.return_traps.to_string(),
                yn(r.overrun.p99 <= spin_p99 + LIBLOOP_SLACK_NS).to_string(),
            ],
        );
    }
    let _ = writeln!(s);
    if plots {
        let _ = writeln!(s, "![overrun of library-heavy loops](plots/library-loops.svg)\n");
    }
}

fn yn(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn throughput(s: &mut String, tp: &Throughput, plots: bool) {
    let _ = writeln!(s, "## 3. Throughput\n");
    let _ = writeln!(
        s,
        "{} iterations of a serial integer hash chain (about {} when called directly), run {} times per \
         configuration in rotating order. linger: `launch` then `resume` in a loop with the same slice until it \
         completes (the result is checked against the direct call). Raw timer signal: the direct call while a \
         periodic POSIX timer delivers a signal with an empty handler to this thread at that interval: the \
         cost of the timer interrupts and signal deliveries alone. Throughput = median direct time / median time; \
         min and max are per-run throughputs against the median direct time. \"cost per event\" = extra time \
         per preemption (linger) or per signal (raw).\n",
        tp.iterations,
        fmt_ns(median(&tp.direct().times)),
        tp.runs
    );
    header(
        s,
        &["configuration", "median time", "throughput", "min", "max", "events per run", "cost per event", "target"],
        1,
    );
    let d = median(&tp.direct().times);
    for c in &tp.configs {
        let runs: Vec<f64> = c.times.iter().map(|t| d / t).collect();
        let min = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ratio = tp.ratio(c);
        let target = match c.mode {
            Mode::Linger(100) => format!(">= 95%: {}", yn(ratio >= 0.95)),
            Mode::Linger(1000) => format!(">= 99%: {}", yn(ratio >= 0.99)),
            _ => String::new(),
        };
        let direct = c.mode == Mode::Direct;
        row(
            s,
            &[
                label(c.mode),
                fmt_ns(median(&c.times)),
                fmt_pct(ratio),
                fmt_pct(min),
                fmt_pct(max),
                if direct { String::new() } else { format!("{:.0}", median(&c.events)) },
                if direct { String::new() } else { fmt_ns(tp.cost_per_event(c)) },
                target,
            ],
        );
    }
    let cmp: Vec<String> = crate::throughput::SLICES_US
        .iter()
        .filter_map(|&us| {
            let (l, r) = (tp.find(Mode::Linger(us))?, tp.find(Mode::Signals(us))?);
            Some(format!("{} vs {} at {}", fmt_pct(tp.ratio(l)), fmt_pct(tp.ratio(r)), fmt_us(us)))
        })
        .collect();
    let _ = writeln!(
        s,
        "\nlinger vs the raw periodic signal at the same interval: {}. linger's slices are longer than the \
         interval (each starts after the previous preemption was handled), so it takes fewer interrupts.\n",
        cmp.join("; ")
    );
    if plots {
        let _ = writeln!(s, "![throughput vs slice length](plots/throughput.svg)\n");
    }
}

fn memory(s: &mut String, m: &Memory) {
    let _ = writeln!(s, "## 4. Memory\n");
    let _ = writeln!(
        s,
        "Each function touches about 1 KiB of its stack and then pauses. Resident memory is the growth of \
         the process's RSS (`/proc/self/statm`) divided by the number of functions, heap bookkeeping included; \
         the baseline is the same for threads with a {} stack parked on a barrier.\n",
        fmt_bytes(m.thread_stack as f64)
    );
    header(s, &["measure", "value"], 2);
    for (k, v) in [
        (
            format!("resident memory per paused function ({} alive, {} stacks)", m.n, fmt_bytes(m.stack_size as f64)),
            format!("{} (target <= 16 KiB: {})", fmt_bytes(m.per_fn_bytes), yn(m.per_fn_bytes <= 16.0 * 1024.0)),
        ),
        (format!("baseline: resident memory per parked thread ({} alive)", m.threads), fmt_bytes(m.per_thread_bytes)),
        ("launch until pause, mostly fresh stacks (mean)".to_owned(), fmt_ns(m.launch_ns_per_fn)),
        ("cancel by drop, stacks mostly unmapped (mean)".to_owned(), fmt_ns(m.cancel_ns_per_fn)),
        ("paused functions alive at once".to_owned(), format!("{} (cap {})", m.alive, m.cap)),
        ("what stopped it".to_owned(), m.stop_reason.clone()),
        (
            "RSS / memory mappings at that point".to_owned(),
            format!("{} / {} (vm.max_map_count {})", fmt_bytes(m.peak_rss as f64), m.peak_maps, m.max_map_count),
        ),
        ("time to launch them / to drop them all".to_owned(), format!("{:.2} s / {:.2} s", m.fill_secs, m.drop_secs)),
    ] {
        row(s, &[k, v]);
    }
    s.push('\n');
}

const RUN_ONLY: &str = "cargo build --release -p linger-run && cargo run --release -p linger-bench -- --only run";

fn run(s: &mut String, o: &Outcome, plots: bool) {
    let _ = writeln!(s, "## 5. Real programs under linger-run\n");
    let b = match o {
        Outcome::Done(b) => b,
        Outcome::Skipped(why) => {
            let _ = writeln!(s, "Skipped: {why}.\n");
            return;
        }
        Outcome::Failed(e) => {
            let _ = writeln!(s, "**Failed**: {e}\n");
            return;
        }
    };
    let modes: Vec<String> = crate::run::MODES.iter().map(|m| format!("`{}`", m.label())).collect();
    let _ = writeln!(
        s,
        "Unmodified programs, run on their own (plain) and by `linger-run`, which runs their `main()` in a \
         preemptible function: {}. With `--slice` main is preempted at the end of every slice and resumed at \
         once, so the difference to the plain run is what preemption costs. The modes take turns \
         (one run of each mode, then the next round), {} rounds; wall time from spawn to exit as the parent \
         sees it, CPU = the child's user + system time (`wait4`), which waiting for a busy CPU does not \
         inflate. Median, and min - max over the runs; \"vs plain\" = median / plain median. Every run's output was checked identical to a plain run's. The \
         generated input, the Python script and the SQL query are in `crates/linger-bench/src/run.rs`. This \
         section alone: `{RUN_ONLY}`.\n",
        modes.join(", "),
        b.reps
    );
    header(s, &["program", "command", "work", "output (identical in every run)"], 4);
    for p in &b.programs {
        let mut work = p.what.clone();
        if let Some(n) = &p.note {
            let _ = write!(work, "; {n}");
        }
        // A `|` splits a table cell even inside a code span unless escaped.
        row(s, &[p.name.clone(), format!("`{}`", p.shown), work, p.output.replace('|', "\\|")]);
    }
    s.push('\n');
    for x in &b.skipped {
        let _ = writeln!(s, "Left out: {x}.\n");
    }
    header(
        s,
        &[
            "program",
            "mode",
            "median wall",
            "min - max",
            "vs plain",
            "CPU user+sys (vs plain)",
            "preemptions/s",
            "deferrals/run",
            "worst overrun",
            "extra per preemption",
        ],
        2,
    );
    let mut flagged = Vec::new();
    let mut per_preemption = Vec::new();
    for p in &b.programs {
        let cpu_plain = p.plain().cpu();
        for m in &p.modes {
            // Slice modes that took far fewer preemptions than their slice asks
            // for (nominal: one per slice plus ~25 us of handling).
            let mostly_deferred = match (m.mode, m.preemptions_per_s()) {
                (RunMode::Slice(us), Some(rate)) => {
                    let nominal = 1e6 / (us as f64 + 25.0);
                    if rate < nominal / 4.0 {
                        flagged
                            .push(format!("{} at {} ({rate:.0}/s of a nominal ~{nominal:.0}/s)", p.name, fmt_us(us)));
                    }
                    rate < nominal / 4.0
                }
                _ => false,
            };
            let extra = p.extra_per_preemption(m).filter(|_| !mostly_deferred);
            if let Some(x) = extra.filter(|_| m.preemptions().unwrap_or(0.0) >= 1000.0) {
                per_preemption.push(x);
            }
            let opt = |v: Option<String>| v.unwrap_or_default();
            row(
                s,
                &[
                    p.name.clone(),
                    format!("`{}`", m.mode.label()),
                    fmt_ns(m.wall()),
                    format!("{} - {}", fmt_ns(m.wall_min()), fmt_ns(m.wall_max())),
                    format!("{:.3}x", p.ratio(m)),
                    format!("{} ({:.3}x)", fmt_ns(m.cpu()), m.cpu() / cpu_plain),
                    opt(m.preemptions_per_s().map(|x| format!("{x:.0}"))),
                    opt(m.deferrals().map(|x| format!("{x:.0}"))),
                    match (m.mode, m.worst_overrun_us()) {
                        (RunMode::Slice(_), Some(0)) if m.preemptions() == Some(0.0) => "none taken".into(),
                        (RunMode::Slice(_), Some(us)) => fmt_ns(us as f64 * 1e3),
                        _ => String::new(),
                    },
                    if mostly_deferred { "(mostly deferred)".into() } else { opt(extra.map(fmt_ns)) },
                ],
            );
        }
    }
    let lo = per_preemption.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per_preemption.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let _ = writeln!(
        s,
        "\nWhat the overhead consists of: each preemption is one timer signal plus two context switches (from \
         the program's `main()` to linger-run's resume loop on the same thread, and straight back), which \
         sections 1 and 3 measure on their own (the preempt + resume cycle); \"extra per preemption\" = (median - plain median) / \
         preemptions per run{}. `linger-run --` without a slice adds only an exec, loading `liblinger_run.so` \
         and starting linger's runtime. A deferral is a timer expiry at which the program could not be stopped \
         (it was in code that must not be interrupted, such as libc, or its call chain passed through such \
         code) and that linger retried shortly after; \
         each costs a signal as well. \"worst overrun\" covers the preemptions that were taken (deadline to \
         handler), so a program whose preemptions were all deferred shows none. Code in shared libraries is \
         never preempted unless `LINGER_PREEMPTIBLE_LIBS` names it.\n",
        if per_preemption.is_empty() {
            String::new()
        } else {
            format!(
                ", here {} - {} where preemptions were taken at the slice rate and at least 1000 per run",
                fmt_ns(lo),
                fmt_ns(hi)
            )
        }
    );
    if !flagged.is_empty() {
        let _ = writeln!(
            s,
            "Mostly deferred (fewer than a quarter of the nominal preemptions taken): {}. There the \
             difference to the plain run is mostly the deferral retries (and noise), not the cost of preemption.\n",
            flagged.join("; ")
        );
    }
    for p in &b.programs {
        if !p.stderr.is_empty() {
            let _ = writeln!(s, "{} wrote to stderr: {}.\n", p.name, p.stderr.join("; "));
        }
    }
    if plots {
        let _ = writeln!(s, "![run time relative to the plain run, with min - max](plots/run-overhead.svg)\n");
    }
}

