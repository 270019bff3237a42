//! Is a thread inside code that must not be interrupted? And, for
//! libas-safe (`crates/as-safe`), holding the program's signals until it is
//! not.
//!
//! linger's handler never stops a function inside non-reentrant code (libc's
//! malloc and stdio locks, the loader, parts of Rust's `std`: the table in
//! `ranges.rs`); it walks the interrupted call chain to find out. A program's
//! signal handler that calls `printf` or `malloc` has the same problem: run
//! while its thread is inside `malloc`, it deadlocks on the arena lock. This
//! module offers the same judgement for any thread, from a signal handler
//! ([`interrupted_in_deferred`]), and a mode of linger's `sigaction`
//! interposition built on it ([`hold_program_signals`]): a handler of the
//! program's never runs while the interrupted call chain has a frame in
//! deferred code. Such a signal is *held*: its siginfo and the handler's
//! action are kept in a per-thread ring, and the handler runs when the
//! outermost deferred call returns, through linger's return trap (the stub
//! that stops a preemptible function when a library call returns), with the
//! signal mask the kernel would have given it. Where no trap can be set, a
//! timer retries (10 us, backing off to 250 us). `docs/safety.md`,
//! "libas-safe", gives the rules and their limits.
//!
//! A thread's call chain ends at its entry: the frame that called `main` or
//! the thread's start routine ([`enter_thread`]; libc's start-up frames above
//! it are not the program's calls), the entry of the preemptible function it
//! runs, or the signal frame of a program's handler (beyond it is the code
//! that handler interrupted, judged when it ran; linger's own handler's
//! frame is seen through).
//!
//! This is the mode's face (what libas-safe and programs call); the
//! mechanism is `hold.rs`.

use libc::{c_int, c_void};

use crate::{handlers::hold, Error};

/// Prepares the calling thread for [`interrupted_in_deferred`] and for
/// holding signals: linger's per-thread state (its unwinder, its mark for
/// reading the code table, its timer, see [`crate::init`]) and this
/// module's. `entry` is where its call chain ends: the stack pointer of the
/// code that is about to call the thread's own code (`main`, a start
/// routine), whose frames and those above are not judged; 0 when unknown
/// (the whole stack counts, libc's start-up frames included). Call it again
/// with 0 once that code has returned. Not async-signal-safe.
pub fn enter_thread(entry: usize) -> Result<(), Error> {
    crate::runtime::launch::init()?;
    crate::judgement::return_trap::on_return_hold(hold::at_return);
    hold::enter(entry)
}

/// Turns libas-safe's mode on for the process and prepares the calling
/// thread (as [`enter_thread`] with an unknown entry): from now on, a
/// handler the program installed through `sigaction` or `signal` runs only
/// when its thread is out of deferred code, on threads prepared with
/// [`enter_thread`]. Synchronous signals (`SIGSEGV`, `SIGBUS`, `SIGILL`,
/// `SIGFPE`, `SIGTRAP`, `SIGSYS`) are never held. Not async-signal-safe.
pub fn hold_program_signals() -> Result<(), Error> {
    others_stand_aside();
    enter_thread(0)?;
    hold::forget_in_children();
    crate::handlers::preempt::on_after_timer(hold::after_timer);
    crate::handlers::program_signals::set_holding();
    crate::interpose::signals::remask_trampolines();
    Ok(())
}

/// The C entry of [`hold_program_signals`]: 0, or -1 with `errno`. Found by
/// `liblinger_as_safe.so` with `dlsym(RTLD_DEFAULT)`, so that it turns the
/// mode on in the copy of linger whose `sigaction` the program calls.
#[no_mangle]
pub extern "C" fn linger_as_safe_enable() -> c_int {
    result_to_c(hold_program_signals())
}

/// Tells this copy of linger that another one in the process is in charge
/// (see [`hold_program_signals`]): its signal wrappers pass everything
/// through. Not for programs.
#[no_mangle]
pub extern "C" fn linger_stand_aside() {
    crate::machine::signal::stand_aside();
}

/// Makes every other copy of linger loaded in the process stand aside. Two
/// preloaded libraries that hold linger (`liblinger_run.so` and
/// `liblinger_as_safe.so`), or one and a program's `liblinger.so`, each
/// export linger's wrappers; the program calls the first, whose calls to
/// "the next definition" reach the second's. The second must pass them
/// through: shadowing the preemption signal as its own, for one, it would
/// keep the first from installing its handler.
fn others_stand_aside() {
    unsafe extern "C" fn names(info: *mut libc::dl_phdr_info, _: libc::size_t, out: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info during the callback, and
        // `out` is the Vec below.
        let (info, out) = unsafe { (&*info, &mut *(out as *mut Vec<std::ffi::CString>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: a non-null dlpi_name is a NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) };
            if !name.is_empty() {
                out.push(name.to_owned());
            }
        }
        0
    }
    let mut objects: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback matches the expected signature and only touches
    // `objects`.
    unsafe { libc::dl_iterate_phdr(Some(names), &mut objects as *mut Vec<std::ffi::CString> as *mut c_void) };
    let ours = linger_stand_aside as extern "C" fn() as usize;
    for name in objects {
        // SAFETY: looking up a symbol in an object already loaded (NOLOAD
        // loads nothing); the handle is closed again.
        unsafe {
            let h = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
            if h.is_null() {
                continue;
            }
            let f = libc::dlsym(h, c"linger_stand_aside".as_ptr()) as usize;
            if f != 0 && f != ours {
                std::mem::transmute::<usize, extern "C" fn()>(f)();
            }
            libc::dlclose(h);
        }
    }
}

/// The C entry of [`enter_thread`]: 0, or -1 with `errno`.
#[no_mangle]
pub extern "C" fn linger_as_safe_enter_thread(entry: usize) -> c_int {
    result_to_c(enter_thread(entry))
}

fn result_to_c(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            crate::base::sys::set_errno(e.errno());
            -1
        }
    }
}

/// Is the code interrupted at `uc` (this thread's, in a signal handler)
/// inside code that must not be interrupted on any frame of its call chain,
/// up to the thread's entry ([`enter_thread`]), the entry of the
/// preemptible function it runs, or a signal frame? A thread waiting in
/// the kernel at the system call of a library function called from its own
/// code (a `read` or `poll` that blocks) counts as out of it: a system-call
/// wrapper holds nothing there. None when it cannot tell: the thread was
/// not prepared, or the table of code is being rebuilt after a `dlclose`.
/// Async-signal-safe.
pub fn interrupted_in_deferred(uc: &libc::ucontext_t) -> Option<bool> {
    hold::interrupted_in_deferred(uc)
}
