//! A deferred function inlined into another keeps its deferral
//! (`inlined.rs`): the compiler leaves it no symbol and no frame, and only
//! the DWARF inline records say where its code went.
//!
//! `guarded::touch` holds a thread-local `RefCell` borrowed while it works,
//! and is inlined into the loop that calls it. Without a rule, the loop is
//! often stopped inside it, and its caller (same thread) finds the cell
//! borrowed; with `defer_paths` naming it, never.

use std::cell::RefCell;
use std::hint::black_box;
use std::time::Duration;

use linger::Linger;

thread_local! {
    static STATE: RefCell<u64> = const { RefCell::new(0) };
}

/// What both deferred functions below do: keep the thread-local cell
/// borrowed while they work.
macro_rules! borrow_and_work {
    ($n:expr) => {
        super::STATE.with(|s| {
            let mut b = s.borrow_mut();
            for i in 0..$n {
                *b = std::hint::black_box(b.wrapping_mul(31).wrapping_add(i));
            }
        })
    };
}

mod guarded {
    /// Inlined wherever it is called: no out-of-line symbol exists.
    #[inline(always)]
    pub fn touch(n: u64) {
        borrow_and_work!(n);
    }
}

/// Calls `touch` (a function item, so the call can be inlined) forever,
/// with some time outside the borrow too.
fn work_with(touch: impl Fn(u64)) {
    loop {
        touch(3000);
        let mut x = 0u64;
        for i in 0..300 {
            x = black_box(x.wrapping_add(i));
        }
    }
}

fn work() {
    work_with(guarded::touch)
}

/// Runs `work` in `rounds` slices on a new thread (a cancelled function
/// leaves its thread's cell borrowed for good); how many stops left the
/// cell borrowed.
fn stops_inside(rounds: usize, work: fn()) -> usize {
    std::thread::spawn(move || stops_inside_here(rounds, work)).join().unwrap()
}

fn stops_inside_here(rounds: usize, work: fn()) -> usize {
    let mut l = linger::launch(work, Duration::ZERO).unwrap();
    let mut inside = 0;
    for _ in 0..rounds {
        linger::resume(&mut l, Duration::from_micros(40)).unwrap();
        assert!(matches!(l, Linger::Continuation(_)));
        if STATE.with(|s| s.try_borrow_mut().is_err()) {
            inside += 1;
        }
    }
    l.cancel();
    inside
}

#[test]
fn an_inlined_deferred_function_is_never_stopped_in() {
    // The check itself works: without a rule the loop is stopped inside
    // the borrow (most of its time is spent there).
    let without = stops_inside(300, work);
    assert!(without > 0, "never stopped inside the inlined borrow: the test cannot see the hazard");
    let far_without = stops_inside(300, work_far);
    assert!(far_without > 0, "never stopped inside the borrow inlined from another unit");
    linger::defer_paths(&[("inlined::guarded::", true), ("inlined::far::", true)]);
    let with = stops_inside(1000, work);
    assert_eq!(with, 0, "{with} of 1000 stops inside an inlined deferred function (without the rule: {without} of 300)");
    let far_with = stops_inside(1000, work_far);
    assert_eq!(far_with, 0, "{far_with} of 1000 stops inside a deferred function inlined from another unit (without the rule: {far_without} of 300)");
    eprintln!(
        "stops inside the inlined borrow: {without} of 300 without the rule, {with} of 1000 with it; \
         inlined from another unit: {far_without} of 300 and {far_with} of 1000"
    );
}

/// The same function in a module of its own, not marked `#[inline]`: in
/// a release build each module is a codegen unit, and ThinLTO inlines it
/// across them, so that its inline record names its origin in the other
/// unit's debug info (`DW_FORM_ref_addr`). tokio's broadcast channel lost
/// a lock so (`inlined.rs`, `Origins`).
mod far {
    pub fn touch(n: u64) {
        borrow_and_work!(n);
    }
}

fn work_far() {
    work_with(far::touch)
}
