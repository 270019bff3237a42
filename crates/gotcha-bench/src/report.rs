//! Section 8 of `docs/benchmarks.md`, written from one run's numbers.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::bomb::{self, Outcome, Sample, Way, WAYS};
use crate::calls::{After, Before, Lazy, Row};
use crate::machine::Machine;
use crate::stats::{ns, Summary};

/// The line after which `--write-docs` rewrites `docs/benchmarks.md`.
pub const MARKER: &str = "<!-- gotcha-bench: everything below is written by target/release/gotcha-bench --write-docs -->";
/// Where the run with libc isolated too (`--libc`) begins, inside the above.
pub const LIBC_MARKER: &str = "<!-- gotcha-bench --libc: everything below is written by target/release/gotcha-bench --libc --write-docs -->";

/// Targets of the issue.
const EAGER_ADDED_NS: f64 = 15.0;
const BENIGN_OVERHEAD: f64 = 0.05;
const REGAIN_SLACK_NS: f64 = 100_000.0;
const RSS_GROWTH_KIB: u64 = 1024;

/// Everything one run measured.
pub struct Run {
    pub machine: Machine,
    pub load_start: String,
    pub load_end: String,
    pub quick: bool,
    pub duration: Duration,
    pub isolated: gotcha::Report,
    pub libsets: usize,
    pub before: Before,
    pub after: After,
    pub decomp: bomb::Results,
    /// libc isolated too (`--libc`).
    pub libc: bool,
}

impl Run {
    /// The section's number, and the prefix of its plots' names.
    fn section(&self) -> (&'static str, &'static str) {
        if self.libc {
            ("8b", "gotcha-libc")
        } else {
            ("8", "gotcha")
        }
    }
}

fn row<'a>(rows: &'a [Row], key: &str) -> &'a Row {
    rows.iter().find(|r| r.key == key).unwrap_or_else(|| panic!("no row {key}"))
}

fn yes(met: bool) -> &'static str {
    if met {
        "yes"
    } else {
        "**no**"
    }
}

fn cells(s: &Summary) -> String {
    format!("{} | {} | {} | {} | {} | {} | {}", ns(s.min), ns(s.p1), ns(s.p25), ns(s.p50), ns(s.p75), ns(s.p99), ns(s.max))
}

fn of_way(samples: &[Sample], way: Way) -> Vec<Sample> {
    samples.iter().filter(|s| s.way == way).copied().collect()
}

fn summary(samples: &[Sample]) -> Option<Summary> {
    Summary::of(&samples.iter().map(|s| s.ns).collect::<Vec<_>>())
}

/// "9998 completed, 2 stopped at the deadline" and the like.
fn outcomes(samples: &[Sample]) -> String {
    let count = |f: &dyn Fn(&Outcome) -> bool| samples.iter().filter(|s| f(&s.outcome)).count();
    let parts = [
        (count(&|o| *o == Outcome::Completed), "completed"),
        (count(&|o| *o == Outcome::Failed), "failed"),
        (count(&|o| matches!(o, Outcome::Stopped { deferred: false, .. })), "stopped at the deadline"),
        (count(&|o| matches!(o, Outcome::Stopped { deferred: true, .. })), "stopped late (deferred until the library returned)"),
        (count(&|o| *o == Outcome::Killed), "killed"),
        (count(&|o| *o == Outcome::CancelRequested { honoured: true }), "cancelled"),
        (count(&|o| *o == Outcome::CancelRequested { honoured: false }), "cancel requested, ran to its end anyway"),
    ];
    parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect::<Vec<_>>().join(", ")
}

fn machine_table(r: &Run) -> String {
    let m = &r.machine;
    let mut s = String::from("|  |  |\n|---|---|\n");
    for (k, v) in [
        ("CPU", format!("{} ({} cores)", m.cpu, m.cores)),
        ("kernel / glibc", format!("{} / glibc {}", m.kernel, m.glibc)),
        ("libraries", m.libraries.clone()),
        ("rustc", m.rustc.clone()),
        ("date", m.date.clone()),
        ("commit", m.commit.clone()),
        ("load average (1/5/15 min) at start / end", format!("{} / {}", r.load_start, r.load_end)),
        ("1-min load average during the bomb loop (min / median / max of its RSS readings)", {
            let l = Summary::of(&r.decomp.rss.iter().map(|p| p.load1).collect::<Vec<_>>()).unwrap_or_default();
            format!("{:.2} / {:.2} / {:.2}", l.min, l.p50, l.max)
        }),
        ("environment", if m.env.is_empty() { "no GLIBC_TUNABLES, no LINGER_*".into() } else { m.env.join(" ") }),
        ("libsets the loader allowed", r.libsets.to_string()),
    ] {
        writeln!(s, "| {k} | {v} |").unwrap();
    }
    s
}

struct Targets {
    added0: f64,
    addedk: f64,
    overhead: f64,
    p99: f64,
    growth_kib: i64,
    cancels: usize,
}

fn targets(r: &Run) -> Targets {
    let b = &r.after.rows;
    let def = row(b, "call_definition").s.p50;
    let d = &r.decomp;
    let med = |w| summary(&of_way(&d.benign_samples, w)).map_or(f64::NAN, |s| s.p50);
    let iso = summary(&of_way(&d.bomb_samples, Way::Isolated)).unwrap_or_default();
    let (first, last) = (d.rss.first().expect("sampled"), d.rss.last().expect("sampled"));
    Targets {
        added0: row(b, "call_stub_0").s.p50 - def,
        addedk: row(b, "call_stub_k").s.p50 - def,
        overhead: med(Way::Isolated) / med(Way::Direct) - 1.0,
        p99: iso.p99,
        growth_kib: last.rss_kib as i64 - first.rss_kib as i64,
        cancels: last.iteration,
    }
}

fn targets_table(t: &Targets) -> String {
    let deadline = bomb::TIMEOUT.as_nanos() as f64;
    let mut s = String::from("| what | goal | measured | met |\n|---|---|---|---|\n");
    writeln!(
        s,
        "| added per eager call through the stub (median, libset 0 / a libset current) | <= {EAGER_ADDED_NS} ns | {} / {} | {} |",
        ns(t.added0),
        ns(t.addedk),
        yes(t.added0.max(t.addedk) <= EAGER_ADDED_NS)
    )
    .unwrap();
    writeln!(
        s,
        "| benign decode, isolated launch over direct call (medians) | <= {:.0}% | {:+.1}% | {} |",
        BENIGN_OVERHEAD * 100.0,
        t.overhead * 100.0,
        yes(t.overhead <= BENIGN_OVERHEAD)
    )
    .unwrap();
    writeln!(
        s,
        "| bomb, isolated launch: control back, `launch` returned (p99) | <= 10 ms + 100 us | {} ({} past the deadline) | {} |",
        ns(t.p99),
        ns(t.p99 - deadline),
        yes(t.p99 <= deadline + REGAIN_SLACK_NS)
    )
    .unwrap();
    writeln!(
        s,
        "| RSS over {} isolated bomb decodes, each cancelled | no growth (<= {} MiB) | {:+.1} MiB ({:+.0} B per cancel) | {} |",
        t.cancels,
        RSS_GROWTH_KIB / 1024,
        t.growth_kib as f64 / 1024.0,
        t.growth_kib as f64 * 1024.0 / t.cancels.max(1) as f64,
        yes(t.growth_kib <= RSS_GROWTH_KIB as i64)
    )
    .unwrap();
    s
}

/// For each missed target, what the run's numbers point at.
fn misses(r: &Run, t: &Targets) -> String {
    let d = &r.decomp;
    let deadline = bomb::TIMEOUT.as_nanos() as f64;
    let iso = of_way(&d.bomb_samples, Way::Isolated);
    let mut s = String::new();
    if t.p99 > deadline + REGAIN_SLACK_NS {
        let overrun = Summary::of(
            &iso.iter()
                .filter_map(|s| match s.outcome {
                    Outcome::Stopped { overrun_ns, .. } => Some(overrun_ns as f64),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default();
        let deferred = iso.iter().filter(|s| matches!(s.outcome, Outcome::Stopped { deferred: true, .. })).count();
        let slow: Vec<&Sample> = iso.iter().filter(|s| s.ns > deadline + REGAIN_SLACK_NS).collect();
        let slow_deferred = slow.iter().filter(|s| matches!(s.outcome, Outcome::Stopped { deferred: true, .. })).count();
        let slow_overrun = slow
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Stopped { overrun_ns, .. } if overrun_ns as f64 > REGAIN_SLACK_NS))
            .count();
        writeln!(
            s,
            "\nThe bomb target is missed by {} at p99. Of the {} isolated decodes, {} came back later than 10.1 ms; in {} of those linger's own overrun (deadline to stop, as `last_preemption()` reports it) alone exceeded 100 us, and {} were deferred stops (in all decodes: {} deferred, {:.1}%). linger's overrun over all stops: median {}, p99 {}. So the tail is mostly the stop arriving late (the timer signal; compare section 2's raw POSIX timer on this VM), with deferrals and the launch's set-up (see below) adding to it.",
            ns(t.p99 - deadline - REGAIN_SLACK_NS),
            iso.len(),
            slow.len(),
            slow_overrun,
            slow_deferred,
            deferred,
            deferred as f64 * 100.0 / iso.len().max(1) as f64,
            ns(overrun.p50),
            ns(overrun.p99)
        )
        .unwrap();
    }
    if t.growth_kib > RSS_GROWTH_KIB as i64 {
        let (first, last) = (d.rss.first().expect("sampled"), d.rss.last().expect("sampled"));
        writeln!(
            s,
            "\nThe memory target is missed: RSS grew {:.1} MiB over {} cancels, and linger's count of abandoned stack bytes grew {:.1} MiB ({:.0}% of that) over the same loop. The isolated way launches with `reuse_stack_on_cancel`, so a cancelled function's stack is recycled rather than kept (linger keeps the live part of a stack reclaimed without that promise, see `docs/safety.md`): growth that abandoned stacks do not explain is the allocator's or the loader's. What the copies allocated is freed by each reset ({:.1} blocks per cancel).",
            t.growth_kib as f64 / 1024.0,
            t.cancels,
            (last.abandoned_kib as f64 - first.abandoned_kib as f64) / 1024.0,
            (last.abandoned_kib as f64 - first.abandoned_kib as f64) * 100.0 / t.growth_kib as f64,
            d.blocks_freed as f64 / d.resets.max(1) as f64
        )
        .unwrap();
    }
    s
}

fn decomp_section(r: &Run, t: &Targets) -> String {
    let d = &r.decomp;
    let p = &d.plan;
    let mut s = String::new();
    let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
    writeln!(
        s,
        "libpng's simplified API (`png_image_begin_read_from_memory` + `png_image_finish_read`, `PNG_FORMAT_RGB`, a caller-allocated buffer per way, reused) decodes two images made by the program with `png_image_write_to_memory`: a benign {}x{} picture (gradients, waves and pixel noise: {:.2} MiB of PNG for {:.2} MiB of pixels) and a bomb, a {}x{} all-zero RGB image ({:.0} KiB of PNG for {:.0} MiB of pixels, {:.0}x). The budget is 10 ms in every way:\n",
        d.benign.width,
        d.benign.height,
        mib(d.benign.data.len()),
        mib(d.benign.rgb_bytes()),
        d.bomb.width,
        d.bomb.height,
        d.bomb.data.len() as f64 / 1024.0,
        mib(d.bomb.rgb_bytes()),
        d.bomb.rgb_bytes() as f64 / d.bomb.data.len() as f64
    )
    .unwrap();
    s.push_str(
        "- **direct call**: no budget at all, the baseline;\n\
         - **thread**: `pthread_create`, `pthread_timedjoin_np` with a 10 ms deadline, then `pthread_cancel` + `pthread_join` (deferred cancellation: libpng decoding from memory reaches no cancellation point; asynchronous cancellation is not tried, the paper found it deadlocks, and it is unsafe around `malloc`);\n\
         - **fork**: the child decodes into its copy of the buffer and `_exit`s; the parent waits with `sigtimedwait(SIGCHLD, 10 ms)` (SIGCHLD blocked in every thread), then `kill(SIGKILL)` + `waitpid`. Pixels never reach the parent (no shared memory): a best case for fork, as in the paper;\n\
         - **linger, not isolated**: `linger::launch(decode, 10 ms)`; libpng and zlib are shared library code, where linger defers a deadline until the library call returns;\n\
         - **linger, isolated**: `Builder::new().isolated(true).reuse_stack_on_cancel(true).launch(decode, 10 ms)` (both unsafe: the decode keeps what libpng makes to itself and nothing points into its stack) runs the decode in a libset (its own copies of libpng and zlib; `when_no_libset(Exhausted::Wait(10 s))` in case the reaper falls behind); a continuation is sent to a reaper thread that drops it (cancels it: the libset is reset and the copies' heap blocks freed), off the critical path as in the paper.\n\n",
    );
    writeln!(
        s,
        "Time to regain control runs from the start of the call to the caller holding control again (for the linger ways, `launch` returning; the isolated way then hands the continuation to the reaper, timed separately below). Benign: {} decodes per way, the five ways in rotation, after {} unrecorded rounds. Bomb: {} decodes each for the isolated and fork ways (alternating, RSS read every {}), then {} each for the ways that run the bomb to its end (direct, thread, linger without isolation: one decode takes hundreds of ms), in rotation after one unrecorded round. Pixels against the direct decode: {}.\n",
        p.benign,
        p.warmup,
        p.bomb,
        p.rss_every,
        p.bomb_slow,
        d.identical.iter().map(|(w, ok)| format!("{} {}", w.short(), if *ok { "identical" } else { "**differ**" })).collect::<Vec<_>>().join(", ")
    )
    .unwrap();

    let direct = summary(&of_way(&d.benign_samples, Way::Direct)).unwrap_or_default();
    s.push_str("**Benign image**, decode time (control back with the pixels, or at the deadline):\n\n");
    s.push_str("| way | decodes | outcome | min | p1 | p25 | median | p75 | p99 | max | median vs direct |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for w in WAYS {
        let v = of_way(&d.benign_samples, w);
        if let Some(x) = summary(&v) {
            writeln!(s, "| {} | {} | {} | {} | {:+.1}% |", w.label(), v.len(), outcomes(&v), cells(&x), (x.p50 / direct.p50 - 1.0) * 100.0).unwrap();
        }
    }
    s.push_str("\n**Bomb**, time to regain control:\n\n");
    s.push_str("| way | decodes | outcome | min | p1 | p25 | median | p75 | p99 | max |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for w in WAYS {
        let v = of_way(&d.bomb_samples, w);
        if let Some(x) = summary(&v) {
            writeln!(s, "| {} | {} | {} | {} |", w.label(), v.len(), outcomes(&v), cells(&x)).unwrap();
        }
    }
    s.push_str(&reading(d));
    writeln!(s, "\n![regain-control time per way, benign and bomb](plots/{}-regain.svg)\n", r.section().1).unwrap();

    // The isolated way in detail.
    let iso = of_way(&d.bomb_samples, Way::Isolated);
    let over = |deferred: bool| {
        Summary::of(
            &iso.iter()
                .filter_map(|s| match s.outcome {
                    Outcome::Stopped { deferred: df, overrun_ns } if df == deferred => Some(overrun_ns as f64),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )
    };
    let deadline = bomb::TIMEOUT.as_nanos() as f64;
    let split = |deferred: bool| {
        summary(&iso.iter().filter(|s| matches!(s.outcome, Outcome::Stopped { deferred: d, .. } if d == deferred)).copied().collect::<Vec<_>>())
    };
    let rest = Summary::of(
        &iso.iter()
            .filter_map(|s| match s.outcome {
                Outcome::Stopped { overrun_ns, .. } => Some(s.ns - deadline - overrun_ns as f64),
                _ => None,
            })
            .collect::<Vec<_>>(),
    );
    let handoff = Summary::of(&iso.iter().map(|s| s.handoff_ns).collect::<Vec<_>>());
    let with = Summary::of(&iso.iter().map(|s| s.ns + s.handoff_ns).collect::<Vec<_>>()).unwrap_or_default();
    s.push_str("The isolated bomb decodes in detail:\n\n");
    if let Some(o) = over(false) {
        writeln!(s, "- stopped inside the copies at the deadline: {} times; linger's own overrun (deadline to stop, `last_preemption()`): median {}, p99 {}, max {};", o.n, ns(o.p50), ns(o.p99), ns(o.max)).unwrap();
    }
    if let Some(o) = over(true) {
        writeln!(s, "- deferred (the deadline found the decode in shared code, such as libc's `memcpy` called by libpng, and the stop waited for it to return): {} times; overrun median {}, p99 {}, max {};", o.n, ns(o.p50), ns(o.p99), ns(o.max)).unwrap();
    } else {
        s.push_str("- no stop was deferred (`last_preemption().deferred` was false every time);\n");
    }
    for (what, x) in [("taken in the copies", split(false)), ("deferred", split(true))] {
        if let Some(x) = x {
            writeln!(s, "- time to regain control of the stops {what}: median {}, p99 {}, max {} ({} stops);", ns(x.p50), ns(x.p99), ns(x.max), x.n).unwrap();
        }
    }
    let early: Vec<f64> = iso.iter().filter(|s| s.ns < deadline).map(|s| s.ns).collect();
    if let Some(e) = Summary::of(&early) {
        writeln!(
            s,
            "- {} stops came back before 10 ms had passed by the benchmark's clock (`Instant`), the earliest {} early: linger times deadlines with its own TSC-based clock, calibrated against CLOCK_MONOTONIC;",
            e.n,
            ns(deadline - e.min)
        )
        .unwrap();
    }
    if let (Some(r), Some(h)) = (rest, handoff) {
        writeln!(
            s,
            "- beyond the deadline, besides linger's overrun: a median {} (p99 {}) for the launch before the deadline starts counting (leasing a libset and taking a stack: the reaper gives the stacks it cancels back to the process's shared pool) and the switch back;\n- after `launch` returned, the hand-over to the reaper (an mpsc send, which wakes the reaper thread) took a median {} (p99 {}); counted in, control came back at p99 {} ({} past the deadline);",
            ns(r.p50),
            ns(r.p99),
            ns(h.p50),
            ns(h.p99),
            ns(with.p99),
            ns(with.p99 - deadline)
        )
        .unwrap();
    }
    let reap = |f: fn(&bomb::Reaped) -> f64| Summary::of(&d.reaped.iter().map(f).collect::<Vec<_>>());
    if let (Some(dr), Some(rs)) = (reap(|r| r.drop_ns), reap(|r| r.reset_ns)) {
        writeln!(
            s,
            "- on the reaper, off the critical path: {} cancels (warm-up included), each a median {} (p99 {}), of which the libset reset {} (p99 {}) restoring {} bytes of writable segments; {} resets freed {} heap blocks of the copies ({:.1} per cancel).",
            dr.n,
            ns(dr.p50),
            ns(dr.p99),
            ns(rs.p50),
            ns(rs.p99),
            d.reaped.last().map_or(0, |x| x.reset_bytes),
            d.resets,
            d.blocks_freed,
            d.blocks_freed as f64 / d.resets.max(1) as f64
        )
        .unwrap();
    }
    let (first, last) = (d.rss.first().expect("sampled"), d.rss.last().expect("sampled"));
    writeln!(
        s,
        "\n**Memory** over the {} isolated bomb decodes (each cancelled): RSS {:.1} MiB after warm-up, {:.1} MiB at the end ({:+.1} MiB, {:+.0} B per cancel); stack bytes linger counts as abandoned (cancelled functions whose live stack part stays mapped, see `docs/safety.md`) {:.1} -> {:.1} MiB; memory mappings {} -> {} (see the targets above).\n",
        t.cancels,
        first.rss_kib as f64 / 1024.0,
        last.rss_kib as f64 / 1024.0,
        t.growth_kib as f64 / 1024.0,
        t.growth_kib as f64 * 1024.0 / t.cancels.max(1) as f64,
        first.abandoned_kib as f64 / 1024.0,
        last.abandoned_kib as f64 / 1024.0,
        first.maps,
        last.maps
    )
    .unwrap();
    writeln!(s, "![RSS over the isolated bomb loop](plots/{}-rss.svg)", r.section().1).unwrap();
    s
}

/// What the bomb table says, way by way.
fn reading(d: &bomb::Results) -> String {
    let med = |w| summary(&of_way(&d.bomb_samples, w)).map_or(f64::NAN, |x| x.p50);
    let thread = of_way(&d.bomb_samples, Way::Thread);
    let honoured = thread.iter().filter(|s| s.outcome == Outcome::CancelRequested { honoured: true }).count();
    let deadline = bomb::TIMEOUT.as_nanos() as f64;
    let mut s = String::from("\n");
    writeln!(
        s,
        "- thread: `pthread_cancel` was honoured {honoured} times of {}: the decode reaches no cancellation point, so the join returned when libpng was done, a median {} (direct call: {});",
        thread.len(),
        ns(med(Way::Thread)),
        ns(med(Way::Direct))
    )
    .unwrap();
    writeln!(
        s,
        "- fork: control back a median {} after the deadline (`kill` + `waitpid`), but every call pays a fork of this process and the child's page faults (see the benign table);",
        ns(med(Way::Fork) - deadline)
    )
    .unwrap();
    let shared = of_way(&d.bomb_samples, Way::Linger);
    let deferred = shared.iter().filter(|s| matches!(s.outcome, Outcome::Stopped { deferred: true, .. })).count();
    writeln!(
        s,
        "- linger without isolation: the deadline was deferred in the shared libpng in {deferred} of {} decodes, and the function stopped when `png_image_finish_read` returned, a median {};",
        shared.len(),
        ns(med(Way::Linger))
    )
    .unwrap();
    writeln!(s, "- linger with isolation: a median {} after the deadline.", ns(med(Way::Isolated) - deadline)).unwrap();
    s
}

fn lazy_rows(s: &mut String, when: &str, l: &Lazy) {
    for (what, v) in [("first call", &l.first), ("second call", &l.second), ("the clock reads alone", &l.clock)] {
        if let Some(x) = Summary::of(v) {
            writeln!(s, "| {what}, {when} | {} | {} |", x.n, cells(&x)).unwrap();
        }
    }
}

fn calls_section(r: &Run, t: &Targets) -> String {
    let mut s = String::new();
    let a = &r.before.rows;
    let b = &r.after.rows;
    let k = r.after.libset;
    s.push_str("A small library built by `crates/gotcha-bench/build.rs`, `libgotcha_bench_nop.so` (`gotcha_bench_nop(x)` returns `x + 1`; a variable; functions that call `malloc`/`free` and `strlen`), is isolated together with libpng and zlib. Each row is the distribution of per-operation means of batches of back-to-back operations (a dependent chain through `black_box`); the rows of a part take turns batch by batch. Part A runs before `linger::isolate`, part B after; both in the same process. The paper's Table 3 (libgotcha on an Intel Xeon E5-2683 v4, glibc 2.29) is the reference column: a different machine and design.\n\n");
    s.push_str("| operation | when | samples | min | p1 | p25 | median | p75 | p99 | max | paper (ns) |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let paper = |key: &str| match key {
        "call_plain" | "call_definition" => "2",
        "call_stub_0" | "call_stub_k" => "14",
        "global_read" | "local_read" => "0",
        "stdout_read_0" | "stdout_read_k" => "3438",
        "gettimeofday" => "19",
        "getpid" => "44",
        "malloc_free_copy" => "21 per uncopyable call (+4 with callback)",
        _ => "",
    };
    for x in a.iter().chain(b) {
        writeln!(s, "| {} | {} | {} | {} | {} |", x.what, x.when, x.samples, cells(&x.s), paper(x.key)).unwrap();
    }
    let med = |rows: &[Row], key: &str| row(rows, key).s.p50;
    let libc = r.libc;
    writeln!(
        s,
        "\n- **Eager calls** (a, b): the program's GOT slot now holds the stub ({}); through it a call costs {} more than a call of the function itself with libset 0 current and {} more with libset {k} current (median differences; the paper: +12 ns). Before isolation the same call through the GOT took {}.",
        if r.after.program_calls_stub { "checked: it differs from the function's address" } else { "**not the case: the slot still holds the function**" },
        ns(t.added0),
        ns(t.addedk),
        ns(med(a, "call_plain"))
    )
    .unwrap();
    writeln!(
        s,
        "- **Globals** (d): gotcha does not redirect the program's accesses to a library's variables; it refuses to isolate a library whose variables the program's relocations name (libraries `all` would copy are left shared instead: {}). The benchmark reads the variable through a pointer from `dlsym`, which gotcha cannot see: it costs what it cost before ({} before, {} / {} after), and it stays on the program's copy. With the program having stored 42, the program reads {}, the library's own copy {} and libset {k}'s copy {} (each copy reads its own variable).",
        if r.isolated.excluded.is_empty() { "none here".into() } else { r.isolated.excluded.iter().map(|e| e.0.clone()).collect::<Vec<_>>().join(", ") },
        ns(med(a, "global_read")),
        ns(med(b, "global_read_0")),
        ns(med(b, "global_read_k")),
        r.after.sharing.program,
        r.after.sharing.base_library,
        r.after.sharing.copy
    )
    .unwrap();
    if libc {
        writeln!(
            s,
            "- **Trapped global access** (the paper's (d), 3,438 ns): with libc isolated, a library of the program built with `-fpic` reads libc's `stdout` through a GOT slot gotcha traps: each read faults, the handler decodes the instruction and points its register at the current libset's copy, {} per read with libset 0 current and {} with libset {k} current.",
            ns(med(b, "stdout_read_0")),
            ns(med(b, "stdout_read_k"))
        )
        .unwrap();
    } else {
        writeln!(
            s,
            "- **libc's `stdout`** from a `-fpic` library: a plain GOT load here ({}; trapped only with libc isolated, section 8b).",
            ns(med(b, "stdout_read_0"))
        )
        .unwrap();
    }
    writeln!(
        s,
        "- **Uncopyable calls** (e): {}, so `strlen` from the copy costs {} against {} from the library in libset 0; its `malloc`/`free` go through gotcha's recording wrappers (a mutex and a hash-set insert or remove per call): {} per `malloc` + `free` pair from the copy against {} from the library in libset 0 and {} from the program, i.e. {} per pair for the recording.",
        if libc {
            "with libc isolated, a copy's calls into libc go to its libset's copy of libc, except those libc keeps process-wide (`libc_policy.rs`: the heap among them)"
        } else {
            "a copy's calls into libc go straight to the program's libc (its GOT is relinked at load; there is no switch back to libset 0 and no callback)"
        },
        ns(med(b, "strlen_copy")),
        ns(med(b, "strlen_base")),
        ns(med(b, "malloc_free_copy")),
        ns(med(b, "malloc_free_base")),
        ns(med(b, "malloc_free_rust")),
        ns(med(b, "malloc_free_copy") - med(b, "malloc_free_base"))
    )
    .unwrap();
    writeln!(
        s,
        "- **Launch** (g): an isolated launch + return of an empty function costs {} against {} for a plain one ({} more: leasing a libset and handing it back).",
        ns(med(b, "launch_isolated")),
        ns(med(b, "launch_plain")),
        ns(med(b, "launch_isolated") - med(b, "launch_plain"))
    )
    .unwrap();
    writeln!(
        s,
        "- isolate's report: {} isolated libraries ({}), {} functions with a stub, {} slots redirected, {} COPY-relocated variables.",
        r.isolated.libraries.len(),
        r.isolated.libraries.iter().map(|l| l.rsplit('/').next().unwrap_or(l).to_owned()).collect::<Vec<_>>().join(", "),
        r.isolated.functions,
        r.isolated.slots,
        r.isolated.copy_relocated.len()
    )
    .unwrap();

    // Lazy binding.
    let lz = |l: &Lazy| Summary::of(&l.first).map_or(f64::NAN, |x| x.p50) - Summary::of(&l.second).map_or(f64::NAN, |x| x.p50);
    writeln!(
        s,
        "\n**Lazy binding** (c): `libgotcha_bench_caller.so` (not isolated, linked with `-z lazy`) makes one PLT call to each of {} functions of the isolated library, so each JUMP_SLOT stays unresolved until its first call. Half were first called before isolation (the loader's lazy resolver ran), half after: gotcha rewrites every slot of the program's objects that binds to an isolated function when it isolates, unresolved ones included, so after isolation a first call goes straight to the stub and the resolver never runs. Each call is timed alone (two clock reads around it: see the clock row):\n",
        r.before.lazy.first.len() + r.after.lazy.first.len()
    )
    .unwrap();
    s.push_str("| call | calls | min | p1 | p25 | median | p75 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    lazy_rows(&mut s, "before isolate", &r.before.lazy);
    lazy_rows(&mut s, "after isolate", &r.after.lazy);
    writeln!(
        s,
        "\nFirst minus second call (medians): {} before isolation (the lazy resolver, on cold code; the paper: 100 ns without libgotcha, 125 ns with), {} after (cold code alone).\n",
        ns(lz(&r.before.lazy)),
        ns(lz(&r.after.lazy))
    )
    .unwrap();

    let rs = &r.after.resets;
    writeln!(
        s,
        "**Libset reset** (h): `Lease::reset` restores the copies' writable segments ({} bytes for libpng, zlib and the small library: the rest of their writable data is RELRO, read-only after loading) from the snapshot taken when the libset was made, and frees the heap blocks the copies still hold. Timed {} times each, alternating: after `png_image_begin_read_from_memory` ran in the libset and was abandoned (median {} blocks freed), and with nothing to free.\n",
        rs.bytes,
        rs.after_png.n,
        rs.blocks.p50
    )
    .unwrap();
    s.push_str("| reset | resets | min | p1 | p25 | median | p75 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    writeln!(s, "| after an abandoned libpng decode | {} | {} |", rs.after_png.n, cells(&rs.after_png)).unwrap();
    writeln!(s, "| nothing allocated | {} | {} |", rs.bare.n, cells(&rs.bare)).unwrap();
    s.push_str("\nThe paper's libset re-initialisation (a full reload) took 4.8 ms; the thesis's restore of writable regions 47 us.\n");
    s
}

/// The command that reproduces a run.
pub fn command(quick: bool, libc: bool) -> String {
    let q = if quick { " --quick" } else { "" };
    let l = if libc { " --libc" } else { "" };
    format!("cargo build --release -p gotcha-bench && target/release/gotcha-bench{q}{l} --write-docs")
}

/// The whole section, Markdown.
pub fn markdown(r: &Run) -> String {
    let t = targets(r);
    let (n, _) = r.section();
    let mut s = if r.libc {
        format!(
            "## {n}. gotcha with libc isolated too (`--libc`)\n\nThe same benchmark, with `libc` added to the selection (`{}`): the isolated way's calls into libc (libpng's and zlib's `memcpy`, `memset`, the stream functions) go to its libset's copy of libc, where deadlines are taken too; the heap and the rest that `crates/gotcha/src/libc_policy.rs` keeps process-wide stay the program's and deferred. Only the isolated way (and the program's calls through the stubs, Table 3) differ from section 8.\n\n",
            crate::selection(true)
        )
    } else {
        String::from("## 8. gotcha: library isolation (paper Table 3 and Figure 5)\n\n")
    };
    writeln!(
        s,
        "Reproduce with `make bench-gotcha`, i.e.\n\n```sh\n{}\n```\n\n({} mode; `--quick` gives a short, rougher run; without `--write-docs` the section only goes to stdout.) This run took {:.0} s. Every number below was measured in this one run, baselines included, on a shared VM: compare within the run.\n",
        command(r.quick, r.libc),
        if r.quick { "quick" } else { "full" },
        r.duration.as_secs_f64()
    )
    .unwrap();
    s.push_str(&machine_table(r));
    s.push_str("\n### Targets\n\nGoals of the issue; printed, never asserted.\n\n");
    s.push_str(&targets_table(&t));
    s.push_str(&misses(r, &t));
    writeln!(s, "\n### {n}.1 A decompression bomb (paper Figure 5)\n").unwrap();
    s.push_str(&decomp_section(r, &t));
    writeln!(s, "\n### {n}.2 Call costs (paper Table 3)\n").unwrap();
    s.push_str(&calls_section(r, &t));
    s
}

/// Writes the section into `dir/benchmarks.md` and its plots: the main run
/// replaces what follows [`MARKER`] up to [`LIBC_MARKER`], the `--libc` run
/// what follows [`LIBC_MARKER`]; either stops at green-bench's section,
/// which comes after (a missing marker is added before it, or at the end).
pub fn write_docs(dir: &Path, md: &str, r: &Run) -> Result<(), Box<dyn std::error::Error>> {
    use bench_util::docs::{replace_section, GREEN_MARKER};
    let path = dir.join("benchmarks.md");
    let old = std::fs::read_to_string(&path)?;
    let text = if r.libc {
        replace_section(&old, LIBC_MARKER, md, &[GREEN_MARKER])
    } else {
        replace_section(&old, MARKER, md, &[LIBC_MARKER, GREEN_MARKER])
    };
    std::fs::write(&path, text)?;
    std::fs::create_dir_all(dir.join("plots"))?;
    let p = r.section().1;
    crate::plots::regain(&dir.join(format!("plots/{p}-regain.svg")), &r.decomp.benign_samples, &r.decomp.bomb_samples)?;
    crate::plots::rss(&dir.join(format!("plots/{p}-rss.svg")), &r.decomp.rss)?;
    Ok(())
}
