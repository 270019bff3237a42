//! Latency of linger's operations next to threads, processes, a plain call,
//! a bare coroutine switch and a raw signal (paper Table 2 analogue).

use std::hint::black_box;
use std::time::Duration;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};
use linger::{launch, pause, resume, Linger};

use crate::progress::Progress;
use crate::sig::{now_ns, spin_until_hits, Signals, ThreadTimer, TIMER_HITS};
use crate::stats::{summarize, Summary};
use crate::Scale;

/// The paper's Table 2 ("Lightweight Preemptible Functions", USENIX ATC 2020,
/// /work/shared/seeds/000_*.txt): libinger on an Intel Xeon E5-2683 v4,
/// Linux 4.12.6, glibc 2.29; mean ± deviation in microseconds.
mod paper {
    pub const LAUNCH: &str = "4.6 ± 0.05";
    pub const RESUME: &str = "4.4 ± 0.02";
    pub const CANCEL: &str = "4767.7 ± 1168.7";
    pub const FORK: &str = "207.5 ± 79.3";
    pub const PTHREAD_CREATE: &str = "32.5 ± 8.0";
}

/// Timeout used wherever the function is expected to finish or pause first.
pub const SLICE: Duration = Duration::from_micros(100);
/// Timeout of the preemption cycle benchmark.
pub const TINY: Duration = Duration::from_micros(5);
/// A deadline that has passed by the time the timer is armed.
pub const EXPIRED: Duration = Duration::from_nanos(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Clock,
    Call,
    LaunchReturn,
    CLaunchReturn,
    CoroutineLaunch,
    LaunchPause,
    ResumePause,
    CResumePause,
    PauseRoundTrip,
    CoroutineSwitch,
    PreemptResume,
    RawTimerCycle,
    PreemptExpired,
    RawTimerExpired,
    ArmNear,
    ArmFar,
    Tgkill,
    CancelPaused,
    CancelPreempted,
    Thread,
    Fork,
}

pub struct Row {
    pub key: Key,
    pub name: &'static str,
    pub baseline: bool,
    /// How it was sampled, e.g. "3000 batches of 64".
    pub method: String,
    /// Per-operation time, ns.
    pub s: Summary,
    /// The paper's Table 2 number for the matching operation, in us.
    pub paper: Option<&'static str>,
}

pub struct Latency {
    pub rows: Vec<Row>,
    /// Whole `resume(TINY)` call on a spinning function (slice included), ns.
    pub preempt_cycle: Summary,
    pub counters: linger::Stats,
}

impl Latency {
    pub fn get(&self, k: Key) -> &Summary {
        &self.rows.iter().find(|r| r.key == k).expect("every key is measured").s
    }
}

#[inline(never)]
fn empty() {
    black_box(());
}

extern "C" fn c_empty(_: *mut std::ffi::c_void) {
    black_box(());
}

/// `pause_forever` through the C API (`linger_pause`).
extern "C" fn c_pause_forever(_: *mut std::ffi::c_void) {
    loop {
        linger::ffi::linger_pause();
    }
}

/// Pauses forever; cancelled by dropping its continuation.
#[inline(never)]
pub fn pause_forever() {
    loop {
        pause();
    }
}

/// Spins forever in our own code (never in std or libc, which linger does
/// not preempt); cancelled by dropping its continuation.
#[inline(never)]
pub fn spin_forever() {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_add(1));
    }
}

/// Per-operation time of `per` back-to-back calls of `op`, `batches` times.
fn batched(batches: usize, per: usize, mut op: impl FnMut()) -> Vec<f64> {
    for _ in 0..per.clamp(16, 1000) {
        op();
    }
    let mut v = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t0 = now_ns();
        for _ in 0..per {
            op();
        }
        v.push((now_ns() - t0) as f64 / per as f64);
    }
    v
}

/// `n` samples of `f`, which returns one timed duration in ns (so it can do
/// its set-up outside the timed part).
fn singles(n: usize, mut f: impl FnMut() -> f64) -> Vec<f64> {
    for _ in 0..(n / 20).clamp(5, 200) {
        f();
    }
    (0..n).map(|_| f()).collect()
}

fn timed(op: impl FnOnce()) -> f64 {
    let t0 = now_ns();
    op();
    (now_ns() - t0) as f64
}

pub fn run(sc: Scale, sigs: &Signals, p: &mut Progress) -> Latency {
    let mut rows = Vec::new();
    let mut add = |key, name, baseline, method: String, v: Vec<f64>, paper| {
        rows.push(Row { key, name, baseline, method, s: summarize(v), paper });
    };
    let b = sc.n(3000, 400);
    linger::reset_stats();

    p.step("latency: clock and plain call");
    add(
        Key::Clock,
        "clock_gettime(MONOTONIC) (timing overhead)",
        true,
        format!("{b} batches of 256"),
        batched(b, 256, || {
            black_box(now_ns());
        }),
        None,
    );
    let f: fn() = black_box(empty as fn());
    add(
        Key::Call,
        "plain function call (indirect, empty)",
        true,
        format!("{b} batches of 1000"),
        batched(b, 1000, f),
        None,
    );

    p.step("latency: launch + return");
    add(
        Key::LaunchReturn,
        "launch + return, empty fn, 100 us timeout",
        false,
        format!("{b} batches of 64"),
        batched(b, 64, || {
            let l = launch(|| black_box(7u64), SLICE).expect("launch");
            black_box(l);
        }),
        None,
    );
    // The C API's extra steps (handle table, errno, panic guard), called as
    // a C program would.
    add(
        Key::CLaunchReturn,
        "C: linger_launch + return, empty fn, 100 us timeout",
        false,
        format!("{b} batches of 64"),
        batched(b, 64, || {
            let l = linger::ffi::linger_launch(Some(c_empty), SLICE.as_micros() as u64, std::ptr::null_mut());
            assert!(l.is_complete, "linger_launch");
        }),
        None,
    );
    let mut stack = Some(DefaultStack::new(linger::DEFAULT_STACK_SIZE).expect("stack"));
    add(
        Key::CoroutineLaunch,
        "bare coroutine create + run to return, reused stack (corosensei)",
        true,
        format!("{b} batches of 64"),
        batched(b, 64, || {
            let s = stack.take().expect("stack");
            let mut co = Coroutine::with_stack(s, |_: &Yielder<(), ()>, ()| black_box(7u64));
            black_box(co.resume(()));
            stack = Some(co.into_stack());
        }),
        None,
    );
    drop(stack);

    p.step("latency: launch until pause()");
    // The paper's launch(): the body pauses at once. Batches of 32 live
    // continuations (the paper used hundreds of functions); their cancellation
    // is not timed here.
    let lb = sc.n(1000, 150);
    let mut live: Vec<Linger<()>> = Vec::with_capacity(32);
    let mut v = Vec::with_capacity(lb);
    for i in 0..lb + 20 {
        let t0 = now_ns();
        for _ in 0..32 {
            live.push(launch(pause_forever, SLICE).expect("launch"));
        }
        let dt = (now_ns() - t0) as f64 / 32.0;
        // No assertion that all paused: on a loaded machine a descheduled
        // launch can pass its 100 us deadline (the counters show it).
        live.clear();
        if i >= 20 {
            v.push(dt);
        }
    }
    add(
        Key::LaunchPause,
        "launch until the fn calls pause(), 100 us timeout",
        false,
        format!("{lb} batches of 32 live fns"),
        v,
        Some(paper::LAUNCH),
    );

    p.step("latency: resume / pause round trips");
    let mut l = launch(pause_forever, Duration::ZERO).expect("launch");
    add(
        Key::ResumePause,
        "resume() of a paused fn until it pauses again (caller side)",
        false,
        format!("{b} batches of 64"),
        batched(b, 64, || {
            resume(&mut l, SLICE).expect("resume");
        }),
        Some(paper::RESUME),
    );
    assert!(l.is_continuation());
    drop(l);

    let mut cl = linger::ffi::linger_launch(Some(c_pause_forever), 0, std::ptr::null_mut());
    assert!(!cl.continuation.is_null(), "linger_launch");
    add(
        Key::CResumePause,
        "C: linger_resume() of a paused fn until it pauses again",
        false,
        format!("{b} batches of 64"),
        batched(b, 64, || {
            // SAFETY: a valid linger_t of this thread.
            let r = unsafe { linger::ffi::linger_resume(&mut cl, SLICE.as_micros() as u64) };
            assert_eq!(r, 0, "linger_resume");
        }),
        None,
    );
    // SAFETY: as above.
    assert_eq!(unsafe { linger::ffi::linger_cancel(&mut cl) }, 0, "linger_cancel");

    let per = 64;
    let mut l = launch(
        move || {
            let mut inner: Vec<f64> = Vec::with_capacity(b + 20);
            for _ in 0..b + 20 {
                let t0 = now_ns();
                for _ in 0..per {
                    pause();
                }
                inner.push((now_ns() - t0) as f64 / per as f64);
            }
            inner
        },
        Duration::ZERO,
    )
    .expect("launch");
    while !l.is_completion() {
        resume(&mut l, SLICE).expect("resume");
    }
    let mut inner = l.completion().expect("completed");
    add(
        Key::PauseRoundTrip,
        "pause() until resumed (function side)",
        false,
        format!("{b} batches of {per}"),
        inner.split_off(20),
        None,
    );

    let mut co = Coroutine::new(|y: &Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    add(
        Key::CoroutineSwitch,
        "bare coroutine resume + suspend (corosensei)",
        true,
        format!("{b} batches of 64"),
        batched(b, 64, || {
            black_box(co.resume(()));
        }),
        None,
    );
    drop(co);

    p.step("latency: preemption cycle vs raw signals");
    let n = sc.n(20_000, 3000);
    let timer = ThreadTimer::new(sigs).expect("timer_create");
    let mut preempt_cycle = Summary::default();
    for (t, key, raw_key, name, raw_name) in [
        (
            TINY,
            Key::PreemptResume,
            Key::RawTimerCycle,
            "preempt + resume cycle, 5 us slices (time beyond the slice)",
            "raw one-shot timer: arm 5 us ahead, spin, empty handler (time beyond the 5 us)",
        ),
        (
            EXPIRED,
            Key::PreemptExpired,
            Key::RawTimerExpired,
            "preempt + resume cycle, deadline passed before the switch (1 ns slices)",
            "raw one-shot timer armed for a deadline already passed, empty handler",
        ),
    ] {
        let tn = t.as_nanos() as u64;
        let before = linger::stats();
        let mut l = launch(spin_forever, t).expect("launch");
        let (mut cycle, mut over, mut raw) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        // Alternate linger and the raw timer sample by sample, so both see
        // the same phases of the (shared, virtualised) machine.
        for i in 0..n + n / 20 {
            let d = timed(|| {
                resume(&mut l, t).expect("resume");
            });
            let h = TIMER_HITS.load(std::sync::atomic::Ordering::Relaxed);
            let t0 = now_ns();
            timer.arm_at(t0 + tn);
            spin_until_hits(h);
            let r = now_ns() as f64 - (t0 + tn) as f64;
            if i >= n / 20 {
                cycle.push(d);
                over.push(d - tn as f64);
                raw.push(r);
            }
        }
        assert!(l.is_continuation() && !l.yielded());
        drop(l);
        let after = linger::stats();
        let pre = after.preemptions - before.preemptions;
        let deferred = after.deferred_preemptions - before.deferred_preemptions;
        if key == Key::PreemptResume {
            preempt_cycle = summarize(cycle);
        }
        add(
            key,
            name,
            false,
            format!("{n} single; preemptions incl. warm-up: {} in the handler, {deferred} deferred", pre - deferred),
            over,
            None,
        );
        add(raw_key, raw_name, true, format!("{n} single, alternating with the row above"), raw, None);
    }
    add(
        Key::ArmNear,
        "raw timer_settime, deadline 100 us away (disarm not timed)",
        true,
        format!("{n} single"),
        singles(n, || {
            let t0 = now_ns();
            timer.arm_at(t0 + 100_000);
            let d = (now_ns() - t0) as f64;
            timer.disarm();
            d
        }),
        None,
    );
    add(
        Key::ArmFar,
        "raw timer_settime, deadline 10 ms away (disarm not timed)",
        true,
        format!("{n} single"),
        singles(n, || {
            let t0 = now_ns();
            timer.arm_at(t0 + 10_000_000);
            let d = (now_ns() - t0) as f64;
            timer.disarm();
            d
        }),
        None,
    );
    drop(timer);
    add(
        Key::Tgkill,
        "raw signal round trip: tgkill(self) + empty handler + sigreturn",
        true,
        format!("{n} single"),
        singles(n, || timed(|| sigs.tgkill_self())),
        None,
    );

    p.step("latency: cancellation");
    let n = sc.n(10_000, 1500);
    let cancels = |s: linger::Stats| (s.cancels_unwound, s.cancels_reclaimed);
    let (u0, r0) = cancels(linger::stats());
    let v = singles(n, || {
        let l = launch(pause_forever, SLICE).expect("launch");
        timed(|| drop(l))
    });
    let (u1, r1) = cancels(linger::stats());
    add(
        Key::CancelPaused,
        "cancel (drop) a paused fn: unwinds its stack",
        false,
        format!("{n} single; cancels incl. warm-up: {} unwound, {} reclaimed", u1 - u0, r1 - r0),
        v,
        Some(paper::CANCEL),
    );
    // A 100 us slice, so the deadline signal (not a deferral) stops it.
    let v = singles(n, || {
        let l = launch(spin_forever, SLICE).expect("launch");
        timed(|| drop(l))
    });
    let (u2, r2) = cancels(linger::stats());
    add(
        Key::CancelPreempted,
        "cancel (drop) a fn preempted in the signal handler: reclaims its stack",
        false,
        format!("{n} single; cancels incl. warm-up: {} unwound, {} reclaimed", u2 - u1, r2 - r1),
        v,
        None,
    );

    p.step("latency: thread spawn + join");
    let n = sc.n(3000, 400);
    add(
        Key::Thread,
        "std::thread::spawn + join (pthread_create + join), empty fn",
        true,
        format!("{n} single"),
        singles(n, || timed(|| std::thread::spawn(|| black_box(())).join().expect("join"))),
        Some(paper::PTHREAD_CREATE),
    );

    p.step("latency: fork + _exit + waitpid");
    let n = sc.n(1000, 150);
    add(
        Key::Fork,
        "fork + _exit + waitpid",
        true,
        format!("{n} single"),
        singles(n, || timed(fork_exit_wait)),
        Some(paper::FORK),
    );

    Latency { rows, preempt_cycle, counters: linger::stats() }
}

fn fork_exit_wait() {
    // SAFETY: the child only calls the async-signal-safe _exit; the parent
    // reaps it with waitpid on the returned pid.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            libc::_exit(0);
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            assert_eq!(*libc::__errno_location(), libc::EINTR, "waitpid");
        }
    }
}
