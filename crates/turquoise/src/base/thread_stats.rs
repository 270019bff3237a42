//! What green threads did and what they wait on: per-thread and per-worker
//! counters, a `tracing` event per park, and the list of live threads (the
//! analogue of a goroutine dump).

use std::fmt;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::base::clock::{self, ticks, ticks_to_duration};

/// Why a green thread parked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Cause {
    /// A descriptor not ready (a blocking call on a socket or pipe, `poll`...).
    Io = 0,
    /// A sleep or a timeout.
    Timer = 1,
    /// `join` on another green thread.
    Join = 2,
    /// A synchronisation primitive.
    Sync = 3,
    /// A future passed to `block_on`.
    Future = 4,
}

const CAUSES: usize = 5;

impl Cause {
    fn from_u8(v: u8) -> Option<Cause> {
        Some(match v {
            0 => Cause::Io,
            1 => Cause::Timer,
            2 => Cause::Join,
            3 => Cause::Sync,
            4 => Cause::Future,
            _ => return None,
        })
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::Io => "io",
            Cause::Timer => "timer",
            Cause::Join => "join",
            Cause::Sync => "sync",
            Cause::Future => "future",
        })
    }
}

/// Counters of a green thread (its `JoinHandle::thread_stats`), or summed
/// over a worker's green threads (`Runtime::worker_metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Times the thread was switched in (resumed).
    pub switches: u64,
    /// Times its slice ran out in the middle of its code.
    pub preemptions: u64,
    /// Yields (`yield_now`, `turq_yield`).
    pub yields: u64,
    /// Parks by cause.
    pub parks_io: u64,
    /// See [`Cause::Timer`].
    pub parks_timer: u64,
    /// See [`Cause::Join`].
    pub parks_join: u64,
    /// See [`Cause::Sync`].
    pub parks_sync: u64,
    /// See [`Cause::Future`].
    pub parks_future: u64,
    /// Time spent runnable but waiting for its worker (from a wake-up, a
    /// stop or a yield to the next resume).
    pub runnable_wait: Duration,
    /// Times its worker stopped it to look for waiting work before its
    /// slice was over, found none, and let it run on (`Builder::granularity`
    /// of the runtime).
    pub looks: u64,
    /// Activities only: slices that ended while it ran without a yield
    /// check answering them (`checkpoint`), each one the other activities
    /// of its worker waited through.
    pub overruns: u64,
}

impl ThreadStats {
    /// Parks of every cause.
    pub fn parks(&self) -> u64 {
        self.parks_io + self.parks_timer + self.parks_join + self.parks_sync + self.parks_future
    }
}

/// The same, as atomics with a single writer each (a thread's are written
/// by its home worker, a worker's by that worker): plain loads and stores,
/// no locked read-modify-writes on the switch path. Readers want a recent
/// value, not an ordering.
#[derive(Default)]
pub(crate) struct Counters {
    switches: AtomicU64,
    preemptions: AtomicU64,
    yields: AtomicU64,
    parks: [AtomicU64; CAUSES],
    /// In TSC ticks (converted when read).
    runnable_wait: AtomicU64,
    overruns: AtomicU64,
    looks: AtomicU64,
}

#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn switched_in(&self, waited_ticks: u64) {
        bump(&self.switches, 1);
        bump(&self.runnable_wait, waited_ticks);
    }
    pub(crate) fn preempted(&self) {
        bump(&self.preemptions, 1);
    }
    pub(crate) fn yielded(&self) {
        bump(&self.yields, 1);
    }
    pub(crate) fn looked(&self, n: u64) {
        bump(&self.looks, n);
    }
    /// An activity's resume ended `n` slices after the first (see
    /// [`ThreadStats::overruns`]).
    pub(crate) fn overran(&self, n: u32) {
        if n > 1 {
            bump(&self.overruns, u64::from(n - 1));
        }
    }
    pub(crate) fn parked(&self, c: Cause) {
        bump(&self.parks[c as usize], 1);
    }

    pub(crate) fn get(&self) -> ThreadStats {
        let p = |c: Cause| self.parks[c as usize].load(Ordering::Relaxed);
        ThreadStats {
            switches: self.switches.load(Ordering::Relaxed),
            preemptions: self.preemptions.load(Ordering::Relaxed),
            yields: self.yields.load(Ordering::Relaxed),
            parks_io: p(Cause::Io),
            parks_timer: p(Cause::Timer),
            parks_join: p(Cause::Join),
            parks_sync: p(Cause::Sync),
            parks_future: p(Cause::Future),
            runnable_wait: ticks_to_duration(self.runnable_wait.load(Ordering::Relaxed)),
            overruns: self.overruns.load(Ordering::Relaxed),
            looks: self.looks.load(Ordering::Relaxed),
        }
    }
}

/// Where a green thread is in its life (for the dump).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Spawned, not run yet (may still be stolen by another worker).
    Unstarted,
    /// Running on its worker now.
    Running,
    /// Waiting for its worker: woken, stopped by its slice, or yielded.
    Runnable,
    /// Parked, and why.
    Parked(Cause),
    /// Ended (returned, panicked or cancelled).
    Finished,
}

const UNSTARTED: u8 = 0;
const RUNNING: u8 = 1;
const RUNNABLE: u8 = 2;
const FINISHED: u8 = 3;
const PARKED: u8 = 8; // + cause

/// A green thread's state word, what it waits on, and its counters.
pub(crate) struct Status {
    state: AtomicU8,
    /// What it waits on: a descriptor, a CLOCK_MONOTONIC deadline in ns,
    /// a thread id (by the state's cause).
    pub(crate) detail: AtomicU64,
    /// When it became runnable (`ticks`), 0 if not.
    since: AtomicU64,
    /// 1 + the worker it started on (0 before): its home, where every
    /// wake-up queues it (read by the waker, `green.rs`).
    pub(crate) worker: AtomicUsize,
    pub(crate) counters: Counters,
    /// The park the thread is about to make (cause, detail), published as
    /// its state by the worker once the thread has switched out to it.
    park_cause: AtomicU8,
    park_detail: AtomicU64,
}

impl Default for Status {
    fn default() -> Status {
        Status {
            state: AtomicU8::new(UNSTARTED),
            detail: AtomicU64::new(0),
            since: AtomicU64::new({
                clock::start();
                ticks()
            }),
            worker: AtomicUsize::new(0),
            counters: Counters::default(),
            park_cause: AtomicU8::new(0),
            park_detail: AtomicU64::new(0),
        }
    }
}

impl Status {
    /// Switched in: returns the ticks it waited as runnable, and the
    /// switch-in time (`ticks`), which also goes in `detail` (what the dump
    /// shows as "running for").
    pub(crate) fn running(&self) -> (u64, u64) {
        let now = ticks();
        let since = self.since.swap(0, Ordering::Relaxed);
        let waited = if since == 0 { 0 } else { now.saturating_sub(since) };
        self.counters.switched_in(waited);
        self.detail.store(now, Ordering::Relaxed);
        self.state.store(RUNNING, Ordering::Relaxed);
        (waited, now)
    }
    /// Stopped or yielded: runnable from now. `in_wait`: stopped in a futex
    /// wait, which it goes back to when resumed.
    pub(crate) fn runnable(&self, in_wait: bool) {
        self.since.store(ticks(), Ordering::Relaxed);
        if in_wait {
            self.detail.store(IN_WAIT, Ordering::Relaxed);
        }
        self.state.store(RUNNABLE, Ordering::Relaxed);
    }
    /// The thread is about to park for `c` (`detail`: what it waits on).
    /// Not its state yet: the thread still runs, and a slice may end before
    /// it switches out (its worker would then mark it runnable, then
    /// running, over a parked state set here: the dump showed such threads
    /// running for good while they waited). [`parked`](Self::parked)
    /// publishes it once the switch is made.
    pub(crate) fn parking(&self, c: Cause, detail: u64) {
        self.park_detail.store(detail, Ordering::Relaxed);
        self.park_cause.store(c as u8, Ordering::Relaxed);
    }
    /// Switched out to the park announced by [`parking`](Self::parking):
    /// called by the worker, after the thread's switch.
    ///
    /// Returns false if a wake-up came meanwhile (`woken`, the thread's own
    /// flag, set before its waker calls [`woken`](Self::woken)): the caller
    /// then makes it runnable. Either this sees the flag, or the waker sees
    /// the parked state and turns it to runnable (both sides store, fence,
    /// then load): a woken thread is never left listed as parked.
    pub(crate) fn parked(&self, woken: &AtomicBool) -> bool {
        self.detail.store(self.park_detail.load(Ordering::Relaxed), Ordering::Relaxed);
        self.state.store(PARKED + self.park_cause.load(Ordering::Relaxed), Ordering::Relaxed);
        fence(Ordering::SeqCst);
        !woken.load(Ordering::Relaxed)
    }
    /// Woken from a park: runnable from now (the first wake counts). Called
    /// by the waker after it set the thread's `woken` flag (see
    /// [`parked`](Self::parked)).
    pub(crate) fn woken(&self) {
        fence(Ordering::SeqCst);
        let s = self.state.load(Ordering::Relaxed);
        if s >= PARKED {
            let _ = self.since.compare_exchange(0, ticks(), Ordering::Relaxed, Ordering::Relaxed);
            // Only from parked: a thread switched in meanwhile stays running.
            let _ = self.state.compare_exchange(s, RUNNABLE, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    pub(crate) fn finished(&self) {
        self.state.store(FINISHED, Ordering::Relaxed);
    }
    pub(crate) fn state(&self) -> State {
        match self.state.load(Ordering::Relaxed) {
            UNSTARTED => State::Unstarted,
            RUNNING => State::Running,
            RUNNABLE => State::Runnable,
            FINISHED => State::Finished,
            s => Cause::from_u8(s - PARKED).map_or(State::Runnable, State::Parked),
        }
    }
}

/// One live green thread, as [`dump`](crate::thread::dump) sees it.
#[derive(Clone, Debug)]
pub struct ThreadInfo {
    /// Its id.
    pub id: u64,
    /// Its name, if it was given one.
    pub name: Option<String>,
    /// Where it is.
    pub state: State,
    /// What it waits on, in words: a descriptor, a deadline, a thread; a
    /// futex wait it was stopped in (runnable: it waits again when resumed);
    /// or, for a thread running 10 ms or more without a switch, that it holds
    /// its worker (a wait it cannot be stopped in, or deferred code).
    pub waiting_on: Option<String>,
    /// The worker it runs on (None before it starts).
    pub worker: Option<usize>,
    /// Its counters.
    pub stats: ThreadStats,
}

/// A registry of live records (weak: a record goes with its thread), in
/// shards: a spawner inserts into its own OS thread's shard and the thread's
/// end removes from it, so spawns on different workers never meet on one
/// lock (one global map under one mutex was an insert, a remove and a
/// contended lock per spawn). A reader walks every shard. Generic so that
/// the records' own module keeps the registry of them (`records::REGISTRY`)
/// and the dump, above it, reads it.
const SHARDS: usize = 32;

#[repr(align(64))] // one cache line each: shards of different workers do not share one
struct Shard<T>(Mutex<slab::Slab<Weak<T>>>);

pub(crate) struct Registry<T> {
    shards: [Shard<T>; SHARDS],
}

fn own_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.try_with(|s| *s).unwrap_or(0)
}

/// Where a record is in its registry: `key * SHARDS + shard + 1`, 0 when
/// nowhere.
pub(crate) struct Registered(AtomicUsize);

impl Registered {
    pub(crate) const fn none() -> Registered {
        Registered(AtomicUsize::new(0))
    }
}

impl<T> Registry<T> {
    pub(crate) const fn new() -> Registry<T> {
        Registry { shards: [const { Shard(Mutex::new(slab::Slab::new())) }; SHARDS] }
    }

    /// Lists `g`, whose slot is `at` (once, at its spawn).
    pub(crate) fn register(&self, g: &Arc<T>, at: &Registered) {
        let shard = own_shard();
        let key = self.shards[shard].0.lock().unwrap_or_else(|e| e.into_inner()).insert(Arc::downgrade(g));
        at.0.store(key * SHARDS + shard + 1, Ordering::Relaxed);
    }

    /// Takes the record in slot `at` off the list; a second call does
    /// nothing (the slot may be another record's by then).
    pub(crate) fn unregister(&self, at: &Registered) {
        let at = at.0.swap(0, Ordering::Relaxed);
        if at != 0 {
            let (key, shard) = ((at - 1) / SHARDS, (at - 1) % SHARDS);
            self.shards[shard].0.lock().unwrap_or_else(|e| e.into_inner()).try_remove(key);
        }
    }

    /// The records alive now.
    pub(crate) fn live(&self) -> Vec<Arc<T>> {
        let mut live = Vec::new();
        for shard in &self.shards {
            live.extend(shard.0.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(|(_, w)| w.upgrade()));
        }
        live
    }
}

/// The detail of an I/O park whose call runs on the blocking pool.
pub(crate) const OFFLOADED: u64 = u64::MAX;

/// The detail of a runnable thread stopped in a futex wait.
pub(crate) const IN_WAIT: u64 = u64::MAX;

/// CLOCK_MONOTONIC now, as the park seam's deadlines are given.
pub(crate) fn monotonic() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
