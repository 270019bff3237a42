//! Timekeeping by one monitor thread per process (`LINGER_TIMEKEEPING=monitor`).
//!
//! With per-thread timers (`timer.rs`, the default) a thread that launches
//! continuously gets about one signal per slice even when no function ever
//! runs long: the timer is disarmed lazily and its expiry finds a later
//! deadline. Here, as Go's runtime does with `sysmon`, each thread instead
//! publishes the deadline of the function it runs in a slot of its own
//! (registered once per thread, a cache line each), and one monitor thread
//! sleeps until the earliest published deadline and signals, with
//! `rt_tgsigqueueinfo`, only the threads whose published deadline has passed.
//!
//! - Publishing is one atomic swap on the thread's slot, plus a read of the
//!   time the monitor sleeps until; only a deadline earlier than that wakes
//!   it (a futex wake). A thread launching one function after another moves
//!   its deadline later each time and never wakes the monitor. Leaving a
//!   function publishes the caller's deadline (or none): a plain store.
//! - The monitor signals once per published deadline value, and checks the
//!   value again just before it sends: a function that finished or was
//!   replaced by a newer activation in the meantime is left alone, except in
//!   the few instructions between that check and the system call, and a
//!   signal that comes that late finds the new function's deadline not
//!   passed and is ignored by the handler, like a stray timer expiry.
//! - Deferred deadlines (the handler found library code, a critical scope,
//!   a blocking call) are retried on the thread's own timer, as in timer mode:
//!   the monitor only delivers each deadline once.
//! - The signal carries `SI_QUEUE`, our pid and a per-process cookie, so
//!   the handler tells it from the program's own uses of the signal.
//!
//! The sleep and the wake-up are a Dekker pair: a thread stores its deadline
//! then reads `SLEEP_UNTIL`; the monitor stores `SLEEP_UNTIL` then reads the
//! deadlines again before it sleeps; both sides with sequentially consistent
//! operations, so at least one of them sees the other.

use std::cell::Cell;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::state::slot::Slot;
use crate::state::thread::{now_ns, ThreadState, NEVER};

/// Monitor timekeeping is on (set once, when the runtime starts).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether deadlines go to the monitor instead of per-thread timers.
#[inline]
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// `Slot::state`: the monitor is signalling the slot's thread right now.
const BUSY: u32 = 1;
/// `Slot::state`: the thread takes no signal from the monitor (exec under
/// way, thread exited, slot free).
const SHUT: u32 = 2;
/// How long the monitor waits before signalling again when the kernel's
/// signal queue was full (`RLIMIT_SIGPENDING`).
const QUEUE_FULL_RETRY_NS: u64 = 50_000;

impl Slot {
    /// Makes the slot ready for a new thread (the slot is claimed: the
    /// monitor sees it as the new thread's, with no deadline yet).
    fn reset(&self) {
        self.deadline.store(NEVER, Ordering::SeqCst);
        self.signalled_for.store(NEVER, Ordering::Relaxed);
        self.retry_at.store(0, Ordering::Relaxed);
        self.kicked.store(false, Ordering::Relaxed);
    }
}

/// All slots ever registered, newest first.
static HEAD: AtomicPtr<Slot> = AtomicPtr::new(ptr::null_mut());

fn slots() -> impl Iterator<Item = &'static Slot> {
    let mut p = HEAD.load(Ordering::Acquire);
    std::iter::from_fn(move || {
        // SAFETY: slots are allocated once, fully initialised before they
        // are linked (release), and never freed.
        let s = unsafe { p.as_ref()? };
        p = s.next.load(Ordering::Acquire);
        Some(s)
    })
}

/// When the monitor will look next (absolute ns; NEVER: only when woken), or
/// 0 while it is awake and will look again before it sleeps.
static SLEEP_UNTIL: AtomicU64 = AtomicU64::new(0);
/// The futex word the monitor sleeps on; bumped by each wake-up.
static WAKE: AtomicU32 = AtomicU32::new(0);
/// The process whose monitor thread runs (a forked child has none).
static RUNNING_PID: AtomicI32 = AtomicI32::new(0);
/// Held while a monitor thread is started (and across a fork, see `fork.rs`).
static SPAWN: Mutex<()> = Mutex::new(());
/// Tells the monitor's signals from the program's (`si_value`).
static COOKIE: AtomicU64 = AtomicU64::new(0);
/// Counters for benchmarks: monitor wake-ups and signals sent.
static WAKEUPS: AtomicU64 = AtomicU64::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);

/// Monitor wake-ups and signals sent so far in this process.
pub(crate) fn counters() -> (u64, u64) {
    (WAKEUPS.load(Ordering::Relaxed), SENT.load(Ordering::Relaxed))
}

/// This thread's slot, if it registered.
#[inline]
fn slot(ts: &ThreadState) -> Option<&'static Slot> {
    // SAFETY: slots are never freed; `ts.slot` is null or a registered slot.
    unsafe { ts.slot.get().as_ref() }
}

/// Publishes the deadline of the function this thread runs now (NEVER when
/// it runs none). Called on the caller's side of a launch, resume or return,
/// never from a signal handler.
#[inline]
pub(crate) fn publish(ts: &ThreadState, deadline: u64) {
    let Some(s) = slot(ts) else { return };
    if deadline == NEVER {
        s.deadline.store(NEVER, Ordering::Release);
        return;
    }
    s.deadline.swap(deadline, Ordering::SeqCst);
    if deadline < SLEEP_UNTIL.load(Ordering::SeqCst) {
        wake(deadline);
    }
}

/// The monitor sleeps past `deadline`: wake it (once, whoever gets there first).
#[cold]
#[inline(never)]
fn wake(deadline: u64) {
    let mut until = SLEEP_UNTIL.load(Ordering::SeqCst);
    while deadline < until {
        match SLEEP_UNTIL.compare_exchange(until, 0, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                WAKE.fetch_add(1, Ordering::SeqCst);
                // SAFETY: futex wake on a static word; no memory is written.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        WAKE.as_ptr(),
                        (libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG) as libc::c_long,
                        1 as libc::c_long,
                    )
                };
                return;
            }
            Err(now) => until = now,
        }
    }
}

/// The deadline this thread last published (NEVER if none or unregistered).
pub(crate) fn published(ts: &ThreadState) -> u64 {
    slot(ts).map_or(NEVER, |s| s.deadline.load(Ordering::Relaxed))
}

/// The monitor has signalled this thread and no handler has run since.
/// Async-signal-safe.
pub(crate) fn kicked(ts: &ThreadState) -> bool {
    slot(ts).is_some_and(|s| s.kicked.load(Ordering::Relaxed))
}

/// The handler runs for the monitor's signal. Async-signal-safe.
pub(crate) fn clear_kick(ts: &ThreadState) {
    if let Some(s) = slot(ts) {
        s.kicked.store(false, Ordering::Relaxed);
    }
}

/// One of this thread's preemption signals reached no handler (see
/// `preempt::forget_lost_signal`): clears the monitor's mark and returns it, then
/// waits until the monitor is not signalling this thread, so that a signal
/// it was sending is queued (and seen by `sigpending`) once this returns;
/// one it starts later sets the mark again. Async-signal-safe: the monitor
/// holds `BUSY` only across one `rt_tgsigqueueinfo`.
pub(crate) fn take_kick_and_settle(ts: &ThreadState) -> bool {
    let Some(s) = slot(ts) else { return false };
    let kicked = s.kicked.swap(false, Ordering::SeqCst);
    while s.state.load(Ordering::SeqCst) & BUSY != 0 {
        std::hint::spin_loop();
    }
    kicked
}

/// Sets the monitor's mark again (its signal is still queued).
pub(crate) fn restore_kick(ts: &ThreadState) {
    if let Some(s) = slot(ts) {
        s.kicked.store(true, Ordering::SeqCst);
    }
}

/// The siginfo of the monitor's signals (the kernel's `siginfo` layout for
/// `SI_QUEUE`: signo, errno, code, padding, pid, uid, value).
#[repr(C)]
struct QueueInfo {
    signo: i32,
    errno: i32,
    code: i32,
    pad: i32,
    pid: i32,
    uid: u32,
    value: u64,
    rest: [u64; 12],
}

/// Was this signal sent by the monitor of this process? Async-signal-safe.
pub(crate) fn from_monitor(info: &libc::siginfo_t) -> bool {
    if info.si_code != libc::SI_QUEUE || !enabled() {
        return false;
    }
    // SAFETY: siginfo_t is 128 bytes; an SI_QUEUE siginfo has the layout of
    // `QueueInfo` (checked by the size assertion below).
    let q = unsafe { &*(info as *const libc::siginfo_t as *const QueueInfo) };
    q.value == COOKIE.load(Ordering::Relaxed) && crate::machine::signal::is_owner_pid(q.pid)
}

const _: () = assert!(std::mem::size_of::<QueueInfo>() == std::mem::size_of::<libc::siginfo_t>());

/// Switches monitor timekeeping on and registers this thread, starting the
/// process's monitor thread if it has none yet.
pub(crate) fn start(ts: &ThreadState, signo: i32) -> io::Result<()> {
    ENABLED.store(true, Ordering::Relaxed);
    ensure_running(signo)?;
    register(ts)
}

fn ensure_running(signo: i32) -> io::Result<()> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    if RUNNING_PID.load(Ordering::Acquire) == pid {
        return Ok(());
    }
    let _g = SPAWN.lock().unwrap_or_else(|e| e.into_inner());
    if RUNNING_PID.load(Ordering::Acquire) == pid {
        return Ok(());
    }
    if COOKIE.load(Ordering::Relaxed) == 0 {
        let seed = now_ns() ^ ((pid as u64) << 32) ^ (&COOKIE as *const AtomicU64 as u64).rotate_left(17);
        COOKIE.store(seed | 1, Ordering::Relaxed);
    }
    SLEEP_UNTIL.store(0, Ordering::SeqCst);
    // The monitor thread starts with every signal blocked (it inherits this
    // thread's mask): the program's process-directed signals must go to its
    // own threads, and ours are never aimed at it.
    let Some(sigmask) = crate::machine::signal::real_pthread_sigmask() else {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    };
    // SAFETY: local sigsets with valid pointers.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    let spawned = std::thread::Builder::new()
        .name("linger-monitor".into())
        .stack_size(64 * 1024)
        .spawn(move || run(signo));
    // SAFETY: restoring the mask saved above.
    unsafe { sigmask(libc::SIG_SETMASK, &old, ptr::null_mut()) };
    spawned?;
    RUNNING_PID.store(pid, Ordering::Release);
    Ok(())
}

/// Deregisters an exiting thread (its thread-local destructor).
struct SlotOwner(Cell<bool>);

impl Drop for SlotOwner {
    fn drop(&mut self) {
        if !self.0.get() {
            return;
        }
        // The main thread's destructors run inside `exit()`, before atexit
        // handlers that may still run preemptible functions (as its timer).
        // SAFETY: getpid/gettid have no preconditions.
        if unsafe { libc::gettid() == libc::getpid() } {
            return;
        }
        let ts = crate::state::thread::ts();
        let Some(s) = slot(ts) else { return };
        ts.slot.set(ptr::null());
        ts.ready.set(false);
        s.deadline.store(NEVER, Ordering::SeqCst);
        shut_slot(s);
        s.tid.store(0, Ordering::Release); // free, still shut until claimed
    }
}

thread_local! {
    static OWNER: SlotOwner = const { SlotOwner(Cell::new(false)) };
}

fn register(ts: &ThreadState) -> io::Result<()> {
    if !ts.slot.get().is_null() {
        return Ok(());
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let s = match slots().find(|s| s.tid.load(Ordering::Relaxed) == 0 && s.tid.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed).is_ok()) {
        Some(s) => {
            s.reset();
            s.state.fetch_and(!SHUT, Ordering::SeqCst);
            s
        }
        None => allocate(tid)?,
    };
    ts.slot.set(s);
    // A thread whose destructors already ran keeps its slot until the
    // process ends (as its timer).
    let _ = OWNER.try_with(|o| o.0.set(true));
    Ok(())
}

fn allocate(tid: i32) -> io::Result<&'static Slot> {
    let layout = std::alloc::Layout::new::<Slot>();
    // SAFETY: `Slot` has a non-zero size.
    let p = unsafe { std::alloc::alloc(layout) } as *mut Slot;
    if p.is_null() {
        return Err(io::Error::from_raw_os_error(libc::ENOMEM));
    }
    let slot = Slot {
        deadline: AtomicU64::new(NEVER),
        tid: AtomicI32::new(tid),
        state: AtomicU32::new(0),
        kicked: AtomicBool::new(false),
        signalled_for: AtomicU64::new(NEVER),
        retry_at: AtomicU64::new(0),
        next: AtomicPtr::new(ptr::null_mut()),
    };
    // SAFETY: `p` is a fresh allocation for one `Slot`, never freed.
    let s = unsafe {
        p.write(slot);
        &*p
    };
    let mut head = HEAD.load(Ordering::Acquire);
    loop {
        s.next.store(head, Ordering::Relaxed);
        match HEAD.compare_exchange_weak(head, p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(s),
            Err(h) => head = h,
        }
    }
}

/// Waits until the monitor is not signalling `s`'s thread, and keeps it
/// from signalling again.
fn shut_slot(s: &Slot) {
    s.state.fetch_or(SHUT, Ordering::SeqCst);
    while s.state.load(Ordering::Acquire) & BUSY != 0 {
        std::hint::spin_loop();
    }
}

/// Before an exec: from here on the monitor sends this thread nothing.
pub(crate) fn shut(ts: &ThreadState) {
    if let Some(s) = slot(ts) {
        shut_slot(s);
    }
}

/// After a failed exec: the monitor watches this thread again.
pub(crate) fn reopen(ts: &ThreadState) {
    if let Some(s) = slot(ts) {
        s.state.fetch_and(!SHUT, Ordering::SeqCst);
        let d = s.deadline.load(Ordering::SeqCst);
        if d < SLEEP_UNTIL.load(Ordering::SeqCst) {
            wake(d);
        }
    }
}

/// In the child of a fork: the other threads and the monitor do not exist
/// here. Their slots are freed, this thread's keeps its deadline, and the
/// next launch or resume starts a monitor of this process (until then the
/// timer handler re-arms the thread's timer for a running function).
pub(crate) fn after_fork_in_child(ts: &ThreadState) {
    SLEEP_UNTIL.store(0, Ordering::SeqCst);
    let mine = ts.slot.get();
    for s in slots() {
        if ptr::eq(s, mine) {
            // SAFETY: gettid has no preconditions.
            s.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
            s.state.store(0, Ordering::SeqCst);
            s.signalled_for.store(NEVER, Ordering::Relaxed);
            s.retry_at.store(0, Ordering::Relaxed);
            s.kicked.store(false, Ordering::Relaxed);
        } else {
            s.deadline.store(NEVER, Ordering::Relaxed);
            s.state.store(SHUT, Ordering::Relaxed);
            s.tid.store(0, Ordering::Release);
        }
    }
}

/// For the fork prepare handler: no monitor is being started across a fork.
pub(crate) fn lock_spawn() -> MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// What [`kick`] did.
#[derive(PartialEq, Eq)]
enum Kick {
    /// Signalled, or nothing to do for this deadline any more (the thread
    /// moved on, or is gone).
    Done,
    /// The thread shut its slot meanwhile: look again once it reopens.
    Shut,
    /// The kernel's signal queue was full: try again shortly.
    QueueFull,
}

/// Signals `s`'s thread for `deadline` unless it has moved on or shut.
fn kick(s: &Slot, deadline: u64, info: &mut QueueInfo) -> Kick {
    let before = s.state.fetch_or(BUSY, Ordering::SeqCst);
    let mut done = Kick::Done;
    if before & SHUT != 0 {
        done = Kick::Shut;
    } else if s.deadline.load(Ordering::SeqCst) == deadline {
        let tid = s.tid.load(Ordering::Relaxed);
        s.kicked.store(true, Ordering::SeqCst);
        // Counted first: the thread may have handled the signal before the
        // system call returns here.
        SENT.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a valid siginfo for the kernel to copy; the pid is ours
        // and the tid a thread of ours registered in this slot, which cannot
        // leave the slot while BUSY is set.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                info.pid as libc::c_long,
                tid as libc::c_long,
                info.signo as libc::c_long,
                info as *mut QueueInfo,
            )
        };
        if r != 0 {
            SENT.fetch_sub(1, Ordering::Relaxed);
            s.kicked.store(false, Ordering::Relaxed);
            if io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                done = Kick::QueueFull;
            }
        }
    }
    s.state.fetch_and(!BUSY, Ordering::SeqCst);
    done
}

/// A deadline the monitor still has to act on: published, not signalled
/// yet (or due for another try), by a thread that takes signals.
fn wanted(s: &Slot) -> Option<u64> {
    if s.tid.load(Ordering::Acquire) == 0 || s.state.load(Ordering::SeqCst) & SHUT != 0 {
        return None;
    }
    let d = s.deadline.load(Ordering::SeqCst);
    if d == NEVER {
        return None;
    }
    if s.signalled_for.load(Ordering::Relaxed) != d {
        return Some(d);
    }
    match s.retry_at.load(Ordering::Relaxed) {
        0 => None,
        r => Some(r),
    }
}

/// The monitor thread.
fn run(signo: i32) {
    // Wake up on time: the default slack of a normal thread (50 us) would
    // delay every preemption by up to that much.
    // SAFETY: prctl with plain integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    short_slice();
    // SAFETY: as above.
    let (pid, uid) = unsafe { (libc::getpid(), libc::getuid()) };
    let mut info = QueueInfo {
        signo,
        errno: 0,
        code: libc::SI_QUEUE,
        pad: 0,
        pid,
        uid,
        value: COOKIE.load(Ordering::Relaxed),
        rest: [0; 12],
    };
    loop {
        let seq = WAKE.load(Ordering::SeqCst);
        let now = now_ns();
        let mut next = NEVER;
        for s in slots() {
            let Some(d) = wanted(s) else { continue };
            if d > now {
                next = next.min(d);
                continue;
            }
            let deadline = s.deadline.load(Ordering::SeqCst);
            match kick(s, deadline, &mut info) {
                Kick::Shut => continue,
                Kick::Done => s.retry_at.store(0, Ordering::Relaxed),
                Kick::QueueFull => {
                    s.retry_at.store(now + QUEUE_FULL_RETRY_NS, Ordering::Relaxed);
                    next = next.min(now + QUEUE_FULL_RETRY_NS);
                }
            }
            s.signalled_for.store(deadline, Ordering::Relaxed);
        }
        SLEEP_UNTIL.store(next, Ordering::SeqCst);
        // A deadline stored before its thread read `SLEEP_UNTIL` as 0 is
        // visible now; one stored later made its thread wake us.
        if slots().any(|s| wanted(s).is_some_and(|d| d < next)) {
            SLEEP_UNTIL.store(0, Ordering::SeqCst);
            continue;
        }
        sleep(seq, next);
        SLEEP_UNTIL.store(0, Ordering::SeqCst);
        WAKEUPS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Asks the scheduler (EEVDF, Linux 6.12 and later) for the shortest time
/// slice, 100 us: a task with a shorter slice than the running one may
/// preempt it when it wakes, so the monitor's wake-up is not queued behind
/// a busy thread for a whole default slice. Older kernels refuse it.
fn short_slice() {
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr { size: std::mem::size_of::<SchedAttr>() as u32, policy: libc::SCHED_OTHER as u32, flags: 0, nice: 0, priority: 0, runtime: 100_000, deadline: 0, period: 0 };
    // SAFETY: a valid sched_attr (version 0 layout, its size in `size`) for
    // the calling thread.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0 as libc::c_long, &attr as *const SchedAttr, 0 as libc::c_long) };
}

/// Sleeps until `until` (absolute CLOCK_MONOTONIC ns; NEVER: no limit) or
/// until `WAKE` is no longer `seq`.
fn sleep(seq: u32, until: u64) {
    let ts = libc::timespec { tv_sec: (until / 1_000_000_000) as libc::time_t, tv_nsec: (until % 1_000_000_000) as libc::c_long };
    let timeout = if until == NEVER { ptr::null() } else { &ts as *const libc::timespec };
    // SAFETY: futex wait on a static word with a valid (or null) absolute
    // timeout; FUTEX_WAIT_BITSET measures it on CLOCK_MONOTONIC.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            WAKE.as_ptr(),
            (libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG) as libc::c_long,
            seq as libc::c_long,
            timeout,
            ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY as libc::c_long,
        )
    };
}
