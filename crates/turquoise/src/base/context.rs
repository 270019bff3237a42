//! The worker the calling OS thread is, if any: the bottom of the
//! scheduling layers (tokio's `runtime/context.rs` idea). Preemptible
//! futures, tasks and green threads ask it which worker they run on and
//! count their polls on it, without reaching into the scheduler above
//! them; the scheduler sets it while a worker runs (`Scheduler::worker`).

use std::cell::Cell;

use crate::base::counters::WorkerCounters;

/// The running worker: its scheduler (erased: only compared and handed
/// back to the scheduler), its index, its counters.
#[derive(Clone, Copy)]
struct Worker {
    sched: *const (),
    index: usize,
    counters: *const WorkerCounters,
}

const NONE: Worker = Worker { sched: std::ptr::null(), index: 0, counters: std::ptr::null() };

thread_local! {
    static WORKER: Cell<Worker> = const { Cell::new(NONE) };
    /// A poll on this worker used its whole slice since the last pick.
    static SLICE_USED: Cell<bool> = const { Cell::new(false) };
    /// See [`on_leave`].
    static LEAVE: Cell<Option<fn()>> = const { Cell::new(None) };
    static DRIVERS: Cell<Option<Drivers>> = const { Cell::new(None) };
}

/// What the runtime the calling thread is inside (a worker's, or one whose
/// `block_on` it runs) has of tokio's drivers: what the park seam asks
/// before it waits on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Drivers {
    pub(crate) io: bool,
    pub(crate) time: bool,
}

/// Sets the drivers of the runtime the calling thread is now inside (None:
/// none); returns the previous ones. Kept by the runtime beside its
/// current handle.
pub(crate) fn set_drivers(d: Option<Drivers>) -> Option<Drivers> {
    DRIVERS.with(|c| c.replace(d))
}

/// The drivers of the runtime the calling thread is inside, if any.
#[inline]
pub(crate) fn drivers() -> Option<Drivers> {
    DRIVERS.with(Cell::get)
}

/// The calling thread is worker `index` of scheduler `sched` until
/// [`exit`]; `counters` (the worker's) outlive that.
pub(crate) fn enter(sched: *const (), index: usize, counters: &WorkerCounters) {
    WORKER.with(|w| w.set(Worker { sched, index, counters }));
}

/// The calling thread is no worker any more.
pub(crate) fn exit() {
    WORKER.with(|w| w.set(NONE));
}

/// The scheduler and index of the worker the calling thread is.
#[inline]
pub(crate) fn worker() -> Option<(*const (), usize)> {
    let w = WORKER.with(Cell::get);
    (!w.sched.is_null()).then_some((w.sched, w.index))
}

/// The index of the worker the calling thread is, of scheduler `sched` only.
#[inline]
pub(crate) fn worker_of(sched: *const ()) -> Option<usize> {
    let w = WORKER.with(Cell::get);
    (!w.sched.is_null() && std::ptr::eq(w.sched, sched)).then_some(w.index)
}

/// The index of the worker the calling thread is, of any scheduler.
#[inline]
pub(crate) fn current_worker() -> Option<usize> {
    worker().map(|(_, i)| i)
}

/// The calling worker's counters (None off the workers).
#[inline]
fn counters() -> Option<&'static WorkerCounters> {
    let c = WORKER.with(Cell::get).counters;
    // SAFETY: set by `enter` to the running worker's counters, which its
    // scheduler holds for longer than the worker runs; cleared by `exit`.
    // Only used while the worker runs (polls and runs happen inside it).
    unsafe { c.as_ref() }
}

/// Counts a task's poll on the calling worker (none: nothing).
#[inline]
pub(crate) fn count_poll(preempted: bool, p: Option<linger::Preemption>) {
    if let Some(c) = counters() {
        c.polls.add(preempted, p);
    }
}

/// The calling worker's green-thread counters (null off the workers): valid
/// while the worker runs, which its scheduler outlives.
#[inline]
pub(crate) fn green_counters() -> *const crate::thread::GreenCounters {
    counters().map_or(std::ptr::null(), |c| &c.green)
}

/// Says that the poll running on this worker used its whole slice (an
/// activity found its slice over at a yield check, or ran past it): the
/// worker's next pick looks at the injector first.
pub(crate) fn slice_used() {
    SLICE_USED.with(|s| s.set(true));
}

/// Did a poll use its whole slice since the last call?
pub(crate) fn take_slice_used() -> bool {
    SLICE_USED.with(|s| s.replace(false))
}

/// Asks the worker to call `f` before it runs code other than green
/// threads: an async task, tokio's drivers, its own end (a green thread
/// left its thread-local values installed, `thread/green.rs`).
pub(crate) fn on_leave(f: fn()) {
    LEAVE.with(|l| l.set(Some(f)));
}

/// Runs what [`on_leave`] asked for, once.
pub(crate) fn leave() {
    if let Some(f) = LEAVE.with(|l| l.take()) {
        f();
    }
}
