//! `liblinger_as_safe.so`: libas-safe for unmodified programs.
//!
//! `LD_PRELOAD=liblinger_as_safe.so PROGRAM` lets PROGRAM's signal handlers
//! call functions that are not async-signal-safe (`printf`, `malloc`): a
//! handler never runs while its thread is inside libc, the loader or other
//! library code (what linger never preempts); such a signal is held until
//! that call returns. The work is done by linger's `sigaction` interposition
//! in its holding mode (`linger::deferral`); this library only switches the
//! mode on and tells linger where each thread's own code begins:
//!
//! - `__libc_start_main`, which `_start` calls with `main`: turns the mode on
//!   (in the copy of linger whose `sigaction` the program calls, found with
//!   `dlsym(RTLD_DEFAULT)`: with `liblinger_run.so` preloaded first, that is
//!   its copy, and the two share one trampoline) and runs `main` from a frame
//!   that marks the main thread's entry;
//! - `pthread_create`: each new thread marks its entry before its start
//!   routine runs.
//!
//! The frames above an entry (libc's start-up code) are never judged: they
//! are the program's callers, not calls it made.

// The one architecture: a clear error elsewhere, not a build that fails
// deep inside an `asm!` block.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("libas-safe runs on x86-64 Linux only, as linger, which it is built on");

mod arch;

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{c_char, c_int, c_void};

type Main = unsafe extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) -> c_int;
type Start = unsafe extern "C" fn(Main, c_int, *mut *mut c_char, *mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int;
type Routine = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type Create = unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, Routine, *mut c_void) -> c_int;
type Enter = extern "C" fn(usize) -> c_int;
type Enable = extern "C" fn() -> c_int;

/// The program's `main`.
static REAL_MAIN: AtomicUsize = AtomicUsize::new(0);
/// `linger_as_safe_enter_thread` of the copy of linger in charge, once the
/// mode is on (0 before, or if it could not start).
static ENTER: AtomicUsize = AtomicUsize::new(0);

fn say(msg: &str) {
    let line = format!("liblinger_as_safe: {msg}\n");
    // SAFETY: writing a valid buffer to fd 2; a failure leaves nothing to do.
    unsafe { libc::write(2, line.as_ptr() as *const c_void, line.len()) };
}

fn lookup(handle: *mut c_void, name: &std::ffi::CStr) -> usize {
    // SAFETY: dlsym with a NUL-terminated name.
    unsafe { libc::dlsym(handle, name.as_ptr()) as usize }
}

/// Turns the mode on in the copy of linger the program's `sigaction` binds
/// to: the first definition in the global scope, as the loader binds it.
fn enable() {
    // Our own copy when nothing comes first (the reference also makes the
    // linker keep linger, and so its exported wrappers, in this library).
    let on = match lookup(libc::RTLD_DEFAULT, c"linger_as_safe_enable") {
        0 => linger::deferral::linger_as_safe_enable as Enable as usize,
        f => f,
    };
    let enter = match lookup(libc::RTLD_DEFAULT, c"linger_as_safe_enter_thread") {
        0 => linger::deferral::linger_as_safe_enter_thread as Enter as usize,
        f => f,
    };
    // SAFETY: linger's `extern "C" fn() -> c_int` of that name.
    let on: Enable = unsafe { std::mem::transmute::<usize, Enable>(on) };
    if on() != 0 {
        return say(&format!(
            "cannot start ({}); signal handlers run as without this library",
            std::io::Error::last_os_error()
        ));
    }
    ENTER.store(enter, Ordering::Release);
}

/// Marks the calling thread's entry (0: none any more).
fn enter(entry: usize) {
    let f = ENTER.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: stored by `enable` from linger's function of that type.
        let f: Enter = unsafe { std::mem::transmute::<usize, Enter>(f) };
        f(entry);
    }
}

/// The stack pointer, less one word: the entry for a call made from the
/// same frame. A callee's frames all lie below its return address, one word
/// under the caller's stack pointer at the call.
#[inline(always)]
fn entry_here() -> usize {
    arch::stack_pointer() - 8
}

/// glibc's entry point, called by the program's `_start`.
///
/// # Safety
/// Called only by `_start` (or by an earlier preloaded wrapper of it), with
/// the arguments it passes to glibc.
#[no_mangle]
pub unsafe extern "C" fn __libc_start_main(
    main: Main,
    argc: c_int,
    argv: *mut *mut c_char,
    init: *mut c_void,
    fini: *mut c_void,
    rtld_fini: *mut c_void,
    stack_end: *mut c_void,
) -> c_int {
    // The next definition: glibc's, or another preloaded wrapper's.
    let real = lookup(libc::RTLD_NEXT, c"__libc_start_main");
    if real == 0 {
        say("cannot find glibc's __libc_start_main");
        // SAFETY: terminating the process is always allowed.
        unsafe { libc::_exit(127) };
    }
    // SAFETY: glibc's __libc_start_main has exactly this signature.
    let real: Start = unsafe { std::mem::transmute::<usize, Start>(real) };
    REAL_MAIN.store(main as usize, Ordering::Relaxed);
    enable();
    // SAFETY: forwarding _start's arguments, with our main in place of its.
    unsafe { real(as_safe_main, argc, argv, init, fini, rtld_fini, stack_end) }
}

/// Runs the program's `main` one frame below the main thread's entry.
#[inline(never)]
unsafe extern "C" fn as_safe_main(argc: c_int, argv: *mut *mut c_char, envp: *mut *mut c_char) -> c_int {
    // SAFETY: stored by __libc_start_main before glibc calls us.
    let main: Main = unsafe { std::mem::transmute::<usize, Main>(REAL_MAIN.load(Ordering::Relaxed)) };
    enter(entry_here());
    // SAFETY: the program's main with glibc's arguments.
    let status = unsafe { main(argc, argv, envp) };
    enter(0); // libc's exit code runs above the entry
    std::hint::black_box(status)
}

/// What a new thread is to run, and the signal mask it is to run with.
struct Begin {
    start: Routine,
    arg: *mut c_void,
    mask: libc::sigset_t,
}

/// Every signal a handler of the program's may be installed for, but the
/// synchronous ones (blocked, a fault would kill the thread).
fn asynchronous() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value to fill; local sets.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for s in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP, libc::SIGSYS] {
            libc::sigdelset(&mut set, s);
        }
        set
    }
}

fn real_create() -> Option<Create> {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let mut p = REAL.load(Ordering::Relaxed);
    if p == 0 {
        p = lookup(libc::RTLD_NEXT, c"pthread_create");
        REAL.store(p, Ordering::Relaxed);
    }
    // SAFETY: glibc's pthread_create has this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, Create>(p) })
}

/// # Safety
/// Same contract as POSIX `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Routine,
    arg: *mut c_void,
) -> c_int {
    let Some(real) = real_create() else { return libc::ENOSYS };
    if ENTER.load(Ordering::Acquire) == 0 {
        // SAFETY: forwarded verbatim.
        return unsafe { real(thread, attr, start, arg) };
    }
    // With malloc, not Box: a failure is EAGAIN, as for the thread itself.
    // SAFETY: malloc of the size of `Begin`; checked for NULL.
    let b = unsafe { libc::malloc(std::mem::size_of::<Begin>()) } as *mut Begin;
    if b.is_null() {
        return libc::EAGAIN;
    }
    // The thread starts with the program's signals blocked: until linger
    // knows it, they would run even inside the malloc of its set-up. It
    // gets the mask it would have had once it is ready.
    // SAFETY: an all-zero sigset_t is a valid out value; valid pointers.
    let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &asynchronous(), &mut mask) };
    // SAFETY: `b` is fresh memory for one `Begin`.
    unsafe { b.write(Begin { start, arg, mask }) };
    // SAFETY: our start routine, which takes `b` over.
    let r = unsafe { real(thread, attr, thread_start, b as *mut c_void) };
    // SAFETY: the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut()) };
    if r != 0 {
        // SAFETY: the thread was not created: `b` is still ours.
        unsafe { libc::free(b as *mut c_void) };
    }
    r
}

/// A new thread: prepares it for held signals, then runs the program's
/// start routine one frame below its entry.
#[inline(never)]
unsafe extern "C" fn thread_start(b: *mut c_void) -> *mut c_void {
    // SAFETY: handed over by `pthread_create`, allocated there.
    let Begin { start, arg, mask } = unsafe { (b as *mut Begin).read() };
    // SAFETY: as above; read out, freed once.
    unsafe { libc::free(b) };
    enter(entry_here());
    // SAFETY: the mask the creating thread had.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut()) };
    // SAFETY: the program's start routine with its argument.
    let value = unsafe { start(arg) };
    enter(0);
    std::hint::black_box(value)
}
