//! The `exec` family: the new image must start clean.
//!
//! `execve` keeps pending signals and the signal mask, and resets handlers
//! to their default action, which for a real-time signal is "terminate". A
//! preemption signal that is pending (or that the timer raises) while the
//! kernel replaces the image would therefore kill the new program before its
//! first instruction. Before the exec we block the signal, stop this thread's
//! timer, discard any pending instance (setting a signal to SIG_IGN does
//! that), restore the default disposition and the program's mask; if the
//! exec fails, the handler and the deadline come back.
//!
//! If other threads of the process own preemption timers, one of them could
//! fire between our reset and the moment the kernel stops those threads, and
//! with the default action it would kill the process: then the disposition
//! stays SIG_IGN, which the new image inherits (harmless unless it uses this
//! exact real-time signal).
//!
//! `vfork` children share our memory but not our signal state or timers;
//! the steps below touch only kernel state of the calling process, plus the
//! `armed` cell, whose reset only costs the parent a redundant re-arm.
//!
//! `posix_spawn`, `system` and `popen` need nothing here: their child is a
//! new process (no pending signals, no timers) and glibc resets its
//! handlers. All of them add linger-run's variables with `--children`
//! ([`super::child_env`]).
//! The variadic `execl`, `execle` and `execlp` cannot be written in stable
//! Rust, so small naked functions gather their arguments (see below).

use libc::{c_char, c_int};

use crate::handlers::program_signals::shadow_ignored;
use crate::machine::signal::{preemption_signal, real_pthread_sigmask, real_sigaction};
use super::child_env;
use crate::base::sys::{errno, real, set_errno};
use crate::state::thread::ts;

type ExecveFn = unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
type ExecveatFn = unsafe extern "C" fn(c_int, *const c_char, *const *const c_char, *const *const c_char, c_int) -> c_int;

fn real_execve() -> Option<ExecveFn> {
    real!("execve", ExecveFn)
}
fn real_execv() -> Option<ExecvFn> {
    real!("execv", ExecvFn)
}
fn real_execvp() -> Option<ExecvFn> {
    real!("execvp", ExecvFn)
}
fn real_execvpe() -> Option<ExecveFn> {
    real!("execvpe", ExecveFn)
}
fn real_fexecve() -> Option<FexecveFn> {
    real!("fexecve", FexecveFn)
}
fn real_execveat() -> Option<ExecveatFn> {
    real!("execveat", ExecveatFn)
}

pub(crate) fn prepare() {
    let _ = (real_execve(), real_execv(), real_execvp(), real_execvpe(), real_fexecve(), real_execveat());
}

/// What to undo if the exec fails.
struct Prepared {
    signo: c_int,
}

/// Leaves no preemption signal pending, armed or handled. `None` if the
/// runtime never started in this process (nothing to do).
fn before_exec() -> Option<Prepared> {
    let signo = crate::machine::signal::number();
    if signo == 0 || preemption_signal() != signo {
        return None;
    }
    let (sigaction, sigmask) = (real_sigaction()?, real_pthread_sigmask()?);
    // SAFETY: local sigsets and sigactions, valid pointers throughout.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, signo);
        sigmask(libc::SIG_BLOCK, &block, &mut old);
        crate::machine::timer::disarm(ts());
        if crate::machine::signal::in_owner_process() {
            // The monitor sends this thread nothing more (a `vfork` child
            // must leave the parent's slot alone: the monitor's signals go
            // to the parent's thread anyway).
            crate::machine::monitor::shut(ts());
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_sigaction = libc::SIG_IGN; // discards what is pending
        sigaction(signo, &sa, std::ptr::null_mut());
        if !shadow_ignored() && crate::machine::timer::live_timers() <= 1 {
            sa.sa_sigaction = libc::SIG_DFL;
            sigaction(signo, &sa, std::ptr::null_mut());
        }
        libc::sigdelset(&mut old, signo);
        sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    Some(Prepared { signo })
}

/// The exec failed: preemption comes back (errno is preserved).
fn after_failed_exec(p: Option<Prepared>) {
    let Some(p) = p else { return };
    let e = errno();
    let _ = crate::handlers::preempt::set_handler(p.signo);
    let t = ts();
    if crate::machine::signal::in_owner_process() {
        crate::machine::monitor::reopen(t);
    }
    let frame = t.current.get();
    if !frame.is_null() {
        // SAFETY: `current` is the live running function.
        crate::handlers::preempt::rearm_for(t, unsafe { (*frame).deadline.get() });
    }
    set_errno(e);
}

/// Told of each exec the program is about to make (see [`on_exec`]).
static OBSERVER: crate::base::hook::Hook<fn(Option<&std::ffi::CStr>)> = crate::base::hook::Hook::new();

/// Registers `f`, which each exec of the exec family then calls first, with
/// the path or file name asked for (`None` for `fexecve`), in the process
/// whose image it replaces, and never in a `vfork` child (which shares the
/// parent's memory and must do nothing but exec). The exec may still fail.
/// For a tool that runs programs (`linger-run`): the new image starts
/// without the old one's preemption, so it can say so, and give the old
/// image's statistics before they are gone. Called outside any
/// preemptible state change; `f` should only write (no locks the program
/// may hold: the exec may be made in a child after `fork`).
pub fn on_exec(f: fn(Option<&std::ffi::CStr>)) {
    OBSERVER.set(f);
}

/// Calls the observer for an exec of `path` (null: `fexecve`).
fn observe(path: *const c_char) {
    if !crate::machine::signal::in_owner_process() {
        return;
    }
    if let Some(f) = OBSERVER.get() {
        // SAFETY: a non-null `path` is the exec's NUL-terminated argument.
        f((!path.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(path) }));
    }
}

macro_rules! guarded {
    ($path:expr; $real:expr, $($arg:expr),*) => {{
        let Some(real) = $real else {
            set_errno(libc::ENOSYS);
            return -1;
        };
        observe($path);
        // Not stopped half-way: once the handler is gone, a stop (and the
        // deadline armed when it resumes) would meet the default action. A
        // `vfork` child is never stopped (our timer signals go to the
        // parent), and must not leave the parent's scope count raised.
        let _scope = crate::machine::signal::in_owner_process().then(crate::state::guard::Scope::enter_from_c);
        let p = before_exec();
        // SAFETY: forwarded verbatim; it only returns on failure.
        let r = unsafe { real($($arg),*) };
        after_failed_exec(p);
        r
    }};
}

/// # Safety
/// Same contract as POSIX `execve`.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    child_env::with(envp, |envp| guarded!(path; real_execve(), path, argv, envp))
}

/// # Safety
/// Same contract as POSIX `execv`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    if child_env::active() {
        // SAFETY: execv is execve with the process's environment.
        return unsafe { execve(path, argv, child_env::current()) };
    }
    guarded!(path; real_execv(), path, argv)
}

/// # Safety
/// Same contract as POSIX `execvp`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    if child_env::active() {
        // SAFETY: execvp is execvpe with the process's environment.
        return unsafe { execvpe(file, argv, child_env::current()) };
    }
    guarded!(file; real_execvp(), file, argv)
}

/// # Safety
/// Same contract as GNU `execvpe`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    child_env::with(envp, |envp| guarded!(file; real_execvpe(), file, argv, envp))
}

/// # Safety
/// Same contract as POSIX `fexecve`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
    child_env::with(envp, |envp| guarded!(std::ptr::null(); real_fexecve(), fd, argv, envp))
}

/// # Safety
/// Same contract as Linux `execveat`.
#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    child_env::with(envp, |envp| guarded!(path; real_execveat(), dirfd, path, argv, envp, flags))
}

// The list forms. On x86-64 a variadic call passes the first six integer
// arguments in registers and the rest on the stack, and stable Rust cannot
// read them, so each entry point is a naked function that spills the five
// argument registers after `path` next to the caller's stack arguments and
// hands both areas to `exec_list`, which rebuilds `argv` (and finds `envp`
// after its NULL for execle).

const EXECL: c_int = 0;
const EXECLP: c_int = 1;
const EXECLE: c_int = 2;

/// Argument `i` of the variadic list (0 is `arg0`).
///
/// # Safety
/// `regs` holds the five register arguments, `stack` the caller's stack
/// arguments, and the list is NULL-terminated within them.
unsafe fn list_arg(regs: *const *const c_char, stack: *const *const c_char, i: usize) -> *const c_char {
    // SAFETY: per the contract, index i is within the caller's arguments.
    unsafe {
        if i < 5 {
            *regs.add(i)
        } else {
            *stack.add(i - 5)
        }
    }
}

/// Upper bound on list arguments (Linux accepts at most 2^31 bytes of
/// arguments, so no real call comes close to this many pointers).
const MAX_LIST_ARGS: usize = 1 << 20;

/// # Safety
/// Called only by the naked entry points below, with their spilled arguments.
unsafe extern "C" fn exec_list(kind: c_int, path: *const c_char, regs: *const *const c_char, stack: *const *const c_char) -> c_int {
    let mut n = 0;
    // SAFETY: the caller's list is NULL-terminated (the exec contract).
    while n < MAX_LIST_ARGS && !unsafe { list_arg(regs, stack, n) }.is_null() {
        n += 1;
    }
    if n == MAX_LIST_ARGS {
        set_errno(libc::E2BIG);
        return -1;
    }
    // On the stack when it fits: a vfork child (the usual caller) must not
    // touch the allocator it shares with the parent's other threads.
    let mut small = [std::ptr::null::<c_char>(); 256];
    let mut big: Vec<*const c_char> = Vec::new();
    let argv: &mut [*const c_char] = if n < small.len() {
        &mut small[..n + 1]
    } else {
        big.resize(n + 1, std::ptr::null());
        &mut big
    };
    for (i, a) in argv.iter_mut().take(n).enumerate() {
        // SAFETY: indices below the terminator.
        *a = unsafe { list_arg(regs, stack, i) };
    }
    // SAFETY: forwarding to our own guarded wrappers with a valid argv.
    unsafe {
        match kind {
            EXECLP => execvp(path, argv.as_ptr()),
            // execle: the environment follows the terminating NULL.
            EXECLE => execve(path, argv.as_ptr(), list_arg(regs, stack, n + 1) as *const *const c_char),
            _ => execv(path, argv.as_ptr()),
        }
    }
}

/// The shared body of the list forms: `eax` holds the kind.
#[unsafe(naked)]
unsafe extern "C" fn exec_list_entry() {
    core::arch::naked_asm!(
        "push rbp",
        "mov rbp, rsp",
        "sub rsp, 48",
        "mov [rbp - 40], rsi",
        "mov [rbp - 32], rdx",
        "mov [rbp - 24], rcx",
        "mov [rbp - 16], r8",
        "mov [rbp - 8], r9",
        "mov rsi, rdi",
        "mov edi, eax",
        "lea rdx, [rbp - 40]",
        "lea rcx, [rbp + 16]",
        "call {body}",
        "leave",
        "ret",
        body = sym exec_list,
    )
}

/// # Safety
/// Same contract as POSIX `execl` (declared here without its variadic tail).
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execl(path: *const c_char, arg0: *const c_char) -> c_int {
    core::arch::naked_asm!("mov eax, {k}", "jmp {entry}", k = const EXECL, entry = sym exec_list_entry)
}

/// # Safety
/// Same contract as POSIX `execlp` (declared here without its variadic tail).
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execlp(file: *const c_char, arg0: *const c_char) -> c_int {
    core::arch::naked_asm!("mov eax, {k}", "jmp {entry}", k = const EXECLP, entry = sym exec_list_entry)
}

/// # Safety
/// Same contract as POSIX `execle` (declared here without its variadic tail).
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn execle(path: *const c_char, arg0: *const c_char) -> c_int {
    core::arch::naked_asm!("mov eax, {k}", "jmp {entry}", k = const EXECLE, entry = sym exec_list_entry)
}
