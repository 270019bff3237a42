//! How long a green thread runs before its worker looks for waiting work:
//! preemption that costs little until someone waits (issue 28, part 5).
//!
//! A slice is enforced by a timer signal, about 20 us of this VM's time,
//! and linger disarms its timer lazily (disarming costs a system call per
//! resume), so a worker that resumes one short run after another still
//! takes one signal per slice of busy time. Short slices keep a short
//! request from waiting behind a long one, but at 0.2 ms that is a tenth of
//! a busy server's time; at 2 ms a short request waits up to 2 ms.
//!
//! So each worker keeps an *interval* between its looks, from the
//! runtime's *granularity* (0.2 ms by default) up to the thread's slice,
//! and the slice stays the most one run gets while anything else waits:
//!
//! - A run that reaches the interval is stopped, and its worker looks for
//!   waiting work (its queues, the injector, its parked threads' ready
//!   descriptors). If some waits, the run is cut there: the thread is
//!   requeued as at the end of a slice, and the interval goes back to the
//!   granularity. If none waits, it is resumed at once, in the same poll,
//!   for another interval: the granularity again if other green threads
//!   live on the worker (one may wake at any moment), or twice the last
//!   interval if it is alone. It is requeued anyway once it has run a
//!   whole slice (the worker turns its drivers: timers, async tasks' I/O).
//! - While the worker keeps busy with short runs, the interval doubles each
//!   time one interval of busy time passes, up to the slice: a busy server
//!   of short requests takes one signal per slice, as with 2 ms slices.
//! - When the worker waits for work (in its driver), or a run used a whole
//!   slice at an interval grown to the slice, the interval goes back to the
//!   granularity: the next long run is found within the granularity, as
//!   with 0.2 ms slices.
//!
//! The state is a few integers read at every resume (about 20 instructions
//! a switch; the channel ping-pong's switch measured the same with and
//! without, within this VM's spread).
//!
//! What is not seen before the slice ends: an expired timer of a parked
//! green thread (tokio's timer wheel is turned by the worker between
//! batches) and I/O of async tasks (in tokio's own reactor). They wait for
//! the slice, as before.
//!
//! Like CFS's pair of a latency target and a minimum granularity: waiting
//! work is served within about one granularity of its arrival in a long
//! run, and a run is never cut shorter than the granularity.

use std::cell::Cell;
use std::time::Duration;

use linger::{Ended, Error, Linger};

/// The default granularity.
pub const DEFAULT_GRANULARITY: Duration = Duration::from_micros(200);

/// A worker's pace (a thread-local of the worker: green threads' images
/// never include it). Plain integers: this is read at every resume.
#[derive(Clone, Copy)]
struct Pace {
    /// The runtime's granularity (ns); zero: no looks.
    granularity: u64,
    /// The interval for the next run (ns); zero: back to the granularity
    /// at the next run.
    interval: u64,
    /// The same in TSC ticks.
    interval_ticks: u64,
    /// When the interval last changed (TSC ticks).
    since: u64,
}

thread_local! {
    static PACE: Cell<Pace> = const { Cell::new(Pace { granularity: 0, interval: 0, interval_ticks: 0, since: 0 }) };
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Sets the calling worker's granularity (at its start).
pub(crate) fn start(granularity: Duration) {
    PACE.with(|p| p.set(Pace { granularity: ns(granularity), interval: 0, interval_ticks: 0, since: 0 }));
}

/// Sets the interval (ns) from `now` (TSC ticks).
fn set(interval: u64, now: u64) {
    PACE.with(|p| {
        let mut v = p.get();
        v.interval = interval;
        v.interval_ticks = crate::base::clock::duration_to_ticks(Duration::from_nanos(interval));
        v.since = now;
        p.set(v);
    });
}

/// The worker waits for work: its next run is looked at after one
/// granularity.
pub(crate) fn idle() {
    PACE.with(|p| {
        let mut v = p.get();
        v.interval = 0;
        p.set(v);
    });
}

/// The granularity and the interval (ns) for a run of at most `slice` ns
/// starting `now` (TSC ticks): the interval doubled (up to the slice) if
/// one interval of busy time has passed since it last changed. A zero
/// granularity: no looks (the interval is the slice).
#[inline]
fn interval(now: u64, slice: u64) -> (u64, u64) {
    let p = PACE.with(Cell::get);
    let g = p.granularity;
    if g == 0 || slice <= g {
        return (0, slice);
    }
    if p.interval != 0 && now.wrapping_sub(p.since) < p.interval_ticks {
        return (g, p.interval.min(slice));
    }
    let next = if p.interval == 0 { g } else { p.interval.saturating_mul(2).min(slice) };
    set(next, now);
    (g, next)
}

/// What the worker knows at a look (see the module doc).
pub(crate) struct Look<'a> {
    /// Work waits for this worker.
    pub(crate) waits: &'a dyn Fn() -> bool,
    /// Other green threads live on this worker.
    pub(crate) others: &'a dyn Fn() -> bool,
}

/// How a run ended.
pub(crate) struct Run {
    pub(crate) result: Result<Option<Ended>, Error>,
    /// Looks that found nothing waiting (the run went on).
    pub(crate) looks: u64,
}

/// Resumes `l` for at most `slice`, started at `start` (TSC ticks), looking
/// for waiting work at each interval (see the module doc).
#[inline(always)]
pub(crate) fn run<T>(l: &mut Linger<T>, slice: Duration, start: u64, look: &Look<'_>) -> Run {
    let slice = ns(slice);
    let (g, mut step) = interval(start, slice);
    let mut looks = 0;
    loop {
        let result = linger::resume_contained(l, Duration::from_nanos(step));
        // Returned, ended, yielded or parked: the run is over.
        let stopped = matches!(result, Ok(None)) && matches!(l, Linger::Continuation(c) if !c.yielded());
        if !stopped || g == 0 {
            return Run { result, looks };
        }
        if step == slice {
            // A whole slice at an interval grown to the slice (the worker
            // kept busy): requeued, and the next runs are looked at from
            // the granularity again (the worker has a long run now).
            set(g, crate::base::clock::ticks());
            return Run { result, looks };
        }
        let now = crate::base::clock::ticks();
        let ran = ns(crate::base::clock::ticks_to_duration(now.wrapping_sub(start)));
        if ran.saturating_add(1_000) >= slice {
            // The whole slice: requeued, whatever waits.
            return Run { result, looks };
        }
        if (look.waits)() {
            set(g, now);
            return Run { result, looks };
        }
        looks += 1;
        step = if (look.others)() { g } else { step.saturating_mul(2) };
        step = step.min(slice - ran);
    }
}
