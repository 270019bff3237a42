//! Waiting for child processes: `wait`, `waitpid`, `wait3`, `wait4`, `waitid`.
//!
//! The kernel restarts these after a handler with SA_RESTART (ours has it),
//! so without a wrapper a function waiting for a child could not be stopped
//! at the system call: libc's wrapper would be on the stack, and that is
//! deferred code. Marked as blocking, the wait may be stopped there; the
//! handler then makes the call fail with EINTR into the wrapper (see
//! `preempt::interrupt_blocked_call`), which waits again unless one of the
//! program's own handlers without SA_RESTART ran since the call began: the
//! program sees the EINTR it would see without linger, and no other.
//! (`std::process::Child::wait` calls `waitpid`, or `waitid` on a pidfd.)

use libc::{c_int, id_t, idtype_t, pid_t, rusage, siginfo_t};

use super::call::{in_function, retry_restartable};
use crate::base::sys::{or_enosys, real};

type WaitFn = unsafe extern "C" fn(*mut c_int) -> pid_t;
type WaitpidFn = unsafe extern "C" fn(pid_t, *mut c_int, c_int) -> pid_t;
type Wait3Fn = unsafe extern "C" fn(*mut c_int, c_int, *mut rusage) -> pid_t;
type Wait4Fn = unsafe extern "C" fn(pid_t, *mut c_int, c_int, *mut rusage) -> pid_t;
type WaitidFn = unsafe extern "C" fn(idtype_t, id_t, *mut siginfo_t, c_int) -> c_int;

fn real_wait() -> Option<WaitFn> {
    real!("wait", WaitFn)
}
fn real_waitpid() -> Option<WaitpidFn> {
    real!("waitpid", WaitpidFn)
}
fn real_wait3() -> Option<Wait3Fn> {
    real!("wait3", Wait3Fn)
}
fn real_wait4() -> Option<Wait4Fn> {
    real!("wait4", Wait4Fn)
}
fn real_waitid() -> Option<WaitidFn> {
    real!("waitid", WaitidFn)
}

pub(crate) fn prepare() {
    let _ = (real_wait(), real_waitpid(), real_wait3(), real_wait4(), real_waitid());
}

/// Calls `f` directly outside preemptible functions, else retried.
#[inline(always)]
fn wrapped<R: PartialEq + From<i8>>(mut f: impl FnMut() -> R) -> R {
    if in_function() {
        retry_restartable(f)
    } else {
        f()
    }
}

/// # Safety
/// Same contract as POSIX `wait`.
#[no_mangle]
pub unsafe extern "C" fn wait(status: *mut c_int) -> pid_t {
    let real = or_enosys!(real_wait());
    // SAFETY: forwarded verbatim.
    wrapped(|| unsafe { real(status) })
}

/// # Safety
/// Same contract as POSIX `waitpid`.
#[no_mangle]
pub unsafe extern "C" fn waitpid(pid: pid_t, status: *mut c_int, options: c_int) -> pid_t {
    let real = or_enosys!(real_waitpid());
    // SAFETY: forwarded verbatim.
    wrapped(|| unsafe { real(pid, status, options) })
}

/// # Safety
/// Same contract as BSD `wait3`.
#[no_mangle]
pub unsafe extern "C" fn wait3(status: *mut c_int, options: c_int, usage: *mut rusage) -> pid_t {
    let real = or_enosys!(real_wait3());
    // SAFETY: forwarded verbatim.
    wrapped(|| unsafe { real(status, options, usage) })
}

/// # Safety
/// Same contract as BSD `wait4`.
#[no_mangle]
pub unsafe extern "C" fn wait4(pid: pid_t, status: *mut c_int, options: c_int, usage: *mut rusage) -> pid_t {
    let real = or_enosys!(real_wait4());
    // SAFETY: forwarded verbatim.
    wrapped(|| unsafe { real(pid, status, options, usage) })
}

/// # Safety
/// Same contract as POSIX `waitid`.
#[no_mangle]
pub unsafe extern "C" fn waitid(idtype: idtype_t, id: id_t, info: *mut siginfo_t, options: c_int) -> c_int {
    let real = or_enosys!(real_waitid());
    // SAFETY: forwarded verbatim.
    wrapped(|| unsafe { real(idtype, id, info, options) })
}
