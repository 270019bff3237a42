//! The wrappers' side of the park seam (`crate::park`): inside a function
//! launched with a hook, a call that would block hands its wait to the hook
//! instead of blocking the thread.
//!
//! Each wrapper first tries its call without blocking and without touching
//! the descriptor's flags (`RWF_NOWAIT`, `MSG_DONTWAIT`, a zero timeout). If
//! it would block ([`Waiter::would_block`]): a descriptor the program made
//! non-blocking gets its `EAGAIN`; a socket timeout that expired ends the
//! call with `EAGAIN`, as the kernel does; otherwise the hook waits (it
//! switches out with `pause()`), and the call is tried again. Where a
//! `pause()` would not switch ([`may_park`]: a `critical` scope, deferred
//! code on the call chain, the program's signal handler, an unwinding
//! panic), or the hook declines, the wrapper makes the blocking call it
//! made before, and the wait is counted as blocked.

use std::ptr::NonNull;
use std::time::Duration;

use libc::{c_int, iovec, ssize_t};

use super::call::Mark;
use crate::base::sys::{Deadline, errno, set_errno};
use crate::interpose::park::{Interest, Park};
use crate::state::stats::bump;
use crate::state::thread::ts;

/// The running function's hook, valid for the wrapper's call: the frame
/// holds it until the function's stack is given back, which happens only
/// after it stopped running.
#[derive(Clone, Copy)]
pub(crate) struct Hook(NonNull<dyn Park>);

impl Hook {
    fn get(&self) -> &dyn Park {
        // SAFETY: see the type: the hook outlives the call that found it.
        unsafe { self.0.as_ref() }
    }
}

/// The hook of the running function, if it has one (None outside
/// functions).
#[inline(always)]
pub(crate) fn hook() -> Option<Hook> {
    inside().flatten()
}

/// The hook, for a wrapper that would copy what it hands to the pool
/// (allocating) before it knows whether the function may park: None where
/// it surely may not, so that nothing is copied there: in one of the
/// program's signal handlers (which may have interrupted `malloc`; `open`,
/// `stat`, `unlink`... are async-signal-safe), and in a `critical` scope.
#[inline]
pub(crate) fn offload_hook() -> Option<Hook> {
    let h = hook()?;
    (!crate::in_critical() && !crate::handlers::program_signals::in_program_handler()).then_some(h)
}

/// None outside any function (the wrappers' fast path: one thread-local
/// load and a branch, as `in_function`); inside one, its hook if it has
/// one (one more load).
#[inline(always)]
pub(crate) fn inside() -> Option<Option<Hook>> {
    let f = ts().current.get();
    if f.is_null() {
        return None;
    }
    // SAFETY: `current` is the live running function. Its hook is set at
    // launch and taken only when its stack is given back: reading it in
    // place while it runs races with nothing.
    let h = unsafe { (*(*f).park.as_ptr()).as_deref() };
    Some(h.map(|h| Hook(NonNull::from(h))))
}

/// May the running function park here, that is, would the hook's `pause()`
/// switch it out? Not inside one of the program's signal handlers (the
/// interrupted code may hold anything), nor where `pause()` would not stop
/// (see `preempt::can_pause_here`).
#[inline(never)]
fn may_park() -> bool {
    !crate::handlers::program_signals::in_program_handler() && crate::handlers::preempt::can_pause_here()
}

/// Hands one wait to the hook if the function may park here. False means
/// "make the blocking call instead" (counted). A wrapper the hook itself
/// calls (it runs inside the function) does not park again. The hook's
/// errno is not the program's.
#[inline(never)]
pub(crate) fn park(wait: impl FnOnce() -> bool) -> bool {
    let frame = ts().current.get();
    // SAFETY: a non-null `current` is the running function. Its frame moves
    // with it (the header of its stack), so the reference stays valid across
    // the switch the hook makes, even if it resumes on another thread.
    let Some(f) = (unsafe { frame.as_ref() }) else { return false };
    // Before the walk: the table it reads is this generation or newer.
    f.judged_gen.set(crate::judgement::ranges::generation());
    if f.parked.get() || !may_park() {
        bump(&ts().parks_blocked);
        return false;
    }
    let e = errno();
    f.parked.set(true);
    // `may_park` just walked the chain from here up and found it clear;
    // the hook's `pause()` need only walk its own frames, below this one.
    let mark = 0u8;
    f.judged_above.set(std::hint::black_box(&mark) as *const u8 as usize);
    let ok = wait();
    f.judged_above.set(0);
    f.parked.set(false);
    set_errno(e);
    // The thread's state read again: it may be another thread now.
    bump(if ok { &ts().parks } else { &ts().parks_blocked });
    ok
}

/// Is `fd` a stream that cannot seek: a pipe, FIFO or socket (or a tty or
/// stream device, which refuse the non-blocking attempt with `EOPNOTSUPP`
/// unless they honour it)? Those are the descriptors whose reads and writes
/// try `RWF_NOWAIT` and park; regular files, block devices and anything
/// else that seeks keep their blocking call (`RWF_NOWAIT` on a regular file
/// could return a short read where the blocking call reads everything).
/// `lseek(fd, 0, SEEK_CUR)` answers without side effects, in a third of
/// what `fstat` costs (85 against 250 ns here).
pub(crate) fn streams(fd: c_int) -> bool {
    let e = errno();
    // SAFETY: a query of the position: changes nothing.
    let r = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
    let pipe = r == -1 && errno() == libc::ESPIPE;
    set_errno(e);
    pipe
}

/// Has the program made `fd` non-blocking? From what its calls set
/// (`fd_modes`) when that is known, else asked of the kernel.
pub(crate) fn nonblocking(fd: c_int) -> bool {
    if let Some(m) = super::fd_modes::get(fd) {
        return m.nonblock;
    }
    // SAFETY: F_GETFL takes no argument.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl != -1 && fl & libc::O_NONBLOCK != 0
}

/// The socket timeout (SO_RCVTIMEO for input, SO_SNDTIMEO for output) of
/// `fd`, if it is a socket with one: from what its calls set (`fd_modes`)
/// when that is known, else asked of the kernel.
pub(crate) fn socket_timeout(fd: c_int, input: bool) -> Option<libc::timespec> {
    if let Some(m) = super::fd_modes::get(fd) {
        let ns = if input { m.rcv } else { m.snd };
        return (ns != 0).then_some(libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long });
    }
    asked_socket_timeout(fd, input)
}

/// [`socket_timeout`] as the kernel has it (the value it rounded to its
/// clock's ticks).
pub(crate) fn asked_socket_timeout(fd: c_int, input: bool) -> Option<libc::timespec> {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
    let opt = if input { libc::SO_RCVTIMEO } else { libc::SO_SNDTIMEO };
    // SAFETY: valid out pointers of the right size.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, opt, &mut tv as *mut libc::timeval as *mut libc::c_void, &mut len) };
    (r == 0 && (tv.tv_sec > 0 || tv.tv_usec > 0))
        .then(|| libc::timespec { tv_sec: tv.tv_sec, tv_nsec: tv.tv_usec * 1000 })
}

/// What a wrapper does after an attempt that would block.
pub(crate) enum Next {
    /// Parked and resumed: try again.
    Retry,
    /// Fail with this errno (`EAGAIN`: the program's own non-blocking
    /// descriptor, or an expired socket timeout; `EINTR`: the program's
    /// handler ran where the blocking call would have ended).
    Fail(c_int),
    /// Could not park: make the blocking call.
    Block,
}

/// One parked call on one descriptor: what it waits for, found out lazily
/// on the way (the first attempt that would block reads the descriptor's
/// flags and, for a socket, its timeout).
pub(crate) struct Waiter {
    hook: Hook,
    fd: c_int,
    interest: Interest,
    /// Maybe a socket: it may have `SO_RCVTIMEO`/`SO_SNDTIMEO`.
    socket: bool,
    /// The call is restarted by the kernel after `SA_RESTART` handlers
    /// (which then do not end it).
    restartable: bool,
    deadline: Option<Option<Deadline>>,
    mark: Mark,
}

impl Waiter {
    pub(crate) fn new(hook: Hook, fd: c_int, interest: Interest, socket: bool) -> Waiter {
        Waiter { hook, fd, interest, socket, restartable: true, deadline: None, mark: Mark::now() }
    }

    /// The call succeeded: its result, with the program's errno back.
    pub(crate) fn done<R>(&self, r: R) -> R {
        self.mark.restore_errno();
        r
    }

    /// The attempt failed with EAGAIN: see [`Next`].
    pub(crate) fn would_block(&mut self) -> Next {
        if self.deadline.is_none() {
            // First time: the program's own non-blocking descriptor says
            // EAGAIN, as it always did.
            if nonblocking(self.fd) {
                return Next::Fail(libc::EAGAIN);
            }
            let t = if self.socket { socket_timeout(self.fd, self.interest == Interest::Read) } else { None };
            // A socket with a timeout: EINTR after any handler (signal(7)).
            self.restartable = t.is_none();
            self.deadline = Some(t.map(|t| Deadline::after(&t)));
        }
        let d = self.deadline.flatten();
        if d.is_some_and(|d| d.passed()) {
            return Next::Fail(libc::EAGAIN);
        }
        let (h, fd, interest) = (self.hook, self.fd, self.interest);
        if !park(|| h.get().wait_fd(fd, interest, d.map(|d| d.since_epoch()))) {
            return Next::Block;
        }
        if self.mark.program_handler_ran(self.restartable) {
            return Next::Fail(libc::EINTR);
        }
        Next::Retry
    }
}

/// The poll family with a hook: `try_now()` makes the call with a zero
/// timeout; while nothing is ready, `wait()` parks (through [`park`]) until
/// something may be, and the call is made again, so that what it reports
/// is the kernel's own. At the deadline, 0 (the zero-timeout call's answer,
/// with what it left in the caller's buffers). None: could not park, make
/// the blocking call for what is left of the timeout.
pub(crate) fn until_ready(deadline: Option<&Deadline>, mut try_now: impl FnMut() -> c_int, mut wait: impl FnMut() -> bool) -> Option<c_int> {
    let m = Mark::now();
    loop {
        let r = try_now();
        if r == -1 && errno() == libc::EINTR && m.preempted_only() {
            continue;
        }
        if r != 0 {
            if r > 0 {
                m.restore_errno();
            }
            return Some(r);
        }
        if deadline.is_some_and(Deadline::passed) {
            m.restore_errno();
            return Some(0);
        }
        if !wait() {
            return None;
        }
        // A program handler that ran meanwhile on the function's side (a
        // held signal) ends the wait, as it would have ended the real one.
        if m.program_handler_ran(false) {
            set_errno(libc::EINTR);
            return Some(-1);
        }
    }
}

/// `hook.wait_fds` for the poll family, through [`park`].
pub(crate) fn wait_fds(h: Hook, fds: &[(c_int, Interest)], deadline: Option<&Deadline>) -> bool {
    park(|| h.get().wait_fds(fds, deadline.map(Deadline::since_epoch)))
}

/// `hook.wait_fd` for one descriptor (`epoll_wait` on its epoll
/// descriptor), through [`park`].
pub(crate) fn wait_fd(h: Hook, fd: c_int, interest: Interest, deadline: Option<&Deadline>) -> bool {
    park(|| h.get().wait_fd(fd, interest, deadline.map(Deadline::since_epoch)))
}

/// `hook.offload`, through [`park`]: false (and `work` dropped unrun) if
/// the function may not park here or the hook cannot.
pub(crate) fn offload(h: Hook, work: Box<dyn FnOnce() + Send>) -> bool {
    park(|| h.get().offload(work))
}

/// `hook.sleep_until`, through [`park`].
pub(crate) fn sleep_until(h: Hook, deadline: Duration) -> bool {
    park(|| h.get().sleep_until(deadline))
}

/// A transfer on a pipe, FIFO or socket with a hook: `attempt(iov, n,
/// first)` moves data without blocking, from the part of `v` that is left
/// (the caller's own iovecs while nothing moved: `first`); parks while it
/// would block. Reads return after the first transfer (or end of file);
/// with `all` (writes, `MSG_WAITALL`), it goes on until everything moved,
/// as the blocking call would. Attempts refused as a whole (`EOPNOTSUPP`,
/// `EINVAL`: a kernel or file type without `RWF_NOWAIT`), and waits that
/// cannot park, fall back to the blocking call: `whole()` before anything
/// moved, `piece(base, len)` for each piece left after.
pub(crate) struct Transfer<'a> {
    pub waiter: Waiter,
    pub v: &'a [iovec],
    pub all: bool,
}

impl Transfer<'_> {
    pub(crate) fn run(
        mut self,
        mut attempt: impl FnMut(*const iovec, c_int, bool) -> ssize_t,
        whole: impl FnOnce() -> ssize_t,
        mut piece: impl FnMut(*mut u8, usize) -> ssize_t,
    ) -> ssize_t {
        let total = self.v.iter().fold(0usize, |a, e| a.saturating_add(e.iov_len));
        let mut done = 0usize;
        let mut one: iovec;
        loop {
            let (i, off) = locate(self.v, done);
            let (p, n) = if i == self.v.len() || (i == 0 && off == 0) {
                (self.v.as_ptr(), self.v.len())
            } else if off == 0 {
                (self.v[i..].as_ptr(), self.v.len() - i)
            } else {
                let e = &self.v[i];
                // SAFETY: `off` lies inside this iovec of the caller's.
                one = iovec { iov_base: unsafe { (e.iov_base as *mut u8).add(off) }.cast(), iov_len: e.iov_len - off };
                (&one as *const iovec, 1)
            };
            let r = attempt(p, n.min(c_int::MAX as usize) as c_int, done == 0);
            if r >= 0 {
                done += r as usize;
                if !self.all || r == 0 || done >= total {
                    return self.waiter.done(done as ssize_t);
                }
                continue;
            }
            let e = errno();
            let next = match e {
                libc::EAGAIN => self.waiter.would_block(),
                libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS => Next::Block,
                _ => Next::Fail(e),
            };
            match next {
                Next::Retry => continue,
                Next::Fail(e) => {
                    if done > 0 {
                        return self.waiter.done(done as ssize_t);
                    }
                    set_errno(e);
                    return -1;
                }
                Next::Block if done == 0 => {
                    // The program's errno, not the attempt's; the mark ends
                    // before the blocking call's begins.
                    self.waiter.done(());
                    drop(self.waiter);
                    return whole();
                }
                Next::Block => {
                    // Something moved already: the rest, piece by piece, the
                    // blocking way (the call is no longer atomic anyway).
                    let (mut i, mut off) = locate(self.v, done);
                    while i < self.v.len() {
                        let e = &self.v[i];
                        // SAFETY: a tail of one of the caller's buffers.
                        let base = unsafe { (e.iov_base as *mut u8).add(off) };
                        let len = e.iov_len - off;
                        let r = piece(base, len);
                        if r < 0 {
                            break;
                        }
                        done += r as usize;
                        if (r as usize) < len || !self.all {
                            break;
                        }
                        (i, off) = (i + 1, 0);
                    }
                    return self.waiter.done(done as ssize_t);
                }
            }
        }
    }
}

/// Where `done` bytes into `v` are: the index of the iovec and the offset in
/// it (`v.len()` when all of it is done), skipping empty iovecs.
pub(crate) fn locate(v: &[iovec], mut done: usize) -> (usize, usize) {
    for (i, e) in v.iter().enumerate() {
        if done < e.iov_len {
            return (i, done);
        }
        done -= e.iov_len;
    }
    (v.len(), 0)
}
