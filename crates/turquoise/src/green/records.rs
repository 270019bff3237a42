//! The green thread: a linger function that its worker resumes itself.
//!
//! A green thread is not an async task. The workers' queues hold it
//! directly (`scheduler::Job::Green`), a wake-up queues the thread's own
//! record, and the worker's loop resumes its function for at most its slice
//! (`Run::run` here). A run ends in one of three ways:
//!
//! - it *parks* ([`park`]): it asked to wait (a future it blocks on is
//!   pending) and paused; it is off the queues until its waker fires;
//! - it *yields* ([`yield_now`]): it goes behind the worker's other ready
//!   work;
//! - its slice ran out anywhere else: stopped, it is queued behind the work
//!   at rest (the scheduler's stopped queue), as a preempted poll is.
//!
//! **Queued once.** `state` says where the thread is: queued, running,
//! parked (idle) or done. Only a wake-up that finds it idle queues it (a
//! compare-and-swap), so it is in one queue at most, and run by one worker
//! at a time.
//!
//! **Where it runs.** Until its first instruction a green thread may be
//! stolen by any worker (nothing of any thread is in its frames yet). From
//! then on it runs on that worker only (its *home*): every later wake-up is
//! queued there. Code caches thread-local addresses and values across any
//! call, including the call that parks, so no later point is safe to move
//! it (`docs/safety.md`, "Green threads").
//!
//! **Thread-locals.** Around each resume the worker swaps in the thread's
//! image of the program's thread-locals (`tls.rs`), and swaps it out after.
//!
//! **No lost wake-up.** A park sets `why` and pauses. The slice may end
//! between the two (then the run sees a stop, not a park, and the thread
//! pauses at its next resume); a wake may come at any point. The waker sets
//! `woken`, then (after a fence) queues the thread if it finds it idle; the
//! worker, after a park, marks it idle, then (after a fence) looks at
//! `woken` and queues it itself if it was set. One of the two sees the
//! other; the compare-and-swap lets only one queue it. The thread clears
//! `woken` before each look at what it waits for, so a cancel (`abort`,
//! which sets `aborted` before its wake) is looked at beside `woken`: a
//! cancel that came before the park's look still ends the thread.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Wake, Waker};
use std::time::Duration;

use linger::Linger;

use crate::base::thread_stats::{self, Cause, Status};
use super::tls::{self, Image};
use crate::thread::Thread;
use crate::base::counters::PollCounters;
use crate::preemptible::task::{JoinCell, JoinError, Wait};

/// Why the function paused (read by the run that resumed it).
const NONE: u8 = 0;
const PARK: u8 = 1;
const YIELD: u8 = 2;

/// Where the thread is (`GreenShared::state`).
/// Parked: off the queues; a wake-up queues it.
const IDLE: u8 = 0;
/// In a queue (new, ready, or stopped).
const QUEUED: u8 = 1;
/// Being resumed by its worker.
const RUNNING: u8 = 2;
/// Ended (returned, panicked, cancelled): never queued again.
const DONE: u8 = 3;

/// A destructor of a thread-local registered inside a green thread (std's
/// `thread_local!` values with `Drop`, through `__cxa_thread_atexit_impl`).
type Dtor = (unsafe extern "C" fn(*mut libc::c_void), usize);

/// A green thread's record: what its code, its waker, its worker and its
/// handle share.
pub(crate) struct GreenShared {
    /// A wake-up came since the thread last looked (see the module doc).
    woken: AtomicBool,
    why: AtomicU8,
    /// `IDLE`, `QUEUED`, `RUNNING` or `DONE`.
    state: AtomicU8,
    /// Its handle asked to cancel it.
    aborted: AtomicBool,
    pub(crate) thread: Thread,
    /// The thread has its own image of the thread-locals.
    own_tls: bool,
    /// Its slice; for an activity, the period of its yield checks' flag.
    slice: Duration,
    /// An activity: resumed cooperatively (never stopped by its slice).
    cooperative: bool,
    /// The home worker's token (0 before the first resume).
    home: AtomicUsize,
    /// Its slot in its home's `LIVE` list, + 1 (0: not in it).
    live_key: AtomicUsize,
    /// Its place in the registry the dump reads.
    pub(crate) registered: thread_stats::Registered,
    sched: Weak<dyn Queues>,
    /// Thread-local destructors registered by the thread, run at its end.
    dtors: Mutex<Vec<Dtor>>,
    /// Where it is, what it waits on, its counters.
    pub(crate) status: Status,
    /// Its resumes as polls (its handle's `stats`).
    pub(crate) polls: PollCounters,
    /// The function, its image and where its value goes.
    body: UnsafeCell<Option<Arc<dyn Body>>>,
    /// `thread::park`'s token (`Thread::unpark` sets it, then wakes the
    /// thread as any waker of it does).
    park_token: AtomicBool,
}

// SAFETY: `body` is touched only on one thread at a time: before the first
// resume by the worker that took the thread from a queue (it is in one queue
// at most, `state`), and from then on only on the home worker, by its runs
// and by its ending (`end`, never during a run). Everything in it is `Send`.
unsafe impl Sync for GreenShared {}

/// A green thread as the workers see it.
pub(crate) trait Run: Send + Sync {
    /// Resumes it, on the worker that took it: where it goes next.
    fn run(&self) -> Ran;
    /// It leaves a queue unrun (shutdown): ended here if it may be.
    fn dropped_unrun(&self);
}

/// How a green thread's run ended.
pub(crate) enum Ran {
    /// It waits (parked; its wake-up queues it again) or it has ended.
    Off,
    /// It yielded, or was woken while it parked: behind this worker's
    /// other ready work.
    Ready,
    /// Its slice ran out: behind the work at rest (`pinned`).
    Stopped,
}

/// A green thread's place in a queue (at most one at a time: its state
/// says so, `thread/green.rs`). Dropped unrun, it says so to the thread.
///
/// A thin pointer to the concrete record, not an `Arc<dyn Run>`: queue
/// entries and `Option<Job>` then fit in two registers. Moved through the
/// queues and the pick's closures as 24 bytes, they were written in pieces
/// and read back whole, a store-forwarding stall at each hop that doubled
/// an async task's yield (40 to 90 ns, `switch_ladder`).
pub(crate) struct GreenJob(Option<Arc<GreenShared>>);

impl GreenJob {
    #[inline]
    pub(crate) fn new(r: Arc<GreenShared>) -> GreenJob {
        GreenJob(Some(r))
    }

    #[inline]
    pub(crate) fn run(&self) -> Ran {
        self.0.as_ref().map_or(Ran::Off, |r| r.run())
    }

    /// Leaves the queues after a run (not a drop unrun).
    #[inline]
    pub(crate) fn release(mut self) {
        self.0 = None;
    }
}

impl Drop for GreenJob {
    #[inline]
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.dropped_unrun();
        }
    }
}

/// The scheduler as a green thread sees it: it stands above the records
/// (`scheduler.rs` implements this), which hold it weakly.
pub(crate) trait Queues: Send + Sync {
    /// Queues a runnable green thread, on worker `home - 1` (0: any).
    fn schedule_green(&self, job: GreenJob, home: usize);
    /// Work waits for worker `i` besides the green thread it runs.
    fn work_waits(&self, i: usize) -> bool;
}

/// `sched` itself and the worker's index, when the calling thread is one
/// of its workers: reached without touching its reference count.
#[inline]
fn on_worker_of(sched: &Weak<dyn Queues>) -> Option<(&dyn Queues, usize)> {
    let i = crate::base::context::worker_of(sched.as_ptr() as *const ())?;
    // SAFETY: the context names this scheduler as the one whose worker this
    // thread runs (`Scheduler::worker` holds an `Arc` of it while it does).
    // The weak pointer cannot name a dead scheduler whose memory a new one
    // reuses: a thread is queued by a wake-up only while it is idle, and
    // every thread of a runtime is ended (done, never queued again) by its
    // home worker before that runtime's scheduler can be freed.
    Some((unsafe { &*sched.as_ptr() }, i))
}

/// Queues a woken green thread of `sched`; dropped if the runtime is gone.
/// On one of `sched`'s workers (the usual case: a green thread or a driver
/// of its worker wakes it) without touching its reference count.
fn wake_green(sched: &Weak<dyn Queues>, job: GreenJob, home: usize) {
    if let Some((s, _)) = on_worker_of(sched) {
        return s.schedule_green(job, home);
    }
    if let Some(s) = sched.upgrade() {
        s.schedule_green(job, home);
    }
}

impl Wake for GreenShared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        // After the flag, with a fence: see `Status::parked` and the module
        // doc.
        self.status.woken();
        if self.state.load(Ordering::Relaxed) == IDLE && self.state.compare_exchange(IDLE, QUEUED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            let home = self.status.worker.load(Ordering::Relaxed);
            wake_green(&self.sched, GreenJob::new(self.clone()), home);
        }
    }
}

impl crate::green::types::Unpark for GreenShared {
    fn unpark(self: Arc<Self>) {
        // The token before the wake-up: a park that looked before it finds
        // `woken` set and looks again (the park protocol, module doc).
        self.park_token.store(true, Ordering::Release);
        self.wake_by_ref();
    }
}

impl GreenShared {
    /// Takes `thread::park`'s token if it is available. Polled by the
    /// thread's own park loop (`block_on`), whose waker is the record:
    /// `Thread::unpark` sets the token, then wakes the record.
    pub(crate) fn poll_park_token(&self) -> std::task::Poll<()> {
        if self.park_token.swap(false, Ordering::Acquire) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

/// The live green threads, for the dump (`dump.rs`).
pub(crate) static REGISTRY: thread_stats::Registry<GreenShared> = thread_stats::Registry::new();

std::thread_local! {
    /// Slices that ended while the worker's current activity ran (linger's
    /// cooperative resume bumps it; the thread's run clears it around each
    /// resume). A turquoise thread-local: the worker's own, never part of a
    /// green thread's image (`tls.rs`).
    pub(crate) static DUE: std::sync::atomic::AtomicU32 = const { std::sync::atomic::AtomicU32::new(0) };
    /// The green thread running on this worker (null between resumes).
    static CURRENT: Cell<*const GreenShared> = const { Cell::new(std::ptr::null()) };
    /// This worker's started green threads, by id, for shutdown: each is
    /// cancelled here, on its home, before the worker's thread ends.
    static LIVE: RefCell<slab::Slab<Arc<GreenShared>>> = const { RefCell::new(slab::Slab::new()) };
    /// An address unique to this OS thread while it lives (identifies a
    /// green thread's home).
    static HOME_TOKEN: u8 = const { 0 };
    /// The worker's green counters while it resumes a thread.
    static WORKER_COUNTERS: Cell<*const thread_stats::Counters> = const { Cell::new(std::ptr::null()) };
    /// The green thread whose values of the swap set are in this worker's
    /// TLS block, between runs too (null: the worker's own; `ended_mark`:
    /// a thread that ended). Otherwise always one started on this worker and
    /// not ended: in `LIVE` (an end changes it first, `finished` and `end`).
    static INSTALLED: Cell<*const GreenShared> = const { Cell::new(std::ptr::null()) };
    /// The worker's own values of the swap set while a green thread's are
    /// installed.
    static OWN: RefCell<Option<Image>> = const { RefCell::new(None) };
}

/// `INSTALLED` after the installed thread ended: the block holds its dead
/// values, the worker's own are in `OWN` (never dereferenced).
fn ended_mark() -> *const GreenShared {
    std::ptr::dangling()
}

/// Puts `g`'s values of the swap set in place for its run (`tls.rs`).
/// They stay there after it, until another thread runs or other code does
/// (the scheduler calls [`restore_worker_tls`] first): a thread resumed
/// again before anything else ran here costs no copy, and a switch from one
/// green thread to the next copies each set once each way, where swapping
/// in and out around every run exchanged it twice.
fn install(set: &tls::SwapSet, g: &GreenShared, img: &mut Image) {
    let cur = INSTALLED.with(|c| c.get());
    if std::ptr::eq(cur, g) {
        return;
    }
    if cur.is_null() {
        OWN.with(|o| {
            let mut o = o.borrow_mut();
            let own = o.get_or_insert_with(|| set.image());
            set.save(own);
        });
        crate::base::context::on_leave(restore_worker_tls);
    } else if cur != ended_mark() {
        save_installed(set, cur);
    }
    set.load(img);
    INSTALLED.with(|c| c.set(g));
}

/// Saves the values of the installed thread `cur` into its image.
fn save_installed(set: &tls::SwapSet, cur: *const GreenShared) {
    // SAFETY: see `INSTALLED`: `cur` is alive (in `LIVE`, which holds an
    // `Arc` of it), started on this worker, and not running: its body is
    // touched here, on its home, outside its resume, and it is not the
    // thread whose body the caller holds (that one is `g` in `install`,
    // and `restore_worker_tls` is not called with a body held).
    let body = unsafe { (*cur).body() };
    // SAFETY: as above (the body's rules hold for its run part).
    if let Some(img) = body.as_ref().and_then(|b| unsafe { b.image() }) {
        set.save(img);
    }
}

/// Puts the worker's own values of the swap set back, keeping the
/// installed thread's in its image: before code other than green threads
/// runs on the worker (async tasks, tokio's drivers), before a thread is
/// ended, when the worker stops.
pub(crate) fn restore_worker_tls() {
    let cur = INSTALLED.with(|c| c.replace(std::ptr::null()));
    if cur.is_null() {
        return;
    }
    let Some(set) = tls::swap_set() else { return };
    if cur != ended_mark() {
        save_installed(set, cur);
    }
    load_own(set);
}

/// Puts the worker's own values (kept in `OWN`) in place.
fn load_own(set: &tls::SwapSet) {
    OWN.with(|o| {
        if let Some(own) = o.borrow_mut().as_mut() {
            set.load(own);
        }
    });
}

/// `g` has ended: if its values are installed, they are dead (not saved);
/// the worker's own go back in place of them at the next restore, and a
/// green thread installed next overwrites them (a spawn and join costs no
/// copy of the worker's own values).
fn uninstall_ended(g: &GreenShared) {
    INSTALLED.with(|c| {
        if std::ptr::eq(c.get(), g) {
            c.set(ended_mark());
        }
    });
}

/// The running worker's green counters (set around each resume).
fn with_worker(f: impl FnOnce(&thread_stats::Counters)) {
    let w = WORKER_COUNTERS.with(|c| c.get());
    // SAFETY: set by `GreenShared::run` to the worker's own counters (which
    // live as long as its scheduler, held by the worker during the run) only
    // while it resumes a thread; null otherwise.
    if let Some(w) = unsafe { w.as_ref() } {
        f(w);
    }
}

/// Takes a thread off this worker's list of live threads (it ended); a
/// second call does nothing (its slot may be another thread's by then).
fn forget_live(g: &GreenShared) {
    let at = g.live_key.swap(0, Ordering::Relaxed);
    if at != 0 {
        let _ = LIVE.try_with(|l| l.borrow_mut().try_remove(at - 1));
    }
}

fn home_token() -> usize {
    HOME_TOKEN.with(|t| t as *const u8 as usize)
}

/// The green thread calling, if any.
pub(crate) fn current() -> Option<&'static GreenShared> {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: set only while the worker resumes that thread, whose queue
    // entry holds an `Arc` of it for at least as long; the thread itself
    // (the only code that runs meanwhile on this worker) reads it.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Inside a green thread: waits for a wake-up of the thread's waker, for
/// `cause` (`detail`: the descriptor, deadline or thread it waits on).
/// Returns at once (spuriously) if one came since the last [`begin_look`].
///
/// `in_hook`: called from the park hook's wait (`park.rs`), whose frames
/// between linger's wrapper and here are all this crate's own code, none
/// holding a lock: the switch skips walking them again
/// (`linger::park::pause_in_hook`).
pub(crate) fn park(cause: Cause, detail: u64, in_hook: bool) {
    let Some(g) = current() else { return };
    if g.woken.load(Ordering::Acquire) {
        return;
    }
    g.status.parking(cause, detail);
    g.status.counters.parked(cause);
    with_worker(|w| w.parked(cause));
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "turquoise::thread", id = g.thread.id().0, name = g.thread.name(), %cause, detail, "park");
    g.why.store(PARK, Ordering::Relaxed);
    if in_hook {
        // SAFETY: see `in_hook`: the frames between the wrapper and here
        // (`park.rs`'s hook methods, `block_on_in_hook`, this one) run this
        // crate's code, and none holds a lock at this point: the futures
        // they polled (the wait cell, tokio's sleep or blocking-pool
        // handle) have returned from their polls, and the table and status
        // updates were made in `critical` scopes that are closed.
        unsafe { linger::park::pause_in_hook() };
    } else {
        linger::pause();
    }
}

/// Inside a green thread: goes behind the other runnable work.
pub(crate) fn yield_now() {
    if let Some(g) = current() {
        g.why.store(YIELD, Ordering::Relaxed);
        linger::pause();
    }
}

/// Inside a green thread: the waker that unparks it, after clearing the
/// record of earlier wake-ups (call before each look at what it waits for).
pub(crate) fn begin_look() -> Option<Waker> {
    let g = current()?;
    g.woken.store(false, Ordering::Relaxed);
    // SAFETY (of the `Arc` below): `g` lives in an `Arc` (its queue
    // entry's, its list's); we make a new strong reference from it.
    let arc = unsafe {
        Arc::increment_strong_count(g as *const GreenShared);
        Arc::from_raw(g as *const GreenShared)
    };
    Some(Waker::from(arc))
}

/// Registers a thread-local destructor for the calling green thread, if
/// `obj` is one of its own thread-locals (in its image); false otherwise:
/// outside a green thread, and for the runtime's thread-locals, which are
/// the worker's and die with it (linger's stack pool, first touched inside
/// a green thread, was destroyed with that thread before this check).
pub(crate) fn register_dtor(dtor: unsafe extern "C" fn(*mut libc::c_void), obj: *mut libc::c_void) -> bool {
    match current() {
        Some(g) if g.own_tls && tls::swap_set().is_some_and(|s| s.holds(obj as usize)) => {
            // Locks taken inside a green thread are taken in `critical`: a
            // thread stopped holding one would block its worker's next taker.
            linger::critical(|| g.dtors.lock().unwrap_or_else(|e| e.into_inner()).push((dtor, obj as usize)));
            true
        }
        _ => false,
    }
}

/// Runs the destructors registered so far, newest first, until none is
/// left (a destructor may register more). On the thread's stack at its end,
/// or on its home worker with its image installed when it is cancelled.
fn run_dtors(g: &GreenShared) {
    loop {
        let next = linger::critical(|| g.dtors.lock().unwrap_or_else(|e| e.into_inner()).pop());
        let Some((f, obj)) = next else { return };
        // SAFETY: registered by std (or C++) for this thread's object, to
        // be called once at the thread's end, which this is.
        unsafe { f(obj as *mut libc::c_void) };
    }
}

/// Gives back the std `Thread` the thread made for itself, if it has its
/// own thread-locals (`tls::SwapSet::release_std_thread`). On its stack at
/// its end, or on its home with its image installed when it is cancelled.
fn release_std_thread(g: &GreenShared) {
    if g.own_tls {
        if let Some(set) = tls::swap_set() {
            set.release_std_thread();
        }
    }
}

/// How a resume of the function went.
enum Step {
    /// It paused: at a park or yield (`yielded`), or stopped by its slice.
    Paused { yielded: bool },
    /// It ended; the outcome waits in the body for `Body::close`.
    Ended,
}

/// The typed part of a green thread: its function and where its value
/// goes, behind a trait so that the record and the queues are not generic.
trait Body: Send + Sync {
    /// Resumes the function once (the worker's run of it).
    ///
    /// # Safety (every `unsafe` method here)
    /// Under [`GreenShared::body`]'s rules: on the one thread that may
    /// touch the body now, with no other borrow of its run part alive.
    unsafe fn resume(&self, g: &GreenShared, start: u64, worker: Option<&thread_stats::Counters>) -> Step;
    /// Its image of the thread-locals, if it has its own.
    #[allow(clippy::mut_from_ref)]
    unsafe fn image(&self) -> Option<&mut Image>;
    /// Cancels the function where it is (not during a resume); `None` if it
    /// had ended.
    unsafe fn cancel(&self) -> Option<linger::Cancelled>;
    /// Tells the handle why there is no value.
    fn fail(&self, e: JoinError);
    /// At the thread's end: hands the outcome of an ended resume to the
    /// handle, and gives back what the run part holds (the function, the
    /// image; the allocation lives on while the handle holds it). Called
    /// once the thread is off the worker's lists and the dump's registry: a
    /// joiner never sees the thread it joined still listed.
    unsafe fn close(&self);
}

/// A green thread's typed part, one allocation shared by its record and
/// its handle: what the worker runs, and the cell the handle takes the
/// value from (they were a box and an `Arc` of their own: issue 28, spawn
/// with fewer allocations).
struct Typed<T> {
    run: UnsafeCell<TypedRun<T>>,
    out: JoinCell<T>,
}

struct TypedRun<T> {
    linger: Option<Linger<T>>,
    image: Option<Image>,
    /// How it ended, until `close` hands it over.
    outcome: Option<Result<T, JoinError>>,
}

// SAFETY: `run` is touched only through `Body`'s unsafe methods, under
// `GreenShared::body`'s rules (one thread at a time, as the record's own
// body); the handle, on any thread, touches only `out`, a `JoinCell`,
// which is `Sync` for a `Send` value.
unsafe impl<T: Send> Sync for Typed<T> {}

impl<T: Send> crate::preemptible::task::HasCell<T> for Typed<T> {
    fn cell(&self) -> &JoinCell<T> {
        &self.out
    }
}

impl<T: Send + 'static> Body for Typed<T> {
    unsafe fn resume(&self, g: &GreenShared, start: u64, worker: Option<&thread_stats::Counters>) -> Step {
        // SAFETY: the caller's promise (see the trait).
        let run = unsafe { &mut *self.run.get() };
        let Some(l) = run.linger.as_mut() else { return Step::Ended };
        let r = if g.cooperative {
            // Never stopped: each slice that passes bumps the worker's flag,
            // which the activity's yield checks read (`activity::checkpoint`).
            let (r, periods) = DUE.with(|due| {
                due.store(0, Ordering::Relaxed);
                let r = linger::resume_contained_cooperative(l, g.slice, due);
                (r, due.swap(0, Ordering::Relaxed))
            });
            if periods > 0 {
                crate::base::context::slice_used();
            }
            if periods > 1 {
                g.status.counters.overran(periods);
                if let Some(w) = worker {
                    w.overran(periods);
                }
                #[cfg(feature = "tracing")]
                tracing::warn!(target: "turquoise::thread", id = g.thread.id().0, name = g.thread.name(), slices = periods - 1, "an activity ran past its slice without a yield check");
            }
            r
        } else {
            // Looks for waiting work at intervals of the worker's pace, and
            // lets the run go on while none waits (`pace.rs`).
            let look = crate::base::pace::Look {
                waits: &|| g.work_waits() || super::poller::ready_now(),
                others: &|| LIVE.with(|l| l.borrow().len() > 1),
            };
            let run = crate::base::pace::run(l, g.slice, start, &look);
            if run.looks > 0 {
                g.status.counters.looked(run.looks);
                if let Some(w) = worker {
                    w.looked(run.looks);
                }
            }
            run.result
        };
        let failed = match r {
            Ok(None) => None,
            // Raised in the thread, ended inside it (its unwinding ran its
            // destructors): the handle's `JoinError::Panic`.
            Ok(Some(linger::Ended::Panicked(p))) => Some(p),
            Ok(Some(linger::Ended::Exited(value))) => Some(Box::new(crate::thread::Exited { value }) as Box<dyn std::any::Any + Send>),
            // Abandoned by linger (which reported it).
            Err(linger::Error::StackOverflow { stack_size }) => Some(Box::new(crate::thread::StackOverflow { stack_size }) as _),
            Err(e) => Some(Box::new(format!("turquoise: cannot resume a green thread: {e}")) as _),
        };
        if let Some(p) = failed {
            run.linger = None;
            run.outcome = Some(Err(JoinError::Panic(p)));
            return Step::Ended;
        }
        match run.linger.take() {
            Some(Linger::Completion(v)) => {
                run.outcome = Some(Ok(v));
                Step::Ended
            }
            Some(Linger::Continuation(c)) => {
                let yielded = c.yielded();
                run.linger = Some(Linger::Continuation(c));
                Step::Paused { yielded }
            }
            Some(Linger::Poison) | None => {
                run.outcome = Some(Err(JoinError::Panic(Box::new("turquoise: a green thread's function was poisoned"))));
                Step::Ended
            }
        }
    }

    unsafe fn image(&self) -> Option<&mut Image> {
        // SAFETY: the caller's promise.
        unsafe { &mut *self.run.get() }.image.as_mut()
    }

    unsafe fn cancel(&self) -> Option<linger::Cancelled> {
        // SAFETY: the caller's promise.
        unsafe { &mut *self.run.get() }.linger.take().map(|mut l| l.cancel())
    }

    fn fail(&self, e: JoinError) {
        self.out.complete(Err(e));
    }

    unsafe fn close(&self) {
        // SAFETY: the caller's promise.
        let run = unsafe { &mut *self.run.get() };
        if let Some(o) = run.outcome.take() {
            self.out.complete(o);
        }
        run.linger = None;
        run.image = None;
    }
}

impl GreenShared {
    /// Work waits for the worker running this thread (its own
    /// scheduler's), besides this thread. False off the workers.
    fn work_waits(&self) -> bool {
        on_worker_of(&self.sched).is_some_and(|(s, i)| s.work_waits(i))
    }

    fn on_home(&self) -> bool {
        let h = self.home.load(Ordering::Relaxed);
        h == 0 || h == home_token()
    }

    fn is_started(&self) -> bool {
        self.home.load(Ordering::Relaxed) != 0
    }

    /// The body, on the thread that may touch it.
    ///
    /// # Safety
    /// See the `Sync` impl: on the home worker (or, before the first resume,
    /// on the worker that took the thread from a queue), and not inside a
    /// resume of this thread.
    #[allow(clippy::mut_from_ref)]
    unsafe fn body(&self) -> &mut Option<Arc<dyn Body>> {
        // SAFETY: the caller's promise.
        unsafe { &mut *self.body.get() }
    }

    /// Makes this worker the thread's home, for good: from its first
    /// resume, or (an activity) from its creation.
    fn make_home(self: &Arc<Self>) {
        self.home.store(home_token(), Ordering::Relaxed);
        let w = crate::base::context::current_worker().map_or(0, |w| w + 1);
        self.status.worker.store(w, Ordering::Relaxed);
        let key = LIVE.with(|l| l.borrow_mut().insert(self.clone()));
        self.live_key.store(key + 1, Ordering::Relaxed);
    }

    /// Cancels the thread at its next turn (its handle's `cancel`).
    pub(crate) fn abort(self: &Arc<Self>) {
        self.aborted.store(true, Ordering::Release);
        self.wake_by_ref();
    }

    /// Ends the thread where it is (on its home, or before it started):
    /// a parked or yielded thread is unwound, a stopped one reclaimed (the
    /// core's rules, `docs/safety.md`), then its thread-local destructors
    /// run with its image installed. Its handle learns `why` (`None`: how
    /// the cancel went) unless it had its outcome.
    ///
    /// # Safety
    /// As [`GreenShared::body`].
    unsafe fn end(&self, why: Option<JoinError>) {
        let started = self.is_started();
        if started {
            // The swaps below exchange with the worker's own values. (Only
            // a started thread's end: that is never inside a run, see
            // `dropped_unrun`; an unstarted one swaps nothing.)
            restore_worker_tls();
        }
        // SAFETY: the caller's promise.
        let slot = unsafe { self.body() };
        let Some(body) = slot.take() else { return };
        // SAFETY (of each use of the body's run part below): the caller's
        // promise, as for `body()`; each borrow ends before the next.
        let set = tls::swap_set().filter(|_| started);
        if let (Some(set), Some(img)) = (set, unsafe { body.image() }) {
            set.swap(img);
        }
        // Not `CURRENT`: this runs on the worker's stack, where the thread
        // cannot park (its blocking calls block the worker meanwhile).
        // SAFETY: as above.
        let how = unsafe { body.cancel() };
        run_dtors(self);
        // SAFETY: as above.
        if set.is_some() && unsafe { body.image() }.is_some() {
            release_std_thread(self);
        }
        // SAFETY: as above.
        if let (Some(set), Some(img)) = (set, unsafe { body.image() }) {
            set.swap(img);
        }
        let e = why.unwrap_or(if how == Some(linger::Cancelled::Reclaimed) { JoinError::Reclaimed } else { JoinError::Cancelled });
        // Off the lists first: a joiner never sees it listed.
        self.finished();
        // SAFETY: as above.
        unsafe { body.close() };
        body.fail(e);
    }

    /// It has ended: off the queues and lists for good.
    fn finished(&self) {
        uninstall_ended(self);
        self.state.store(DONE, Ordering::Release);
        self.status.finished();
        // In `critical`: this may run inside a green thread (an unstarted
        // thread dropped unrun by its spawner at shutdown).
        linger::critical(|| REGISTRY.unregister(&self.registered));
        if self.is_started() {
            forget_live(self);
        }
    }
}

impl Run for GreenShared {
    fn run(&self) -> Ran {
        if !self.on_home() {
            // Started elsewhere: never resumed here (wake-ups go home).
            return Ran::Off;
        }
        if self.aborted.load(Ordering::Acquire) {
            // SAFETY: on its home (or unstarted, taken from a queue), not
            // in a resume of it.
            unsafe { self.end(None) };
            return Ran::Off;
        }
        self.state.store(RUNNING, Ordering::Relaxed);
        if !self.is_started() {
            // SAFETY (of the `Arc`): queued entries hold an `Arc` of this
            // record; `make_home` keeps one more in the worker's list.
            let me = unsafe {
                Arc::increment_strong_count(self as *const GreenShared);
                Arc::from_raw(self as *const GreenShared)
            };
            me.make_home();
        }
        // SAFETY: on its home, in its worker's run of it.
        let Some(body) = (unsafe { self.body() }).as_ref() else { return Ran::Off };
        // SAFETY: as above (this run is the body's one user now).
        match (tls::swap_set(), unsafe { body.image() }) {
            (Some(set), Some(img)) => install(set, self, img),
            // It shares the worker's thread-locals.
            _ => restore_worker_tls(),
        }
        let worker = crate::base::context::green_counters();
        let (waited, start) = self.status.running();
        // SAFETY: see `with_worker`.
        let worker = unsafe { worker.as_ref() };
        if let Some(w) = worker {
            w.switched_in(waited);
        }
        CURRENT.with(|c| c.set(self));
        WORKER_COUNTERS.with(|c| c.set(worker.map_or(std::ptr::null(), |w| w as *const _)));
        // SAFETY: as above.
        // Whatever the thread's code traces is inside its span (a no-op
        // unless a subscriber wants TRACE of `turquoise::thread`).
        #[cfg(feature = "tracing")]
        let _span = tracing::trace_span!(target: "turquoise::thread", "green_thread", id = self.thread.id.0, name = self.thread.name()).entered();
        let step = unsafe { body.resume(self, start, worker) };
        WORKER_COUNTERS.with(|c| c.set(std::ptr::null()));
        CURRENT.with(|c| c.set(std::ptr::null()));
        let yielded = match step {
            Step::Ended => {
                self.polls.add(false, None);
                crate::base::context::count_poll(false, None);
                self.finished();
                // SAFETY: on its home, the resume is over.
                if let Some(body) = unsafe { self.body() }.take() {
                    // SAFETY: as above.
                    unsafe { body.close() };
                }
                return Ran::Off;
            }
            Step::Paused { yielded } => yielded,
        };
        if !yielded {
            let stop = linger::last_preemption();
            self.polls.add(true, stop);
            crate::base::context::count_poll(true, stop);
            self.status.counters.preempted();
            if let Some(w) = worker {
                w.preempted();
            }
            self.status.runnable(stop.is_some_and(|p| p.in_wait));
            self.state.store(QUEUED, Ordering::Relaxed);
            return Ran::Stopped;
        }
        self.polls.add(false, None);
        crate::base::context::count_poll(false, None);
        let why = self.why.swap(NONE, Ordering::Relaxed);
        // A cancel's wake-up counts though the park began after it: the
        // park's fresh look (`begin_look`) cleared `woken`, not `aborted`.
        // Without this, a thread cancelled as it was about to park (a
        // sleep just after its spawn) slept on, and its joiner with it.
        if why != PARK || self.woken.load(Ordering::Acquire) || self.aborted.load(Ordering::Acquire) {
            // A yield (ours, or `linger::pause` called by the thread's
            // code); or a park whose wake-up (or cancel) already came.
            if why != PARK {
                self.status.counters.yielded();
                if let Some(w) = worker {
                    w.yielded();
                }
            }
            self.status.runnable(false);
            self.state.store(QUEUED, Ordering::Relaxed);
            return Ran::Ready;
        }
        // Idle first, then (after `parked`'s fence) a last look at `woken`
        // and `aborted`: a waker or a cancel that came meanwhile saw the
        // thread running and left the queueing to us (see the module doc;
        // `abort` stores `aborted` before the waker's fence).
        // (Release: a waker that finds it idle sees its home.)
        self.state.store(IDLE, Ordering::Release);
        if !self.status.parked(&self.woken) || self.aborted.load(Ordering::Relaxed) {
            self.status.runnable(false);
            if self.state.compare_exchange(IDLE, QUEUED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                return Ran::Ready;
            }
        }
        Ran::Off
    }

    fn dropped_unrun(&self) {
        // A started thread is ended by its home outside any run: a queue
        // entry dropped inside a preemptible function (a green thread that
        // wakes another after shutdown began) leaves it to `kill_live`, as
        // one dropped elsewhere does. An unstarted one has no frames and no
        // installed values: ended here, wherever this is.
        if self.on_home() && !(self.is_started() && linger::is_preemptible()) {
            // SAFETY: unstarted (nothing runs it: this was its queue entry),
            // or on its home outside any resume (not inside any function).
            unsafe { self.end(Some(JoinError::Cancelled)) };
        }
    }
}

/// Cancels the green threads that started on this worker and are still
/// alive: called by the worker when its loop has ended, inside its runtime.
pub(crate) fn kill_live() {
    loop {
        let batch: Vec<Arc<GreenShared>> = LIVE.try_with(|l| l.borrow_mut().drain().collect()).unwrap_or_default();
        for g in &batch {
            g.live_key.store(0, Ordering::Relaxed);
        }
        if batch.is_empty() {
            return;
        }
        for g in batch {
            // SAFETY: on its home (the list is the home's), whose loop has
            // ended: no resume of it runs.
            unsafe { g.end(Some(JoinError::Cancelled)) };
        }
    }
}

/// What a green thread is made with.
pub(crate) struct Spec {
    pub(crate) thread: Thread,
    pub(crate) stack_size: Option<usize>,
    /// Its slice; for an activity, the period of its yield checks' flag.
    pub(crate) slice: Duration,
    /// It has its own image of the program's thread-locals.
    pub(crate) own_tls: bool,
    /// An activity (see `activity.rs`).
    pub(crate) cooperative: bool,
    /// The park hook its blocking calls go to (`park.rs`, which stands
    /// above the records).
    pub(crate) park: Arc<dyn linger::park::Park>,
}

/// A spawned green thread: its record, and where its value comes from
/// (the spawner makes the handle of them, `join.rs`).
pub(crate) struct Spawned<T> {
    pub(crate) record: Arc<GreenShared>,
    pub(crate) wait: Wait<T>,
}

/// Sets a green thread up and queues it on `sched`'s workers. Its stack is
/// taken now, so that running out of memory or stacks is the spawner's
/// error.
pub(crate) fn spawn<F, T, S: Queues + 'static>(sched: &Arc<S>, f: F, spec: Spec) -> Result<Spawned<T>, linger::Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (record, wait) = build(sched, f, spec, false)?;
    sched.schedule_green(GreenJob::new(record.clone()), 0);
    Ok(Spawned { record, wait })
}

/// An activity, for the calling worker (see `activity.rs`): started here,
/// resumed and ended on this thread only, cooperatively.
///
/// # Safety
/// Called on a worker thread of `sched`. `f` and what it returns need not
/// be `Send` (the caller wraps them in `activity::HomeBound`): the linger
/// function holding `f` is launched here, not migratable, the record is
/// homed here from the start (so neither a run nor an end elsewhere touches
/// it), and the worker ends it at shutdown.
pub(crate) unsafe fn spawn_local<F, T, S: Queues + 'static>(sched: &Arc<S>, f: F, spec: Spec) -> Result<Spawned<T>, linger::Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (record, wait) = build(sched, f, spec, true)?;
    record.make_home();
    let home = record.status.worker.load(Ordering::Relaxed);
    sched.schedule_green(GreenJob::new(record.clone()), home);
    Ok(Spawned { record, wait })
}

fn build<F, T, S: Queues + 'static>(sched: &Arc<S>, f: F, spec: Spec, local: bool) -> Result<(Arc<GreenShared>, Wait<T>), linger::Error>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    crate::base::rules::install();
    let Spec { thread, stack_size, slice, own_tls, cooperative, park } = spec;
    // Its thread-locals die with it, on its stack, as a pthread's: after
    // it returns, panics or exits (`pthread_exit`'s forced unwind runs
    // this drop too). Panics and exits are not caught here: linger
    // catches them at the function's base and hands them back as values
    // (`resume_contained`); a `catch_unwind` here would meet the forced
    // unwind of a `pthread_exit` and abort the process.
    struct AtEnd(Weak<GreenShared>);
    impl Drop for AtEnd {
        fn drop(&mut self) {
            if let Some(g) = self.0.upgrade() {
                run_dtors(&g);
                release_std_thread(&g);
            }
        }
    }
    // The handle's park token reaches the record: made with it, weakly.
    let shared = Arc::new_cyclic(|me: &Weak<GreenShared>| GreenShared {
        woken: AtomicBool::new(false),
        why: AtomicU8::new(NONE),
        state: AtomicU8::new(QUEUED),
        aborted: AtomicBool::new(false),
        thread: Thread { unparker: me.clone() as Weak<dyn crate::green::types::Unpark>, ..thread },
        own_tls,
        slice,
        cooperative: cooperative || local,
        home: AtomicUsize::new(0),
        live_key: AtomicUsize::new(0),
        registered: thread_stats::Registered::none(),
        sched: Arc::downgrade(sched) as Weak<dyn Queues>,
        dtors: Mutex::new(Vec::new()),
        status: Status::default(),
        polls: PollCounters::default(),
        body: UnsafeCell::new(None),
        park_token: AtomicBool::new(false),
    });
    let at_end = AtEnd(Arc::downgrade(&shared));
    let body = move || {
        let _at_end = at_end;
        f()
    };
    // Its blocking calls park it (`park.rs`); a wait inside libc's
    // synchronisation functions (a pthread mutex held by another green
    // thread of its worker) is stopped at its slice like any code.
    // With its own thread-locals it has its own std `Thread` (its image
    // holds std's current-thread slots), so std's parks and channel
    // waits are stopped at its slice too (`Builder::stop_in_std_waits`).
    // (The set is built under a `OnceLock` the worker also takes: not
    // stopped half-way.)
    let own_std_thread = own_tls && linger::critical(|| tls::swap_set().is_some());
    let mut b = linger::Builder::new()
        .park_with(park)
        .stop_in_futex_waits(true)
        .stop_in_std_waits(own_std_thread);
    if let Some(s) = stack_size {
        b = b.stack_size(s);
    }
    // SAFETY (migratable): the function is resumed on another thread
    // than the one that launched it only before its first instruction
    // (stolen while unstarted); once started it runs on its home worker
    // only (every wake-up queues it there), so no thread-local address it
    // computed is ever used on another thread. An activity is not: it
    // stays on the thread that launches it here.
    let l = unsafe { b.migratable(!local) }.launch(body, Duration::ZERO)?;
    // The set is built once (reading the executable's symbols), under
    // a `OnceLock` the worker also takes: not stopped half-way.
    let image = linger::critical(|| tls::swap_set().filter(|_| own_tls).map(|s| s.image()));
    let typed = Arc::new(Typed { run: UnsafeCell::new(TypedRun { linger: Some(l), image, outcome: None }), out: JoinCell::new() });
    let out: Arc<dyn crate::preemptible::task::HasCell<T>> = typed.clone();
    // SAFETY: the record is not shared yet (no queue, list or waker has
    // it; `at_end`'s weak reference is used only when the function runs).
    unsafe { *shared.body.get() = Some(typed as Arc<dyn Body>) };
    linger::critical(|| REGISTRY.register(&shared, &shared.registered));
    Ok((shared, Wait::Cell(out)))
}
