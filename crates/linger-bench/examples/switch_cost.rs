//! The core's switch path against a bare coroutine switch, in one run (issue
//! 28: launch + return at most 4x a bare create + run, a resume at most 6x a
//! bare resume + suspend). Each figure: the median [min-max] over 15 batches
//! of 200,000 operations, ns per operation.
//!
//! `taskset -c 0 cargo run --release -p linger-bench --example switch_cost`
//! (`perf record` it to see where the time goes).
//!
//! The "floor" rows add to the bare switch only what a timed switch that
//! keeps each side's FP control state cannot leave out: one clock reading
//! (`rdtsc`, for the deadline) and the MXCSR reads (the caller's at the
//! switch in, the function's at the switch out), both slow microcode on
//! some hosts. The ratios to the floor say what the rest of the path costs.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};

const BATCHES: usize = 15;
const PER: usize = 200_000;
const SLICE: Duration = Duration::from_millis(100);

fn batches(mut f: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..PER / 10 {
        f();
    }
    let mut v: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..PER {
                f();
            }
            t.elapsed().as_nanos() as f64 / PER as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn show(what: &str, (m, lo, hi): (f64, f64, f64), base: Option<f64>) {
    let ratio = base.map(|b| format!("  {:.1}x the bare switch", m / b)).unwrap_or_default();
    println!("{what:<48} {m:7.1} ns [{lo:.1}-{hi:.1}]{ratio}");
}

/// `rdtsc`: the clock reading a resume takes for its deadline.
#[inline(always)]
fn clock() -> u64 {
    // SAFETY: rdtsc has no side effects; user space may execute it on Linux.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// `stmxcsr`: one read of the SSE control state.
#[inline(always)]
fn mxcsr() -> u32 {
    let mut m = 0u32;
    // SAFETY: stores the control register into a local.
    unsafe { std::arch::asm!("stmxcsr [{m}]", m = in(reg) &mut m, options(nostack, preserves_flags)) };
    m
}

fn main() {
    // linger's start-up (timer, tables) before anything is timed.
    assert!(linger::launch(|| (), SLICE).expect("launch").is_completion());
    // `resume N` / `launch N`: that loop alone, N times (for `perf stat`).
    let args: Vec<String> = std::env::args().collect();
    if let (Some(what), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok())) {
        let mut p = linger::launch(|| loop { linger::pause() }, Duration::ZERO).expect("launch");
        for _ in 0..n {
            if what == "launch" {
                black_box(linger::launch(|| black_box(1u64), SLICE).expect("launch"));
            } else {
                linger::resume(&mut p, SLICE).expect("resume");
            }
        }
        return;
    }

    let mut stack = Some(DefaultStack::new(64 * 1024).expect("stack"));
    let bare_launch = batches(|| {
        let mut co = Coroutine::with_stack(stack.take().expect("stack"), |_: &Yielder<(), ()>, ()| black_box(1u64));
        black_box(co.resume(()));
        stack = Some(co.into_stack());
    });
    let mut co = Coroutine::new(|y: &Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    let bare_resume = batches(|| {
        black_box(co.resume(()));
    });
    drop(co);
    let floor_launch = batches(|| {
        let m = mxcsr();
        let t = clock();
        let mut co = Coroutine::with_stack(stack.take().expect("stack"), |_: &Yielder<(), ()>, ()| black_box(1u64));
        black_box(co.resume(()));
        black_box((t, m, mxcsr()));
        stack = Some(co.into_stack());
    });
    let mut co = Coroutine::new(|y: &Yielder<(), ()>, ()| loop {
        black_box(mxcsr());
        y.suspend(());
    });
    let floor_resume = batches(|| {
        black_box((mxcsr(), clock()));
        black_box(co.resume(()));
    });
    drop(co);

    let launch = batches(|| {
        black_box(linger::launch(|| black_box(1u64), SLICE).expect("launch"));
    });
    let mut p = linger::launch(
        || loop {
            linger::pause();
        },
        Duration::ZERO,
    )
    .expect("launch");
    let resume = batches(|| {
        linger::resume(&mut p, SLICE).expect("resume");
    });
    drop(p);

    show("bare coroutine create + run to return", bare_launch, None);
    show("  floor: + a clock and two MXCSR reads", floor_launch, Some(bare_launch.0));
    show("linger launch + return, empty fn", launch, Some(bare_launch.0));
    println!("{:<48} {:7.1}x", "  linger launch / floor", launch.0 / floor_launch.0);
    show("bare coroutine resume + suspend", bare_resume, None);
    show("  floor: + a clock and two MXCSR reads", floor_resume, Some(bare_resume.0));
    show("linger resume until the fn pauses again", resume, Some(bare_resume.0));
    println!("{:<48} {:7.1}x", "  linger resume / floor", resume.0 / floor_resume.0);
}
