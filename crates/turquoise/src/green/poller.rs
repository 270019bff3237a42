//! Each worker's readiness table for its parked green threads: an epoll
//! instance of its own, nested in the worker's tokio reactor.
//!
//! **Kept registrations.** A descriptor a green thread waited on stays in
//! its worker's epoll set, under its number, `EPOLLONESHOT`: a park re-arms
//! it with one `EPOLL_CTL_MOD` (an `ADD` the first time), the event disarms
//! it. That is one system call per park; registering each wait with tokio
//! took five (a duplicate of the descriptor, add, a `poll` against lost
//! readiness, delete, close) and held two descriptors per waiting thread.
//! Arming also checks readiness (the kernel polls the file as it arms), so
//! readiness that arrived between the wrapper's failed attempt and the park
//! is not lost.
//!
//! **Reused numbers.** epoll keys a registration by file and number. A
//! number closed and reused names another file: re-arming it finds no
//! registration (`ENOENT`) and adds the new file. The old file's
//! registration goes with the old file; while something else keeps that
//! file open it can fire once more, and wakes the number's present waiters
//! spuriously (their retry finds nothing and parks again). Waking is always
//! by number and spurious wakes are harmless, so no waiter is woken for a
//! file it does not wait on and then misses its own.
//!
//! **Closed while waited on.** When the program closes the last descriptor
//! of a file, the kernel drops its registrations without an event, which
//! would leave its waiters parked forever. linger's `close`, `dup2`, `dup3`
//! and `close_range` wrappers call [`on_close`] (installed with
//! `linger::park::on_close`); for a number with waiters it bumps the
//! number's close count and signals an eventfd every worker's epoll
//! watches, and each worker wakes its waiters whose count moved. Their retry
//! fails with `EBADF` (or uses the file now under that number, as a call
//! made a moment later would). A pthread blocked in `read` would instead
//! keep the old file until data came; Linux documents both as possible
//! (close(2), "multithreaded processes"). libc's own closes (`fclose`) are
//! not seen: a green thread parked on a socket whose `FILE` another thread
//! closes waits until its deadline.
//!
//! **Who touches what.** The table is the worker's (a thread-local of the
//! worker thread; green threads' images never include it). The worker's
//! drain task reads the epoll set when tokio reports it readable; green
//! threads add and remove their entries from their own stacks, always in a
//! `linger::critical` scope, so a preempted green thread never leaves the
//! table half-changed under the drain task. Only the per-number counters
//! ([`Slot`]) are shared between threads, through atomics.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{fence, AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

use linger::park::Interest;
use tokio::io::unix::AsyncFd;

/// What is known about one descriptor number across workers.
struct Slot {
    /// Entries waiting on it, on any worker.
    waiters: AtomicU32,
    /// Times it was closed or replaced while it had waiters.
    closes: AtomicU32,
}

/// Numbers per chunk of the slot table, and chunks: numbers up to 2^20
/// (`RLIMIT_NOFILE`'s usual hard limit is 2^20 too). A wait on a larger
/// number is declined: the call blocks its worker, as without a hook.
const CHUNK: usize = 4096;
const CHUNKS: usize = 256;

/// Chunks are made on first use and never freed, so the close observer can
/// read them without locks (it may run in a signal handler).
static SLOTS: [AtomicPtr<Slot>; CHUNKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];

/// The slot of `fd`, made if need be (not async-signal-safe: allocates).
fn slot(fd: RawFd) -> Option<&'static Slot> {
    let fd = usize::try_from(fd).ok().filter(|&fd| fd < CHUNK * CHUNKS)?;
    let chunk = &SLOTS[fd / CHUNK];
    let mut p = chunk.load(Ordering::Acquire);
    if p.is_null() {
        let new: Box<[Slot]> = (0..CHUNK).map(|_| Slot { waiters: AtomicU32::new(0), closes: AtomicU32::new(0) }).collect();
        let new = Box::into_raw(new) as *mut Slot;
        match chunk.compare_exchange(std::ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => p = new,
            Err(other) => {
                // SAFETY: `new` came from `Box::into_raw` just above and was
                // published nowhere.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(new, CHUNK)) });
                p = other;
            }
        }
    }
    // SAFETY: a published chunk holds CHUNK slots and lives forever.
    Some(unsafe { &*p.add(fd % CHUNK) })
}

/// The eventfd every worker's epoll set watches (edge-triggered, never
/// read): written when a number with waiters was closed.
static CLOSE_EVENT: AtomicI32 = AtomicI32::new(-1);

/// The epoll data of the close eventfd (descriptors' data is their number).
const CLOSE_TOKEN: u64 = u64::MAX;

/// linger's close observer: async-signal-safe (atomics and `eventfd_write`,
/// which calls the system directly).
fn on_close(first: RawFd, last: RawFd) {
    // The close itself before the reads of `waiters`: a waiter counted
    // after this fence arms after the close, and its `epoll_ctl` finds the
    // number closed (or reused), so it needs no wake-up.
    fence(Ordering::SeqCst);
    let (Ok(first), Ok(last)) = (usize::try_from(first), usize::try_from(last)) else { return };
    let last = last.min(CHUNK * CHUNKS - 1);
    let mut hit = false;
    let mut fd = first;
    while fd <= last {
        let c = fd / CHUNK;
        let end = ((c + 1) * CHUNK - 1).min(last);
        let p = SLOTS[c].load(Ordering::Acquire);
        if !p.is_null() {
            for i in fd..=end {
                // SAFETY: a published chunk holds CHUNK slots forever.
                let s = unsafe { &*p.add(i % CHUNK) };
                if s.waiters.load(Ordering::SeqCst) > 0 {
                    s.closes.fetch_add(1, Ordering::SeqCst);
                    hit = true;
                }
            }
        }
        fd = end + 1;
    }
    let e = CLOSE_EVENT.load(Ordering::Acquire);
    if hit && e >= 0 {
        // SAFETY: a write of 1 to our eventfd.
        unsafe { libc::eventfd_write(e, 1) };
    }
}

/// What a parked green thread waits on: set ready by its worker's drain
/// task (or at arming), with the waker to wake it by.
#[derive(Default)]
pub(crate) struct WaitCell {
    ready: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl WaitCell {
    /// Ready, or registers `cx`'s waker. Call in a `critical` scope.
    pub(crate) fn poll(&self, cx: &Context<'_>) -> bool {
        if self.ready.get() {
            return true;
        }
        let mut w = self.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
        false
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.get()
    }

    fn fire(&self, wake: &mut Vec<Waker>) {
        self.ready.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            wake.push(w);
        }
    }
}

/// One waiter of one number.
struct Entry {
    events: u32,
    cell: Rc<WaitCell>,
    slot: &'static Slot,
    /// `slot.closes` when the entry was made.
    closes: u32,
}

/// A worker's table.
struct Poller {
    ep: AsyncFd<OwnedFd>,
    waits: RefCell<crate::base::id_map::IdMap<RawFd, Vec<Entry>>>,
}

thread_local! {
    /// This worker's table, made at its first park on a descriptor.
    static POLLER: RefCell<Option<Rc<Poller>>> = const { RefCell::new(None) };
}

fn events_of(i: Interest) -> u32 {
    match i {
        Interest::Read => (libc::EPOLLIN | libc::EPOLLPRI | libc::EPOLLRDHUP) as u32,
        Interest::Write => libc::EPOLLOUT as u32,
    }
}

/// Registers `cell` as waiting on each of `fds` with this worker's table,
/// and arms them; all or none. False if one cannot be waited on here (a
/// regular file, which epoll refuses; a number past the table; no memory
/// for the registration; no reactor). The cell may be ready on return (a
/// number already closed: the caller's retry reports it). Call in a
/// `critical` scope, on a worker thread.
pub(crate) fn add(fds: &[(RawFd, Interest)], cell: &Rc<WaitCell>) -> bool {
    let Some(p) = poller() else { return false };
    for (n, &(fd, interest)) in fds.iter().enumerate() {
        if !p.add(fd, events_of(interest), cell) {
            remove(&fds[..n], cell);
            return false;
        }
    }
    true
}

/// Takes `cell`'s entries off the table. Call in a `critical` scope.
pub(crate) fn remove(fds: &[(RawFd, Interest)], cell: &Rc<WaitCell>) {
    POLLER.with(|p| {
        if let Some(p) = p.borrow().as_ref() {
            let mut waits = p.waits.borrow_mut();
            for &(fd, _) in fds {
                if let Some(list) = waits.get_mut(&fd) {
                    list.retain(|e| {
                        let mine = Rc::ptr_eq(&e.cell, cell);
                        if mine {
                            e.slot.waiters.fetch_sub(1, Ordering::SeqCst);
                        }
                        !mine
                    });
                    if list.is_empty() {
                        waits.remove(&fd);
                    }
                }
            }
        }
    });
}

/// Events wait in this worker's epoll set: a descriptor one of its parked
/// green threads waits on is ready (or was closed). One `poll` with no
/// timeout, which consumes nothing. False without a table.
pub(crate) fn ready_now() -> bool {
    let Some(fd) = POLLER.with(|p| p.borrow().as_ref().map(|p| p.ep.as_raw_fd())) else { return false };
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid `pollfd`, no timeout.
    unsafe { libc::poll(&mut pfd, 1, 0) > 0 }
}

/// This worker's table, made if need be.
fn poller() -> Option<Rc<Poller>> {
    if let Some(p) = POLLER.with(|p| p.borrow().clone()) {
        return Some(p);
    }
    let p = Rc::new(Poller::new()?);
    POLLER.with(|c| *c.borrow_mut() = Some(p.clone()));
    // The drain task, on this worker's tokio runtime (current-thread: it
    // runs on this thread, between batches). It reaches the table through
    // the thread-local, so it holds nothing that is not `Send`.
    tokio::spawn(poll_fn(|cx| POLLER.with(|p| p.borrow().clone()).map_or(Poll::Ready(()), |p| p.drain(cx))));
    Some(p)
}

/// `epoll_ctl` on our epoll set; the errno if it fails.
fn ctl(ep: RawFd, op: libc::c_int, fd: RawFd, events: u32, data: u64) -> Result<(), i32> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: a valid event for epoll_ctl on our epoll descriptor.
    if unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

impl Poller {
    fn new() -> Option<Poller> {
        if !crate::base::context::drivers().is_some_and(|d| d.io) {
            return None;
        }
        static OBSERVER: OnceLock<bool> = OnceLock::new();
        if !*OBSERVER.get_or_init(|| {
            // SAFETY: a new eventfd, ours for the life of the process.
            let e = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            if e < 0 {
                return false;
            }
            CLOSE_EVENT.store(e, Ordering::Release);
            linger::park::on_close(on_close)
        }) {
            return None;
        }
        // SAFETY: a new epoll descriptor (>= 0) is ours alone.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return None;
        }
        // SAFETY: just made, known to nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, CLOSE_EVENT.load(Ordering::Acquire), (libc::EPOLLIN | libc::EPOLLET) as u32, CLOSE_TOKEN).ok()?;
        // SAFETY: the registration owns `ep`: open, and the same epoll set,
        // until the table (and the registration with it) is dropped.
        let ep = unsafe { AsyncFd::register_with_interest(ep, tokio::io::Interest::READABLE) }.ok()?;
        Some(Poller { ep, waits: RefCell::new(crate::base::id_map::IdMap::default()) })
    }

    fn add(&self, fd: RawFd, events: u32, cell: &Rc<WaitCell>) -> bool {
        let Some(slot) = slot(fd) else { return false };
        // Counted before the close count is read: see `on_close`.
        slot.waiters.fetch_add(1, Ordering::SeqCst);
        let closes = slot.closes.load(Ordering::SeqCst);
        let mut waits = self.waits.borrow_mut();
        let list = waits.entry(fd).or_default();
        list.push(Entry { events, cell: cell.clone(), slot, closes });
        let all = list.iter().fold(0, |a, e| a | e.events);
        drop(waits);
        match self.arm(fd, all) {
            Ok(()) => true,
            Err(libc::EBADF) => {
                cell.ready.set(true);
                true
            }
            Err(_) => {
                remove(&[(fd, Interest::Read)], cell);
                false
            }
        }
    }

    /// (Re-)arms `fd` for `events`, one-shot.
    fn arm(&self, fd: RawFd, events: u32) -> Result<(), i32> {
        let ep = self.ep.as_raw_fd();
        let events = events | libc::EPOLLONESHOT as u32;
        match ctl(ep, libc::EPOLL_CTL_MOD, fd, events, fd as u64) {
            Err(libc::ENOENT) => ctl(ep, libc::EPOLL_CTL_ADD, fd, events, fd as u64),
            r => r,
        }
    }

    /// The drain task's poll: wakes the waiters of what the epoll set
    /// reports, until it reports nothing.
    fn drain(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut buf = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let mut wake = Vec::new();
        loop {
            let mut guard = match self.ep.poll_read_ready(cx) {
                Poll::Pending => break,
                // The reactor is gone (shutdown).
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Ready(Ok(g)) => g,
            };
            // SAFETY: `buf` has room for 64 events.
            let n = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), buf.as_mut_ptr(), buf.len() as i32, 0) };
            if n <= 0 {
                guard.clear_ready();
                continue;
            }
            let mut waits = self.waits.borrow_mut();
            for ev in &buf[..n as usize] {
                let (got, data) = (ev.events, ev.u64);
                if data == CLOSE_TOKEN {
                    waits.retain(|_, list| {
                        list.retain(|e| {
                            let moved = e.slot.closes.load(Ordering::SeqCst) != e.closes;
                            if moved {
                                e.cell.fire(&mut wake);
                                e.slot.waiters.fetch_sub(1, Ordering::SeqCst);
                            }
                            !moved
                        });
                        !list.is_empty()
                    });
                    continue;
                }
                let fd = data as RawFd;
                let Some(list) = waits.get_mut(&fd) else { continue };
                let any = got & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
                list.retain(|e| {
                    let hit = any || e.events & got != 0;
                    if hit {
                        e.cell.fire(&mut wake);
                        e.slot.waiters.fetch_sub(1, Ordering::SeqCst);
                    }
                    !hit
                });
                if list.is_empty() {
                    waits.remove(&fd);
                } else {
                    let all = list.iter().fold(0, |a, e| a | e.events);
                    if self.arm(fd, all).is_err() {
                        // Closed meanwhile: let them retry.
                        for e in list.drain(..) {
                            e.cell.fire(&mut wake);
                            e.slot.waiters.fetch_sub(1, Ordering::SeqCst);
                        }
                        waits.remove(&fd);
                    }
                }
            }
            drop(waits);
            if (n as usize) < buf.len() {
                guard.clear_ready();
            }
            for w in wake.drain(..) {
                w.wake();
            }
        }
        Poll::Pending
    }
}
