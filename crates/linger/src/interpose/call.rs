//! What every interposed call does around the libc call it wraps: is the
//! caller in a preemptible function, the mark that lets the handler stop
//! it at the system call itself, and the signal counts that tell an
//! interruption by preemption (retried) from one by the program's own
//! handler (reported, as libc would).

use libc::c_int;

use crate::base::arch::stack_pointer;
use crate::base::sys::{errno, set_errno};
use crate::state::thread::ts;

/// Is the caller inside a preemptible function? (The wrappers' fast path.)
#[inline(always)]
pub(crate) fn in_function() -> bool {
    !ts().current.get().is_null()
}

/// Runs `f` (a libc blocking call) marked as preemptible at its system call.
#[inline(always)]
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let frame = ts().current.get();
    if frame.is_null() {
        return f();
    }
    // SAFETY: `current` is our running function; its frame outlives this call
    // (even if we are preempted and resumed elsewhere, the frame moves with us).
    let fr = unsafe { &*frame };
    let prev = fr.blocking_sp.get();
    fr.blocking_sp.set(stack_pointer());
    let r = f();
    fr.blocking_sp.set(prev);
    r
}

/// Which signal handlers ran between two points: lets a wrapper tell an
/// interruption by preemption (retry it) from one by the program's own
/// signal handler (report it, as libc would).
///
/// Wrappers take their mark once, when the program's call begins, not before
/// each retry: a handler that runs between two attempts (the retry itself is
/// not atomic) then still makes the call fail with EINTR, at the latest when
/// the next preemption interrupts the attempt that followed. The mark lives
/// as long as the program's call: when it ends, a deadline that was left
/// while the call blocked is taken (see `preempt::blocked_call_returns`).
pub(crate) struct Mark {
    at: Counts,
    /// The program's errno when its call began: a retried attempt's EINTR
    /// must not show after a call that then succeeds.
    errno: c_int,
}

/// The signal counts of the running function (or of the thread).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Counts {
    /// The running function (its counts), or null and the thread's id.
    frame: *mut crate::state::thread::Frame,
    thread: u64,
    ours: u64,
    theirs: u64,
    interrupting: u64,
}

impl Counts {
    fn now() -> Counts {
        let t = ts();
        let frame = t.current.get();
        let thread = if frame.is_null() { crate::state::thread::thread_key() } else { 0 };
        let c = crate::state::thread::signal_counts(t);
        Counts { frame, thread, ours: c.ours.get(), theirs: c.theirs.get(), interrupting: c.interrupting.get() }
    }
}

impl Mark {
    pub(crate) fn now() -> Mark {
        Mark { at: Counts::now(), errno: errno() }
    }

    /// Did only the preemption signal interrupt us since `self`? For calls
    /// that fail with EINTR after any handler.
    pub(crate) fn preempted_only(&self) -> bool {
        self.judge(|now| now.theirs == self.at.theirs)
    }

    /// The same for calls the kernel restarts after handlers installed with
    /// `SA_RESTART`: only the program's other handlers count.
    pub(crate) fn preempted_only_restartable(&self) -> bool {
        self.judge(|now| now.interrupting == self.at.interrupting)
    }

    /// Did one of the program's own handlers run since `self` on this
    /// flow of control: any (`restartable` false), or one installed without
    /// `SA_RESTART`? For parked calls, which no signal interrupts: a
    /// handler that ran meanwhile (a held signal, when the function resumed)
    /// ends the call with EINTR where the blocking call would have ended.
    pub(crate) fn program_handler_ran(&self, restartable: bool) -> bool {
        let now = Counts::now();
        let then = &self.at;
        if now.frame != then.frame || now.thread != then.thread {
            return false;
        }
        if restartable {
            now.interrupting != then.interrupting
        } else {
            now.theirs != then.theirs
        }
    }

    /// Gives the program back its errno from when the call began (after
    /// attempts that failed on the way to a result).
    pub(crate) fn restore_errno(&self) {
        set_errno(self.errno);
    }

    /// True means "retry": errno is then reset to the program's.
    fn judge(&self, quiet: impl FnOnce(&Counts) -> bool) -> bool {
        let now = Counts::now();
        let then = &self.at;
        // Counts of another frame or thread are not comparable (cannot
        // happen within one call of a function, whose counts move with it):
        // assume preemption.
        let ours = now.frame != then.frame || now.thread != then.thread || (now.ours != then.ours && quiet(&now));
        if ours {
            set_errno(self.errno);
        }
        ours
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        if !self.at.frame.is_null() {
            let e = errno();
            crate::handlers::preempt::blocked_call_returns();
            set_errno(e);
        }
    }
}

/// Calls `f` until it fails with anything but an EINTR caused by preemption
/// alone, for calls that return -1 and set errno, have no timeout and are
/// never restarted after a handler (System V IPC).
#[inline]
pub(crate) fn retry<R: PartialEq + From<i8>>(f: impl FnMut() -> R) -> R {
    retry_unless(Mark::preempted_only, f)
}

/// The same for calls the kernel restarts after `SA_RESTART` handlers (the
/// `wait` family): only the program's handlers without it end them.
#[inline]
pub(crate) fn retry_restartable<R: PartialEq + From<i8>>(f: impl FnMut() -> R) -> R {
    retry_unless(Mark::preempted_only_restartable, f)
}

#[inline]
fn retry_unless<R: PartialEq + From<i8>>(ours: fn(&Mark) -> bool, mut f: impl FnMut() -> R) -> R {
    let m = Mark::now();
    loop {
        let r = blocking(&mut f);
        if r == R::from(-1) && errno() == libc::EINTR && ours(&m) {
            continue;
        }
        return r;
    }
}
