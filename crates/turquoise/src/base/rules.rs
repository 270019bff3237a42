//! Which code of the async runtime a preemptible poll must not be stopped
//! in, given to linger as path rules (`linger::defer_paths`).
//!
//! The question, as for `std` in linger: while a poll is stopped there, can
//! the worker thread (which goes on polling other tasks) reach the same
//! state? A worker that finds a `RefCell` borrowed panics (tokio's deferred
//! wakers, behind one per worker: seen in `a_stopped_poll_resumes_on_its_own_thread`
//! within 20 runs before these rules); one that finds a `Mutex` held blocks,
//! and the only thread that may resume the stopped poll is that worker
//! itself: a deadlock. A deferred frame anywhere on the poll's call chain
//! defers the deadline until it returns, so the rules name the functions
//! that are on the stack while such state is held, and code they call back
//! (a `watch::Sender::send_modify` closure runs under the channel's lock)
//! is covered with them; so is their code where the compiler inlined it
//! into other functions (linger reads the DWARF inline records for these
//! rules). The reasoning for each entry is in
//! `docs/safety.md` ("turquoise: the runtime's own state").
//!
//! turquoise's own entries are module paths: a module that moves must move
//! its rule with it (`tests/rules.rs` checks that each names code that
//! exists).
pub(crate) const RULES: &[(&str, bool)] = &[
    // The scheduler, its per-worker defer list and run queues, the task
    // state machine and join handles, `spawn`, the I/O and timer drivers
    // (registration under the driver's locks), `block_in_place`.
    ("tokio::runtime::", true),
    // Channels, `Notify`, semaphores, `Mutex`/`RwLock` internals, `watch`:
    // each keeps its waiters behind a lock of its own.
    ("tokio::sync::", true),
    // ... but `OnceCell::get_or_init` awaits the program's initialiser, and
    // holds nothing but a permit (an async wait for others, not a lock).
    ("tokio::sync::once_cell::", false),
    // Shared lists behind locks (`JoinSet`'s idle/notified sets, wake
    // lists), the per-thread random generator.
    ("tokio::util::", true),
    // tokio's task front-ends that reach the runtime's per-thread state
    // in code the compiler may inline into them (`coop::register_waker`
    // inlines `context::defer`, whose list is a `RefCell`): spawning,
    // `JoinSet`, `yield_now`, the budget. Not the wrappers that poll the
    // program's futures (`Coop`, `unconstrained`, `task_local!` scopes).
    ("tokio::task::spawn::", true),
    ("tokio::task::join_set::", true),
    ("tokio::task::yield_now", true),
    ("tokio::task::coop::", true),
    ("tokio::task::coop::Coop", false),
    ("tokio::task::coop::unconstrained", false),
    // turquoise's own scheduler, reached from inside a poll when a task
    // wakes another (a push on the worker's own deque, a pinned queue's
    // lock), and what it is built on; the mailboxes of `home.rs`.
    ("turquoise::sched::scheduler::", true),
    ("turquoise::base::context::", true),
    ("turquoise::base::home::", true),
    // What tasks call on other tasks: `spawn` (it fills the new task's
    // waker slot under its lock) and `abort` (it clones the waker under that
    // lock; a poll stopped there left the lock held, and the worker that
    // then dropped the aborted task blocked on it for good: seen in the
    // hazard round's spawn-and-abort tasks at 3000 tasks).
    ("turquoise::sched::runtime::", true),
    ("turquoise::preemptible::task::", true),
    ("async_task::", true),
    ("crossbeam_deque::", true),
    ("crossbeam_epoch::", true),
    ("futures_util::task::", true),
    // The poller's registry (epoll_ctl under a lock), and its sockets.
    ("mio::", true),
    // The parking lot's global hash table of wait queues (a bucket lock
    // held while queueing), used by `parking_lot` locks in tokio and others.
    ("parking_lot_core::", true),
    // futures' channels park senders behind a `Mutex`; its async `Mutex`
    // keeps waiters behind a `std` one.
    ("futures_channel::", true),
    ("futures_util::lock::", true),
];

/// Gives linger the rules (once per process; cheap afterwards).
pub(crate) fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| linger::defer_paths(RULES));
}
