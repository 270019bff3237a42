//! `--stats`: the main thread's preemption counters, printed once when the
//! program ends, whichever way it ends: `exit` (an `atexit` handler),
//! `_exit`/`_Exit` (interposed here: dash's `sh -c` ends that way and
//! printed nothing), or an exec that replaces it (linger's exec observer).
//! Without `--children`, an exec also gets a line saying that the new image
//! runs without linger-run (a `python3` that is a shell shim exec'ing the
//! real interpreter was run with no preemption, and nothing said so).
//!
//! The line is formatted on the stack and written with `write` (to a file:
//! `open`, `write`, `close`): `_exit` may be called from a signal handler or
//! a child after `fork`, where the allocator and stdio may be locked.

use std::ffi::{CStr, CString, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};

use libc::{c_int, c_void};

use crate::options::StatsTo;
use crate::start::say;

/// Where the line goes: stderr, or a file (its name made ready before
/// `main`, so that printing allocates nothing).
enum To {
    Stderr,
    File(CString),
}

static TO: OnceLock<To> = OnceLock::new();
/// The process that prints (not forked children), and whether it has.
static PID: AtomicI32 = AtomicI32::new(0);
static PRINTED: AtomicBool = AtomicBool::new(false);
/// Say when the program execs away (see the module doc).
static WARN_EXEC: AtomicBool = AtomicBool::new(false);
static NAME: OnceLock<String> = OnceLock::new();
/// With `--isolate`: libc's variables the executable holds by `COPY`
/// relocation (they stay the program's; see docs/safety.md, "gotcha").
static COPY_RELOCATED: OnceLock<String> = OnceLock::new();

/// The main thread's counters when it ended by `pthread_exit` (the process
/// then ends on another thread, whose counters would otherwise be read).
static MAIN_STATS: Mutex<Option<linger::Stats>> = Mutex::new(None);

/// Set up before `main` runs: the statistics (if asked for) and the exec
/// warning (if `warn_exec`), for the program called `name`.
pub(crate) fn watch(stats: Option<StatsTo>, name: &str, warn_exec: bool) {
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    let _ = NAME.set(name.to_owned());
    WARN_EXEC.store(warn_exec, Ordering::Relaxed);
    linger::on_exec(on_exec);
    let Some(to) = stats else { return };
    let to = match to {
        StatsTo::Stderr => To::Stderr,
        StatsTo::File(path) => match CString::new(OsString::into_vec(path)) {
            Ok(p) => To::File(p),
            Err(_) => To::Stderr,
        },
    };
    let _ = TO.set(to);
    // SAFETY: registering a handler that takes no arguments. Registered
    // before main runs, so it runs after the program's own handlers.
    unsafe { libc::atexit(at_exit) };
    watch_main_exit();
}

pub(crate) fn copy_relocated(list: String) {
    let _ = COPY_RELOCATED.set(list);
}

/// Runs as the main thread ends by `pthread_exit` (a thread-specific data
/// destructor: glibc runs them there, and not at `exit`): keeps its counters.
extern "C" fn keep_main_stats(_: *mut c_void) {
    *MAIN_STATS.lock().unwrap_or_else(|e| e.into_inner()) = Some(linger::stats());
}

/// Has `keep_main_stats` run when the main thread ends by `pthread_exit`.
fn watch_main_exit() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: creating a key with a destructor that takes its value, and
    // giving this thread a non-null value for it (never dereferenced).
    unsafe {
        if libc::pthread_key_create(&mut key, Some(keep_main_stats)) == 0 {
            libc::pthread_setspecific(key, 1 as *const c_void);
        }
    }
}

fn is_main_process() -> bool {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    me == PID.load(Ordering::Relaxed)
}

extern "C" fn at_exit() {
    print_once();
}

/// Prints the statistics line, once, from the process that asked for it.
fn print_once() {
    if !is_main_process() || TO.get().is_none() || PRINTED.swap(true, Ordering::AcqRel) {
        return;
    }
    // The program may be ending from inside its preemptible main: no
    // preemption while the line is made and written.
    linger::critical(|| {
        // Not `lock`: a signal handler's `_exit` may have interrupted the
        // holder (`keep_main_stats`, at the main thread's end).
        let kept = MAIN_STATS.try_lock().ok().and_then(|g| *g);
        let s = kept.unwrap_or_else(linger::stats);
        let mut buf = [0u8; 1024];
        let mut w = std::io::Cursor::new(&mut buf[..]);
        let _ = write!(
            w,
            "linger-run: stats: preemptions={} deferred={} deferrals={} worst_overrun_us={} waits_left={}",
            s.preemptions,
            s.deferred_preemptions,
            s.deferrals,
            s.worst_overrun_ns / 1000,
            s.blocked_deadlines
        );
        if let Some(c) = COPY_RELOCATED.get().filter(|c| !c.is_empty()) {
            let _ = write!(w, " copy_relocated={c}");
        }
        let _ = w.write_all(b"\n");
        let n = w.position() as usize;
        let line = &buf[..n];
        match TO.get() {
            Some(To::File(path)) => {
                // SAFETY: a NUL-terminated path; the descriptor is ours and
                // closed here.
                unsafe {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC, 0o644);
                    if fd < 0 {
                        let msg = b"linger-run: cannot open the --stats file\n";
                        libc::write(2, msg.as_ptr().cast(), msg.len());
                        return;
                    }
                    libc::write(fd, line.as_ptr().cast(), line.len());
                    libc::close(fd);
                }
            }
            // SAFETY: writing a valid buffer to fd 2.
            _ => unsafe {
                libc::write(2, line.as_ptr().cast(), line.len());
            },
        }
    });
}

/// linger's exec observer: the image is about to be replaced.
fn on_exec(path: Option<&CStr>) {
    if !is_main_process() {
        return; // a forked child's exec: the program's business
    }
    if WARN_EXEC.swap(false, Ordering::Relaxed) {
        let name = NAME.get().map_or("the program", String::as_str);
        let to = path.map_or_else(|| "another program".into(), |p| p.to_string_lossy());
        say(&format!(
            "{name} replaces itself with {to} (exec), which runs without linger-run (no slices, no stats): add --children to run it under linger-run too"
        ));
    }
    print_once();
}

/// `_exit`, interposed: the statistics line first (`exit`'s handlers do
/// not run here), then the process ends as glibc's `_exit` ends it.
///
/// # Safety
/// As `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    print_once();
    // SAFETY: ends the process; what glibc's `_exit` does.
    unsafe {
        libc::syscall(libc::SYS_exit_group, status);
        libc::syscall(libc::SYS_exit, status);
    }
    unreachable!("exit_group returned")
}

/// `_Exit`, the same (ISO C's name).
///
/// # Safety
/// As `_Exit`.
#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    // SAFETY: as `_exit`.
    unsafe { _exit(status) }
}
