//! The green thread as a runtime task: a linger function resumed by polls.
//!
//! Each poll of the task resumes the function for at most its slice. The
//! function ends a poll in one of three ways:
//!
//! - it *parks* ([`park`]): it asked to wait (a future it blocks on is
//!   pending) and paused; the task returns `Pending` and runs again when its
//!   waker fires;
//! - it *yields* ([`yield_now`]): the task wakes itself and goes behind the
//!   other runnable work;
//! - its slice ran out anywhere else: stopped, it is queued behind the work
//!   at rest (the scheduler's stopped queue), as a preempted poll is.
//!
//! **Where it runs.** Until its first instruction a green thread may be
//! stolen by any worker (nothing of any thread is in its frames yet). From
//! then on it runs on that worker only (its *home*): every later wake-up is
//! routed there (`Shared::home`, `Shared::pinned`). Code caches thread-local
//! addresses and values across any call, including the call that parks, so
//! no later point is safe to move it (`docs/safety.md`, "Green threads").
//!
//! **Thread-locals.** Around each resume the worker swaps in the thread's
//! image of the program's thread-locals (`tls.rs`), and swaps it out after.
//!
//! **No lost wake-up.** A park sets `why` and pauses. The slice may end
//! between the two (then the poll sees a stop, not a park, and the thread
//! pauses at its next resume); a wake may come at any point. The waker sets
//! `woken` before waking the task, and the thread clears it before each
//! look at what it waits for: a poll that ends in a park with `woken` set
//! wakes its task again (as `future.rs` does for preemptible futures).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use linger::Linger;

use super::stats::{self, Cause, Status};
use super::tls::{self, Image};
use super::Thread;

/// Why the function paused (read by the poll that resumed it).
const NONE: u8 = 0;
const PARK: u8 = 1;
const YIELD: u8 = 2;

/// A destructor of a thread-local registered inside a green thread (std's
/// `thread_local!` values with `Drop`, through `__cxa_thread_atexit_impl`).
type Dtor = (unsafe extern "C" fn(*mut libc::c_void), usize);

/// What the thread's own code and its task share.
pub(crate) struct GreenShared {
    /// The task that polled the thread last.
    outer: AtomicWaker,
    /// A wake-up came since the thread last looked (see the module doc).
    woken: AtomicBool,
    why: AtomicU8,
    pub(crate) thread: Thread,
    /// The thread has its own image of the thread-locals.
    own_tls: bool,
    /// Thread-local destructors registered by the thread, run at its end.
    dtors: Mutex<Vec<Dtor>>,
    /// Where it is, what it waits on, its counters.
    pub(crate) status: Status,
}

impl Wake for GreenShared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        // After the flag: see `Status::parked`.
        self.status.woken();
        self.outer.wake();
    }
}

std::thread_local! {
    /// The green thread running on this worker (null between resumes).
    static CURRENT: Cell<*const GreenShared> = const { Cell::new(std::ptr::null()) };
    /// This worker's started green threads, by id, for shutdown: each is
    /// cancelled here, on its home, before the worker's thread ends.
    static LIVE: RefCell<crate::id_map::IdMap<u64, Arc<dyn Kill>>> = RefCell::new(crate::id_map::IdMap::default());
    /// An address unique to this OS thread while it lives (identifies a
    /// green thread's home).
    static HOME_TOKEN: u8 = const { 0 };
    /// The worker's green counters while it resumes a thread.
    static WORKER_COUNTERS: Cell<*const stats::Counters> = const { Cell::new(std::ptr::null()) };
}

/// The running worker's green counters (set around each resume).
fn with_worker(f: impl FnOnce(&stats::Counters)) {
    let w = WORKER_COUNTERS.with(|c| c.get());
    // SAFETY: set by `Green::poll` to the worker's own counters (which live
    // as long as its scheduler, held by the worker during the poll) only
    // while it resumes a thread; null otherwise.
    if let Some(w) = unsafe { w.as_ref() } {
        f(w);
    }
}

/// Takes a thread off this worker's list of live threads (it ended).
fn forget_live(id: u64) {
    let _ = LIVE.try_with(|l| l.borrow_mut().remove(&id));
}

fn home_token() -> usize {
    HOME_TOKEN.with(|t| t as *const u8 as usize)
}

/// The green thread calling, if any.
pub(crate) fn current() -> Option<&'static GreenShared> {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: set only while the worker resumes that thread, whose task
    // holds an `Arc` of it for at least as long; the thread itself (the only
    // code that runs meanwhile on this worker) reads it.
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
    // SAFETY (of the `Arc` below): `g` lives in an `Arc` (the task's); we
    // make a new strong reference from it.
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

/// What only the home worker touches once the thread has started.
struct Body<T> {
    linger: Option<Linger<T>>,
    image: Option<Image>,
}

/// The thread's function and image, shared by its task and its worker's
/// list of live threads.
struct Record<T> {
    body: UnsafeCell<Body<T>>,
    /// The home worker's token (0 before the first resume).
    home: AtomicUsize,
    shared: Arc<GreenShared>,
}

// SAFETY: `body` is touched only on one thread at a time: before the first
// resume by whoever owns the task (it moves between threads as a whole,
// handed over by the run queues), and from then on only on the home worker,
// by its polls and by `kill` after its loop has ended (never during a
// poll). Everything in it is `Send`.
unsafe impl<T: Send> Sync for Record<T> {}

impl<T: Send> Record<T> {
    fn on_home(&self) -> bool {
        let h = self.home.load(Ordering::Relaxed);
        h == 0 || h == home_token()
    }

    /// Ends the thread where it is (on its home, or before it started):
    /// a parked or yielded thread is unwound, a stopped one reclaimed (the
    /// core's rules, `docs/safety.md`), then its thread-local destructors
    /// run with its image installed.
    fn end(&self) -> linger::Cancelled {
        // SAFETY: see the `Sync` impl: called on the home worker (or by the
        // task's owner before start), not during a poll of this thread.
        let body = unsafe { &mut *self.body.get() };
        let Some(mut l) = body.linger.take() else { return linger::Cancelled::NotNeeded };
        let started = self.home.load(Ordering::Relaxed) != 0;
        let set = tls::swap_set().filter(|_| started);
        if let (Some(set), Some(img)) = (set, body.image.as_mut()) {
            set.swap(img);
        }
        // Not `CURRENT`: this runs on the worker's stack, where the thread
        // cannot park (its blocking calls block the worker meanwhile).
        let how = l.cancel();
        run_dtors(&self.shared);
        if set.is_some() && body.image.is_some() {
            release_std_thread(&self.shared);
        }
        if let (Some(set), Some(img)) = (set, body.image.as_mut()) {
            set.swap(img);
        }
        body.image = None;
        how
    }
}

/// Ends a live thread at shutdown (type-erased for the worker's list).
trait Kill {
    fn kill(&self);
}

impl<T: Send> Kill for Record<T> {
    fn kill(&self) {
        let _ = self.end();
        // Its task, woken, is dropped by the stopping scheduler: the join
        // handle learns that the thread was cancelled.
        self.shared.outer.wake();
    }
}

/// Cancels the green threads that started on this worker and are still
/// alive: called by the worker when its loop has ended, inside its runtime.
pub(crate) fn kill_live() {
    loop {
        let batch: Vec<Arc<dyn Kill>> = LIVE.try_with(|l| l.borrow_mut().drain().map(|(_, k)| k).collect()).unwrap_or_default();
        if batch.is_empty() {
            return;
        }
        for k in batch {
            k.kill();
        }
    }
}

/// The task body of a green thread.
pub(crate) struct Green<T: Send + 'static> {
    cell: Arc<Record<T>>,
    /// Its slice; for an activity, the period of its yield checks' flag.
    slice: Duration,
    /// An activity: resumed cooperatively (never stopped by its slice).
    cooperative: bool,
    /// The last poll's slice ran out outside a park or yield.
    stopped: bool,
    last: Option<linger::Preemption>,
}

impl<T: Send + 'static> Green<T> {
    /// Sets the thread up (its stack is taken now, so that running out of
    /// memory or stacks is the spawner's error), unstarted.
    /// A green thread; `cooperative`: an activity (see `activity.rs`),
    /// whose `slice` is the period of its yield checks' flag.
    pub(crate) fn new<F>(f: F, thread: Thread, stack_size: Option<usize>, slice: Duration, own_tls: bool, cooperative: bool) -> Result<Green<T>, linger::Error>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        Green::build(f, thread, stack_size, slice, own_tls, cooperative, false)
    }

    /// An activity, for the calling worker (see `activity.rs`): started
    /// here, resumed and ended on this thread only, cooperatively.
    ///
    /// # Safety
    /// Called on a worker thread, whose task for it is then scheduled on
    /// that worker only (`Handle::spawn_green_on`). `f` and what it returns
    /// need not be `Send` (the caller wraps them in `activity::HomeBound`):
    /// the linger function holding `f` is launched here, not migratable,
    /// the record is homed here from the start (so neither a poll nor a
    /// drop elsewhere touches it), and the worker ends it at shutdown.
    pub(crate) unsafe fn new_local<F>(f: F, thread: Thread, stack_size: Option<usize>, slice: Duration, own_tls: bool) -> Result<Green<T>, linger::Error>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        Green::build(f, thread, stack_size, slice, own_tls, true, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn build<F>(
        f: F,
        thread: Thread,
        stack_size: Option<usize>,
        slice: Duration,
        own_tls: bool,
        cooperative: bool,
        local: bool,
    ) -> Result<Green<T>, linger::Error>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        crate::rules::install();
        let shared = Arc::new(GreenShared {
            outer: AtomicWaker::new(),
            woken: AtomicBool::new(false),
            why: AtomicU8::new(NONE),
            thread,
            own_tls,
            dtors: Mutex::new(Vec::new()),
            status: Status::default(),
        });
        linger::critical(|| stats::register(&shared));
        let g = shared.clone();
        // Its thread-locals die with it, on its stack, as a pthread's: after
        // it returns, panics or exits (`pthread_exit`'s forced unwind runs
        // this drop too). Panics and exits are not caught here: linger
        // catches them at the function's base and hands them back as values
        // (`resume_contained`); a `catch_unwind` here would meet the forced
        // unwind of a `pthread_exit` and abort the process.
        struct AtEnd(Arc<GreenShared>);
        impl Drop for AtEnd {
            fn drop(&mut self) {
                run_dtors(&self.0);
                release_std_thread(&self.0);
            }
        }
        let body = move || {
            let _at_end = AtEnd(g);
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
            .park_with(super::park::HOOK.clone())
            .stop_in_futex_waits(true)
            .stop_in_std_waits(own_std_thread);
        if let Some(s) = stack_size {
            b = b.stack_size(s);
        }
        // SAFETY (migratable): the function is resumed on another thread
        // than the one that launched it only before its first instruction
        // (stolen while unstarted); once started it runs on its home worker
        // only (the scheduler routes every wake-up there), so no
        // thread-local address it computed is ever used on another thread.
        // An activity is not: it stays on the thread that launches it here.
        let l = unsafe { b.migratable(!local) }.launch(body, Duration::ZERO)?;
        // The set is built once (reading the executable's symbols), under
        // a `OnceLock` the worker also takes: not stopped half-way.
        let image = linger::critical(|| tls::swap_set().filter(|_| own_tls).map(|s| s.image()));
        let cell = Arc::new(Record { body: UnsafeCell::new(Body { linger: Some(l), image }), home: AtomicUsize::new(0), shared });
        let g = Green { cell, slice, cooperative, stopped: false, last: None };
        if local {
            g.make_home();
        }
        Ok(g)
    }

    /// Makes this worker the thread's home, for good: from its first
    /// resume, or (an activity) from its creation.
    fn make_home(&self) {
        let g = &self.cell.shared;
        self.cell.home.store(home_token(), Ordering::Relaxed);
        g.status.worker.store(crate::scheduler::current_worker().map_or(0, |w| w + 1), Ordering::Relaxed);
        let k: Arc<dyn Kill> = self.cell.clone();
        LIVE.with(|l| l.borrow_mut().insert(g.thread.id().0, k));
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    pub(crate) fn last_preemption(&self) -> Option<linger::Preemption> {
        self.last
    }

    pub(crate) fn shared(&self) -> &Arc<GreenShared> {
        &self.cell.shared
    }

    /// Cancels the thread now, on its home (the task's abort): how it went.
    pub(crate) fn cancel(&mut self) -> linger::Cancelled {
        if !self.cell.on_home() {
            // Never the case for an aborted task's poll (routed home).
            return linger::Cancelled::NotNeeded;
        }
        let how = self.cell.end();
        if self.is_started() {
            forget_live(self.cell.shared.thread.id().0);
        }
        how
    }

    pub(crate) fn is_started(&self) -> bool {
        self.cell.home.load(Ordering::Relaxed) != 0
    }
}

impl<T: Send + 'static> Unpin for Green<T> {}

impl<T: Send + 'static> Future for Green<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        let cell = &*this.cell;
        this.last = None;
        if !cell.on_home() {
            // Started elsewhere: never resumed here (the scheduler routes
            // wake-ups home; this is a poll after its home has gone).
            return Poll::Pending;
        }
        let g = &cell.shared;
        g.outer.register(cx.waker());
        if cell.home.load(Ordering::Relaxed) == 0 {
            this.make_home();
        }
        // SAFETY: see `Record`'s `Sync` impl: we are on the home worker, in
        // its poll of this thread.
        let body = unsafe { &mut *cell.body.get() };
        let Some(l) = body.linger.as_mut() else { return Poll::Pending };
        let set = tls::swap_set();
        if let (Some(set), Some(img)) = (set, body.image.as_mut()) {
            set.swap(img);
        }
        let worker = crate::scheduler::green_counters();
        let (waited, start) = g.status.running();
        // SAFETY: see `with_worker`.
        let worker = unsafe { worker.as_ref() };
        if let Some(w) = worker {
            w.switched_in(waited);
        }
        CURRENT.with(|c| c.set(&**g));
        WORKER_COUNTERS.with(|c| c.set(worker.map_or(std::ptr::null(), |w| w as *const _)));
        let r = if this.cooperative {
            // Never stopped: each slice that passes bumps the worker's flag,
            // which the activity's yield checks read (`activity::checkpoint`).
            let (r, periods) = super::activity::DUE.with(|due| {
                due.store(0, Ordering::Relaxed);
                let r = linger::resume_contained_cooperative(l, this.slice, due);
                (r, due.swap(0, Ordering::Relaxed))
            });
            if periods > 0 {
                crate::scheduler::slice_used();
            }
            if periods > 1 {
                g.status.counters.overran(periods);
                if let Some(w) = worker {
                    w.overran(periods);
                }
                tracing::warn!(target: "turquoise::thread", id = g.thread.id().0, name = g.thread.name(), slices = periods - 1, "an activity ran past its slice without a yield check");
            }
            r
        } else {
            // Looks for waiting work at intervals of the worker's pace, and
            // lets the run go on while none waits (`pace.rs`).
            let look = crate::pace::Look {
                waits: &|| crate::scheduler::work_waits() || super::poller::ready_now(),
                others: &|| LIVE.with(|l| l.borrow().len() > 1),
            };
            let run = crate::pace::run(l, this.slice, start, &look);
            if run.looks > 0 {
                g.status.counters.looked(run.looks);
                if let Some(w) = worker {
                    w.looked(run.looks);
                }
            }
            run.result
        };
        WORKER_COUNTERS.with(|c| c.set(std::ptr::null()));
        CURRENT.with(|c| c.set(std::ptr::null()));
        if let (Some(set), Some(img)) = (set, body.image.as_mut()) {
            set.swap(img);
        }
        let ended = |body: &mut Body<T>| {
            body.linger = None;
            body.image = None;
            g.status.finished();
            forget_live(g.thread.id().0);
        };
        match r {
            Ok(None) => {}
            // Raised here, on the worker, with the worker's thread-locals
            // back (its panic count among them), after the thread's own
            // unwinding ended inside it: the task turns it into the handle's
            // `JoinError`.
            Ok(Some(linger::Ended::Panicked(p))) => {
                ended(body);
                std::panic::resume_unwind(p);
            }
            Ok(Some(linger::Ended::Exited(value))) => {
                ended(body);
                std::panic::resume_unwind(Box::new(super::Exited { value }));
            }
            // Abandoned by linger (which reported it): the handle's panic.
            Err(linger::Error::StackOverflow { stack_size }) => {
                body.linger = None;
                body.image = None;
                forget_live(g.thread.id().0);
                std::panic::resume_unwind(Box::new(super::StackOverflow { stack_size }));
            }
            Err(e) => panic!("turquoise: cannot resume a green thread: {e}"),
        }
        match body.linger.take() {
            Some(Linger::Completion(v)) => {
                this.stopped = false;
                ended(body);
                Poll::Ready(v)
            }
            Some(Linger::Continuation(c)) => {
                let yielded = c.yielded();
                let stop = if yielded { None } else { linger::last_preemption() };
                body.linger = Some(Linger::Continuation(c));
                let why = if yielded { g.why.swap(NONE, Ordering::Relaxed) } else { NONE };
                this.stopped = !yielded;
                if !yielded {
                    this.last = stop;
                    g.status.counters.preempted();
                    if let Some(w) = worker {
                        w.preempted();
                    }
                    g.status.runnable(stop.is_some_and(|p| p.in_wait));
                    cx.waker().wake_by_ref();
                } else if why != PARK || g.woken.load(Ordering::Acquire) {
                    // A yield (ours, or `linger::pause` called by the
                    // thread's code); or a park whose wake-up already came.
                    if why != PARK {
                        g.status.counters.yielded();
                        if let Some(w) = worker {
                            w.yielded();
                        }
                    }
                    g.status.runnable(false);
                    cx.waker().wake_by_ref();
                } else if !g.status.parked(&g.woken) {
                    // Woken between the look above and the parked mark:
                    // its waker may have seen the thread running, so it
                    // is made runnable here (the task is woken already).
                    g.status.runnable(false);
                }
                Poll::Pending
            }
            Some(Linger::Poison) | None => unreachable!("resume reported no error"),
        }
    }
}

impl<T: Send + 'static> Drop for Green<T> {
    fn drop(&mut self) {
        self.cell.shared.status.finished();
        stats::unregister(self.cell.shared.thread.id().0);
        // The task's waker: the task's record holds this thread's, which
        // would hold the task.
        drop(self.cell.shared.outer.take());
        // Started, and dropped away from its home (its task dropped by
        // another thread): the home worker ends it at shutdown, with its
        // image, where its frames' thread-local addresses are valid.
        if self.cell.on_home() {
            let _ = self.cell.end();
            if self.is_started() {
                forget_live(self.cell.shared.thread.id().0);
            }
        }
    }
}
