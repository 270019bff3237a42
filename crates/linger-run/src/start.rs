//! The program's entry, interposed: `__libc_start_main` gets our `main`,
//! which runs the real one inside a preemptible function.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use libc::{c_char, c_int, c_void};

use crate::options::{hand_to_children, program_name, say, scrub_environment, Options};

type Main = unsafe extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) -> c_int;
type Start = unsafe extern "C" fn(Main, c_int, *mut *mut c_char, *mut c_void, *mut c_void, *mut c_void, *mut c_void) -> c_int;

/// The program's real `main`.
static REAL_MAIN: AtomicUsize = AtomicUsize::new(0);

/// Exit status for our own failures (the program never ran), as `timeout(1)` does.
const OWN_FAILURE: c_int = 125;


/// glibc's entry point, called by the program's `_start`.
///
/// # Safety
/// Called only by `_start`, with the arguments it passes to glibc.
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
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds glibc's.
    let real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"__libc_start_main".as_ptr()) };
    if real.is_null() {
        say("cannot find glibc's __libc_start_main");
        // SAFETY: terminating the process is always allowed.
        unsafe { libc::_exit(OWN_FAILURE) };
    }
    // SAFETY: glibc's __libc_start_main has exactly this signature.
    let real: Start = unsafe { std::mem::transmute::<*mut c_void, Start>(real) };
    REAL_MAIN.store(main as usize, Ordering::Relaxed);
    // SAFETY: forwarding _start's arguments, with our main in place of its
    // (C-unwind only so that `pthread_exit` may unwind it; same calling
    // convention).
    unsafe {
        real(
            std::mem::transmute::<unsafe extern "C-unwind" fn(c_int, *mut *mut c_char, *mut *mut c_char) -> c_int, Main>(
                preemptible_main,
            ),
            argc,
            argv,
            init,
            fini,
            rtld_fini,
            stack_end,
        )
    }
}

/// `main`'s arguments, moved into the preemptible function.
struct MainArgs {
    main: Main,
    argc: c_int,
    argv: *mut *mut c_char,
    envp: *mut *mut c_char,
}

// SAFETY: the function runs on this same thread (it is not launched
// migratable); the pointers are the process's own argv/envp.
unsafe impl Send for MainArgs {}

/// Runs the program's `main` in slices until it returns; its status goes back
/// to glibc, which calls `exit` with it as usual.
unsafe extern "C-unwind" fn preemptible_main(argc: c_int, argv: *mut *mut c_char, envp: *mut *mut c_char) -> c_int {
    // SAFETY: stored by __libc_start_main before glibc calls us.
    let main: Main = unsafe { std::mem::transmute::<usize, Main>(REAL_MAIN.load(Ordering::Relaxed)) };
    // SAFETY: argv has argc >= 0 entries plus NULL; argv[0] may be NULL.
    let name = program_name(if argc > 0 { unsafe { *argv } } else { std::ptr::null() });
    let opts = match Options::from_env() {
        Ok(o) => o,
        Err(e) => {
            say(&e);
            return 2;
        }
    };
    // The program sees the environment it would have had without us; with
    // --children, what it starts gets our variables back.
    if opts.children {
        hand_to_children();
    }
    scrub_environment();
    if let Err(e) = linger::init() {
        say(&format!("cannot start preemption for {name}: {e}"));
        return OWN_FAILURE;
    }
    // Without --children, an image the program execs runs without us: say
    // so when the user asked for slices or statistics.
    let warn_exec = (opts.slice.is_some() || opts.stats.is_some()) && !opts.children;
    crate::stats::watch(opts.stats, &name, warn_exec, REAL_MAIN.load(Ordering::Relaxed));

    if let Some(sel) = &opts.isolate {
        // What stays the program's (`COPY` relocations) goes with the
        // stats (`copy_relocated=`).
        match linger::isolate(sel) {
            Ok(r) => {
                crate::stats::copy_relocated(r.copy_relocated.join(","));
            }
            Err(e) => {
                say(&format!("cannot isolate libraries for {name}: {e}"));
                return OWN_FAILURE;
            }
        }
    }
    let slice = opts.slice.unwrap_or(Duration::MAX);
    let args = MainArgs { main, argc, argv, envp };
    let run = move || {
        // Threads the program starts use main's libset too (see threads.rs).
        crate::threads::program_libset(gotcha::current_libset());
        let a = args;
        // SAFETY: calling the program's main with the arguments glibc gave us.
        unsafe { call_main(a.main, a.argc, a.argv, a.envp) }
    };
    // The loop below resumes `main` at once. So signals are held while it
    // is stopped (handled on its own stack when it resumes, they can still
    // interrupt the call it was blocked in), and by default a wait is left
    // alone: stopping it would only cost CPU time.
    // SAFETY (of `isolated`): main's libset is never reset: linger-run
    // never cancels main, and the program's threads share main's libset
    // (threads.rs), so what its libraries make is used only in that libset.
    let builder = unsafe { linger::Builder::new().isolated(opts.isolate.is_some()) }
        .stack_size(opts.stack_size)
        .hold_signals(true)
        .preempt_blocked(opts.preempt_blocked)
        // Nothing else competes for libsets; should none be made, the
        // program still runs, deferred inside its libraries as without.
        .when_no_libset(linger::Exhausted::Share);
    let mut job = match builder.launch(run, slice) {
        Ok(j) => j,
        Err(e) => return failed(&name, e, opts.stack_size),
    };
    loop {
        match job {
            linger::Linger::Completion(status) => return status,
            linger::Linger::Poison => {
                say(&format!("{name}: main() ended abnormally"));
                return OWN_FAILURE;
            }
            linger::Linger::Continuation(_) => {
                if let Err(e) = linger::resume(&mut job, slice) {
                    return failed(&name, e, opts.stack_size);
                }
            }
        }
    }
}

/// Calls `main` from a frame that unwinders see as the outermost one
/// (`.cfi_undefined rip`), as `main`'s caller is in a plain run: a C++
/// exception that nothing catches then ends in `std::terminate` (with its
/// message and the program's terminate handler) instead of reaching the
/// runtime's Rust frames, and linger's own call-chain walk stops here too.
#[unsafe(naked)]
unsafe extern "C" fn call_main(main: Main, argc: c_int, argv: *mut *mut c_char, envp: *mut *mut c_char) -> c_int {
    core::arch::naked_asm!(
        ".cfi_startproc",
        ".cfi_undefined rip",
        "push rbp",
        ".cfi_adjust_cfa_offset 8",
        "mov rbp, rsp",
        "mov rax, rdi",
        "mov edi, esi",
        "mov rsi, rdx",
        "mov rdx, rcx",
        "call rax",
        "pop rbp",
        ".cfi_adjust_cfa_offset -8",
        "ret",
        ".cfi_endproc",
    )
}

/// A launch or resume failed. A stack overflow is the program's own fault and
/// would have killed it with SIGSEGV without us: it dies the same way.
fn failed(name: &str, e: linger::Error, stack: usize) -> c_int {
    if let linger::Error::StackOverflow { .. } = e {
        say(&format!(
            "{name}: main() overflowed its {} KiB stack (set by ulimit -s or LINGER_RUN_STACK)",
            stack / 1024
        ));
        // Terminates the process the way the overflow would have.
        linger::glibc::die_by(libc::SIGSEGV, true);
    }
    say(&format!("{name}: {e}"));
    OWN_FAILURE
}

