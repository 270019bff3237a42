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

use crate::options::{say, StatsTo};

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
/// The program's `main`: which object is the executable.
static MAIN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// With `--isolate`: libc's variables the executable holds by `COPY`
/// relocation (they stay the program's; see docs/safety.md, "gotcha").
static COPY_RELOCATED: OnceLock<String> = OnceLock::new();

/// The main thread's counters when it ended by `pthread_exit` (the process
/// then ends on another thread, whose counters would otherwise be read).
static MAIN_STATS: Mutex<Option<linger::Stats>> = Mutex::new(None);

/// Set up before `main` runs: the statistics (if asked for) and the exec
/// warning (if `warn_exec`), for the program called `name` whose `main` is
/// at `main`.
pub(crate) fn watch(stats: Option<StatsTo>, name: &str, warn_exec: bool, main: usize) {
    MAIN.store(main, Ordering::Relaxed);
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
        let mut buf = [0u8; 2048];
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
        let mut lib = [0u8; 256];
        let held_by = (s.worst_overrun_at != 0).then(|| library_of(s.worst_overrun_at as usize, &mut lib));
        if let Some(l) = &held_by {
            let _ = write!(w, " worst_overrun_in={}", l.name());
        }
        if let Some(c) = COPY_RELOCATED.get().filter(|c| !c.is_empty()) {
            let _ = write!(w, " copy_relocated={c}");
        }
        let _ = w.write_all(b"\n");
        // When deadlines mostly waited for code linger does not stop, say
        // which code held the worst one, and what would let it be stopped.
        if let Some(l) = held_by.filter(|_| s.deferrals > s.preemptions && s.worst_overrun_ns >= 1_000_000) {
            let _ = write!(w, "linger-run: most deadlines waited for code that is not stopped ({} deferrals, {} stops); the worst, {} ms, in {}: {}\n",
                s.deferrals, s.preemptions, s.worst_overrun_ns / 1_000_000, l.name(), l.advice());
        }
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

/// What held a deferred deadline: a library (its file's base name), or
/// executable memory of no file (JIT-compiled code).
enum Holder<'a> {
    Library(&'a str),
    /// The executable itself.
    Program(&'a str),
    Anonymous,
}

impl Holder<'_> {
    fn name(&self) -> &str {
        match self {
            Holder::Library(n) | Holder::Program(n) => n,
            Holder::Anonymous => "anonymous-code",
        }
    }

    /// What would let linger stop the function there.
    fn advice(&self) -> &'static str {
        match self {
            Holder::Library(n) if n.starts_with("libc.so") || n.starts_with("ld-linux") => {
                "libc is never stopped in (its locks are the process's); --isolate libc gives main a copy of its own that is"
            }
            Holder::Library(_) => {
                "shared libraries are not stopped in by default; if this one is safe to stop anywhere, name it in \
                 LINGER_PREEMPTIBLE_LIBS, or give main its own copy with --isolate (docs/safety.md, \"gotcha\")"
            }
            Holder::Program(_) => {
                "the program's own code that must not be stopped (Rust's std, a critical scope, LINGER_DEFER_SYMBOLS); \
                 docs/safety.md, \"Where the handler stops a function, and where it defers\""
            }
            Holder::Anonymous => {
                "JIT-compiled code has no unwind information, so linger cannot see what called it and waits for it \
                 (docs/safety.md, \"Where the handler stops a function, and where it defers\")"
            }
        }
    }
}

/// The library whose code is at `pc` (its base name, copied into `buf`).
fn library_of(pc: usize, buf: &mut [u8; 256]) -> Holder<'_> {
    // SAFETY: dladdr only reads the loader's list of objects; `info` is a
    // local it fills; the name it returns is the loader's, copied at once.
    let (name, program) = unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(pc as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return Holder::Anonymous;
        }
        // The executable: the object of its `main`.
        let mut exe: libc::Dl_info = std::mem::zeroed();
        let main = MAIN.load(Ordering::Relaxed);
        let program = main != 0 && libc::dladdr(main as *const c_void, &mut exe) != 0 && exe.dli_fbase == info.dli_fbase;
        (CStr::from_ptr(info.dli_fname).to_bytes(), program)
    };
    let base = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    let n = base.len().min(buf.len());
    buf[..n].copy_from_slice(&base[..n]);
    match std::str::from_utf8(&buf[..n]) {
        Ok(s) if program => Holder::Program(if s.is_empty() { "the-program" } else { s }),
        Ok(s) if !s.is_empty() => Holder::Library(s),
        _ => Holder::Anonymous,
    }
}
