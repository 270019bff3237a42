//! The workers: where each job runs, and where a stopped one resumes.
//!
//! A job is an async task (async-task's `Runnable`) or a green thread (its
//! record, `thread/green.rs`: not a task). Each worker thread has:
//!
//! - `local`, stealable (crossbeam-deque, FIFO): jobs at rest that may run
//!   anywhere (tasks new or woken after waiting, unstarted green threads).
//!   Idle workers steal half of another's, and take from the global
//!   injector, so load balances as in tokio.
//! - `pinned`, never stolen: jobs whose last run was stopped by its slice
//!   (or cut by the pace) on this thread. Such a run may hold this thread's
//!   thread-local addresses (`docs/safety.md`, "turquoise"), so it resumes
//!   here; it goes behind the jobs at rest that are waiting to run
//!   (libturquoise's requeue): those run first, until the oldest stopped job
//!   has waited one slice; it then runs every other turn (neither kind
//!   starves).
//! - `ready` and `READY_HERE`, never stolen: started green threads of this
//!   worker woken by other threads, and by the worker itself (no lock).
//!
//! Where a task goes when woken is decided from what its last poll left in
//! `Shared::pinned`, written by that poll before async-task can schedule it
//! again; a green thread goes home (`wake_green`). A job is in one queue at
//! a time (async-task schedules a task at most once until it runs, a green
//! thread's state allows one queue entry), so a stopped one is never run
//! elsewhere (`tests/runtime.rs` checks with `gettid`).
//!
//! Each worker thread runs a tokio current-thread runtime of its own, whose
//! drivers (I/O, timers) it turns itself: the worker loop is a task of that
//! runtime ([`Scheduler::worker`]). It runs jobs in batches and hands the
//! thread back to tokio between them: after a run its slice stopped, after
//! [`BATCH`] runs (tokio's own interval between looks at its drivers), and
//! when it has nothing to run. Then it waits in tokio's driver
//! (`epoll_wait`): I/O and timers registered from this thread wake it
//! without any other thread in the way. A push to the injector or to a busy
//! worker's local queue wakes one waiting worker (to take or steal it), a
//! push to a pinned or ready queue wakes that worker: through the waker of
//! its loop.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_task::{Runnable, ScheduleInfo};
use crossbeam_deque::{Injector, Steal, Stealer, Worker as Deque};

use crate::base::context;
use crate::base::counters::WorkerCounters as Counters;
use crate::preemptible::task::Shared;
use crate::thread::{GreenJob, Queues, Ran};

pub(crate) type Task = Runnable<Arc<Shared>>;

/// What the queues hold: an async task, or a green thread (which is not a
/// task: the worker resumes it itself, `thread/green.rs`).
pub(crate) enum Job {
    Task(Task),
    Green(GreenJob),
}

/// How often a worker looks at the injector before its own queues (as
/// tokio's 61: new tasks from outside are not starved by local ones). It
/// also looks there first after any poll that used a whole slice
/// ([`context::slice_used`]): counted in picks alone, a worker whose polls each take
/// a slice (activities that yield at their checks, stopped polls) would
/// make a task spawned from outside wait 61 slices (122 ms at 2 ms).
const INJECTOR_INTERVAL: u64 = 61;

/// A worker's own scheduling state.
struct Turn {
    /// Calls to `next` so far.
    tick: u64,
    /// When it last took a stopped task.
    pinned_at: Instant,
}

/// Polls in a batch at most, before the worker's drivers are turned (tokio
/// turns its drivers every 61 polls).
const BATCH: u32 = 61;

/// A queue other threads push to, with its length readable without the
/// lock: the worker looks at it before every pick, and locks it only when
/// something is there. A push the worker's look misses is found by its
/// last look before it waits, which takes the lock (`has_work_for`).
struct Inbox<T> {
    q: Mutex<VecDeque<T>>,
    len: AtomicUsize,
}

impl<T> Inbox<T> {
    fn new() -> Inbox<T> {
        Inbox { q: Mutex::new(VecDeque::new()), len: AtomicUsize::new(0) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, t: T) {
        let mut q = self.lock();
        q.push_back(t);
        self.len.store(q.len(), Ordering::Relaxed);
    }

    /// The front, if `take` says so; nothing (and no lock) if it looks
    /// empty.
    fn pop_if(&self, take: impl FnOnce(&T) -> bool) -> Option<T> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut q = self.lock();
        let t = if q.front().is_some_and(take) { q.pop_front() } else { None };
        self.len.store(q.len(), Ordering::Relaxed);
        t
    }

    /// Empty, under the lock (exact).
    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn looks_empty(&self) -> bool {
        self.len.load(Ordering::Relaxed) == 0
    }

    fn drain(&self) -> Vec<T> {
        let mut q = self.lock();
        self.len.store(0, Ordering::Relaxed);
        q.drain(..).collect()
    }
}

/// One worker's shared side.
pub(crate) struct Slot {
    stealer: Stealer<Job>,
    /// With when each was stopped.
    pinned: Inbox<(Instant, Job)>,
    /// Started green threads of this worker woken after a park or a yield
    /// by another thread: at rest, but never stolen (their frames may hold
    /// this thread's thread-local addresses). Those the worker wakes itself
    /// (a green thread waking another, its drivers) go to `READY_HERE`.
    ready: Inbox<Job>,
    /// The waker of the worker's loop while it waits for work.
    waker: Mutex<Option<Waker>>,
    /// The worker waits in tokio's driver (read on its own thread only:
    /// a driver that wakes a task there queues it and wakes this worker).
    waiting: AtomicBool,
    pub(crate) counters: Counters,
}

pub(crate) struct Scheduler {
    pub(crate) slots: Vec<Slot>,
    injector: Injector<Job>,
    /// Workers asleep (or about to be), by index.
    sleepers: Mutex<Vec<usize>>,
    n_sleepers: AtomicUsize,
    pub(crate) shutdown: AtomicBool,
    /// How long a stopped task waits at most for tasks at rest: the slice.
    patience: Duration,
    /// Green threads' granularity (`pace.rs`).
    granularity: Duration,
}

/// The scheduler as the green threads see it (`thread/green.rs`, below).
impl Queues for Scheduler {
    fn schedule_green(&self, job: GreenJob, home: usize) {
        Scheduler::schedule_green(self, job, home);
    }

    /// Work waits for worker `i`, besides the task it polls: in its
    /// queues, or in the injector (spawned from outside) when no worker
    /// sleeps. Not its drivers' events.
    fn work_waits(&self, i: usize) -> bool {
        let slot = &self.slots[i];
        // Stealable work is taken by a sleeping worker, woken for it.
        let stealable = self.n_sleepers.load(Ordering::Relaxed) == 0 && (!self.injector.is_empty() || !slot.stealer.is_empty());
        stealable
            || READY_HERE.with(|r| r.try_borrow().map_or(true, |r| !r.is_empty()))
            || !slot.ready.looks_empty()
            || !slot.pinned.looks_empty()
    }
}

impl Scheduler {
    /// A scheduler of `n` workers, and their owned queues (for `run`).
    pub(crate) fn new(n: usize, patience: Duration, granularity: Duration) -> (Arc<Scheduler>, Vec<Deque<Job>>) {
        let locals: Vec<Deque<Job>> = (0..n).map(|_| Deque::new_fifo()).collect();
        let slots = locals
            .iter()
            .map(|d| Slot {
                stealer: d.stealer(),
                pinned: Inbox::new(),
                ready: Inbox::new(),
                waker: Mutex::new(None),
                waiting: AtomicBool::new(false),
                counters: Counters::default(),
            })
            .collect();
        let s = Scheduler {
            slots,
            injector: Injector::new(),
            sleepers: Mutex::new(Vec::new()),
            n_sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            patience,
            granularity,
        };
        (Arc::new(s), locals)
    }

    /// Where a woken task goes (async-task's schedule function).
    pub(crate) fn schedule(&self, task: Task, info: ScheduleInfo) {
        // A yield and a wake both go to the back (FIFO).
        let _ = info;
        let pinned = task.metadata().pinned.load(Ordering::Relaxed);
        self.place(Job::Task(task), pinned, 0);
    }

    /// Queues a green thread, new or woken: `home` is 1 + its worker once it
    /// has one (0: any worker may take it; an activity has one from birth).
    pub(crate) fn schedule_green(&self, job: GreenJob, home: usize) {
        self.place(Job::Green(job), 0, home);
    }

    /// Queues `job`: on worker `pinned - 1`'s stopped queue, on worker
    /// `home - 1`'s ready queue, or where any worker may take it.
    fn place(&self, job: Job, pinned: usize, home: usize) {
        if self.shutdown.load(Ordering::Acquire) {
            // No worker will run it: cancelled (its handle says so).
            drop(job);
            return;
        }
        if pinned != 0 {
            let slot = &self.slots[pinned - 1];
            slot.pinned.push((Instant::now(), job));
            self.notify(pinned - 1);
            return;
        }
        if home != 0 {
            let w = home - 1;
            let here = context::worker_of(self as *const Scheduler as *const ()) == Some(w);
            // Woken by the worker itself: its own queue, no lock (the
            // borrow is never held across a run; if it were, the shared
            // queue takes it).
            let job = if here {
                READY_HERE.with(|r| match r.try_borrow_mut() {
                    Ok(mut r) => {
                        r.push_back(job);
                        None
                    }
                    Err(_) => Some(job),
                })
            } else {
                Some(job)
            };
            if let Some(job) = job {
                self.slots[w].ready.push(job);
            }
            // The worker itself looks at its queues before it waits again,
            // unless it waits already (woken by its driver).
            if !here || self.slots[w].waiting.load(Ordering::Relaxed) {
                self.notify(w);
            }
            return;
        }
        let me = context::worker_of(self as *const Scheduler as *const ());
        let job = if me.is_some() {
            LOCAL.with(|l| match l.try_borrow().ok().as_ref().and_then(|d| d.as_ref()) {
                Some(deque) => {
                    deque.push(job);
                    None
                }
                None => Some(job),
            })
        } else {
            Some(job)
        };
        match job {
            Some(job) => self.injector.push(job),
            // Woken by this worker's own driver while it waits: it runs the
            // task itself, next (where the I/O was registered).
            None => {
                // (`None`: pushed on this worker's own deque, so `me` is it.)
                let me = me.unwrap_or(0);
                if self.slots[me].waiting.load(Ordering::Relaxed) {
                    return self.notify(me);
                }
            }
        }
        self.wake_one();
    }

    /// Wakes one sleeping worker, if any (to take or steal new work).
    fn wake_one(&self) {
        // The task's push must be visible before we read the count, as the
        // count's increment before a parking worker looks at the queues
        // (`park`): otherwise each can miss the other (a store buffered past
        // a later load on x86) and the task sleeps with the worker.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.n_sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let w = self.sleepers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(w) = w {
            self.n_sleepers.fetch_sub(1, Ordering::SeqCst);
            self.notify(w);
        }
    }

    fn notify(&self, w: usize) {
        // The waker is taken under the lock that the waiting worker stores
        // it under before it looks at the queues a last time (`batch`): it
        // either finds the push, or its waker here.
        let waker = self.slots[w].waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Drops what is left in the shared queues once the workers have
    /// stopped (shutdown): jobs pushed to the injector that no worker took,
    /// or green threads pushed to a worker's ready inbox after it drained
    /// it. Dropped, they say so to their handles (a task's is cancelled, an
    /// unstarted green thread is ended here, a started one was ended by its
    /// home), instead of waiting for the last handle of the runtime. (Stopped
    /// jobs are left alone: their frames belong to their worker's thread.)
    pub(crate) fn drain_after_stop(&self) {
        loop {
            match self.injector.steal() {
                Steal::Success(job) => drop(job),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        for slot in &self.slots {
            drop(slot.ready.drain());
        }
    }

    /// Wakes every worker (shutdown).
    pub(crate) fn wake_all(&self) {
        for w in 0..self.slots.len() {
            self.notify(w);
        }
    }

    /// Worker `me`'s loop, until shutdown: the future its thread's tokio
    /// runtime blocks on.
    pub(crate) async fn worker(self: Arc<Self>, me: usize, local: Deque<Job>) {
        context::enter(Arc::as_ptr(&self) as *const (), me, &self.slots[me].counters);
        LOCAL.with(|l| *l.borrow_mut() = Some(local));
        crate::base::pace::start(self.granularity);
        let mut turn = Turn { tick: 0, pinned_at: Instant::now() };
        while poll_fn(|cx| {
            let r = self.batch(me, &mut turn, cx);
            context::leave();
            r
        })
        .await
        {
            // Let tokio turn this thread's drivers (without sleeping), then
            // go on.
            tokio::task::yield_now().await;
        }
        // What is left is dropped here, inside the worker's runtime (its
        // pinned tasks on their thread); dropping a task may wake others,
        // which then go to the injector.
        let local = LOCAL.with(|l| l.borrow_mut().take());
        if let Some(local) = local {
            while let Some(t) = local.pop() {
                drop(t);
            }
        }
        let left: Vec<(Instant, Job)> = self.slots[me].pinned.drain();
        drop(left);
        let ready: Vec<Job> = self.slots[me].ready.drain();
        drop(ready);
        let here: VecDeque<Job> = READY_HERE.with(|r| std::mem::take(&mut *r.borrow_mut()));
        drop(here);
        // Green threads that started here and wait elsewhere (parked on a
        // timer, a channel, a join): ended here, on their home.
        crate::thread::kill_live();
        context::exit();
    }

    /// Runs a batch of tasks: `Ready(true)` to let tokio turn the drivers
    /// and come back, `Ready(false)` at shutdown, `Pending` when there is
    /// nothing to run (then woken by `notify`, or by a driver).
    fn batch(&self, me: usize, turn: &mut Turn, cx: &mut Context<'_>) -> Poll<bool> {
        let slot = &self.slots[me];
        // Woken by a driver rather than by `notify`: no longer waiting.
        if slot.waiting.swap(false, Ordering::Relaxed) {
            self.unregister(me);
        }
        let mut polls = 0;
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                return Poll::Ready(false);
            }
            turn.tick += 1;
            // The deque is borrowed only to take a task, never while one
            // runs (a task's wakes push on it).
            let next = LOCAL.with(|l| self.next(me, l.borrow().as_ref().expect("worker deque"), turn));
            let Some(job) = next else {
                if self.wait(me, cx) {
                    return Poll::Pending;
                }
                continue;
            };
            let stopped = match job {
                Job::Task(task) => {
                    context::leave();
                    let shared = task.metadata().clone();
                    task.run();
                    // Stopped: pinned here, so not running anywhere else.
                    shared.pinned.load(Ordering::Relaxed) != 0
                }
                Job::Green(g) => match g.run() {
                    Ran::Off => {
                        g.release();
                        false
                    }
                    Ran::Ready => {
                        READY_HERE.with(|r| r.borrow_mut().push_back(Job::Green(g)));
                        false
                    }
                    Ran::Stopped => {
                        slot.pinned.push((Instant::now(), Job::Green(g)));
                        true
                    }
                },
            };
            polls += 1;
            // A stopped run took a whole slice, or was cut because work
            // waits (`pace.rs`): look at the drivers now, as after a batch (a
            // request that arrived meanwhile is seen within a slice, not
            // within a batch of slices), and at the injector first.
            if stopped || polls >= BATCH {
                if stopped {
                    context::slice_used();
                }
                return Poll::Ready(true);
            }
        }
    }

    /// Registers worker `me` as waiting; false if work came meanwhile.
    fn wait(&self, me: usize, cx: &mut Context<'_>) -> bool {
        let slot = &self.slots[me];
        if LOCAL.with(|l| l.borrow().as_ref().is_some_and(|d| !d.is_empty())) {
            return false;
        }
        *slot.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        {
            let mut s = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
            s.push(me);
            self.n_sleepers.fetch_add(1, Ordering::SeqCst);
        }
        // Registered first, checked second: a push after the check finds us
        // among the sleepers (or, for our pinned queue, finds our waker) and
        // wakes us (see the fence in `wake_one`).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.has_work_for(me) || self.shutdown.load(Ordering::Acquire) {
            self.unregister(me);
            slot.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
            return false;
        }
        slot.counters.parks.fetch_add(1, Ordering::Relaxed);
        slot.waiting.store(true, Ordering::Relaxed);
        crate::base::pace::idle();
        true
    }

    fn next(&self, me: usize, local: &Deque<Job>, turn: &mut Turn) -> Option<Job> {
        let slot = &self.slots[me];
        let tick = turn.tick;
        if tick.is_multiple_of(INJECTOR_INTERVAL) || context::take_slice_used() {
            if let Some(t) = self.take_injector(local) {
                return Some(t);
            }
        }
        // Tasks at rest (this worker's, then those woken from outside:
        // timers, I/O, other threads) before stopped ones, so that a short
        // request waits for at most the slice in progress, not for slices of
        // every stopped task. Neither kind starves the other, in time: a
        // stopped task that has waited a whole slice goes first once tasks
        // at rest have had a slice's worth of the worker since a stopped one
        // last went (two slices since it was taken). Alternating by turns
        // instead gave one 0.5 ms request per 5 ms slice of each long one:
        // with two long requests stopped, 180 short ones a second, fewer
        // than arrived (a 60-90 ms p99 at 5 ms slices in the benchmark).
        let pinned_at = turn.pinned_at;
        let overdue = slot.pinned.pop_if(|(at, _)| {
            let now = Instant::now();
            now.duration_since(*at) >= self.patience && now.duration_since(pinned_at) >= 2 * self.patience
        });
        if let Some((_, t)) = overdue {
            turn.pinned_at = Instant::now();
            return Some(t);
        }
        let pinned = || {
            let t = slot.pinned.pop_if(|_| true).map(|(_, t)| t);
            if t.is_some() {
                turn.pinned_at = Instant::now();
            }
            t
        };
        // Green threads woken on this worker and tasks at rest take turns.
        // Those it woke itself and those woken from elsewhere take turns too
        // (a ping-pong between two of its own must not starve the others).
        let here = || READY_HERE.with(|r| r.borrow_mut().pop_front());
        let elsewhere = || slot.ready.pop_if(|_| true);
        let ready = || if (tick >> 1) & 1 == 1 { elsewhere().or_else(here) } else { here().or_else(elsewhere) };
        let fresh = || {
            let first = if tick.is_multiple_of(2) { ready().or_else(|| local.pop()) } else { local.pop().or_else(ready) };
            first.or_else(|| self.take_injector(local))
        };
        let found = fresh().or_else(pinned);
        if found.is_some() {
            return found;
        }
        self.steal(me, local, tick)
    }

    fn take_injector(&self, local: &Deque<Job>) -> Option<Job> {
        loop {
            match self.injector.steal_batch_and_pop(local) {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    fn steal(&self, me: usize, local: &Deque<Job>, tick: u64) -> Option<Job> {
        let n = self.slots.len();
        // Start somewhere different each time (cheap, not random).
        let start = (me + 1 + tick as usize) % n;
        for k in 0..n {
            let v = (start + k) % n;
            if v == me {
                continue;
            }
            loop {
                match self.slots[v].stealer.steal_batch_and_pop(local) {
                    Steal::Success(t) => {
                        self.slots[me].counters.steals.fetch_add(1, Ordering::Relaxed);
                        return Some(t);
                    }
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        None
    }

    fn has_work_for(&self, me: usize) -> bool {
        !self.injector.is_empty()
            || !self.slots[me].pinned.is_empty()
            || !self.slots[me].ready.is_empty()
            || READY_HERE.with(|r| !r.borrow().is_empty())
            || self.slots.iter().enumerate().any(|(i, s)| i != me && !s.stealer.is_empty())
    }

    fn unregister(&self, me: usize) {
        let mut s = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = s.iter().position(|&w| w == me) {
            s.swap_remove(i);
            self.n_sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Hands a new task to the workers.
    pub(crate) fn spawn(&self, task: Task) {
        task.schedule();
    }

}

thread_local! {
    /// Started green threads of this worker woken by the worker itself (see
    /// `Slot::ready`).
    static READY_HERE: std::cell::RefCell<VecDeque<Job>> = const { std::cell::RefCell::new(VecDeque::new()) };
    /// This worker's own deque, while `run` is on the stack.
    static LOCAL: std::cell::RefCell<Option<Deque<Job>>> = const { std::cell::RefCell::new(None) };
}
