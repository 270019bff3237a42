//! `TURQ_DUMP_SIGNAL`: a signal that makes the process write the list of
//! its live green threads (`dump_text`), the analogue of Go's SIGQUIT
//! goroutine dump, for programs that cannot call `turq_dump` themselves.
//!
//! The handler only writes a byte to a pipe (async-signal-safe, errno kept);
//! a thread of the runtime's own, blocked on the pipe, writes the dump to
//! stderr, or appends it to `TURQ_DUMP_FILE`. The process goes on.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

/// The pipe's write end, for the handler (-1 until installed).
static PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    // SAFETY: errno is the interrupted code's: saved and put back around
    // the only call, `write`, which is async-signal-safe; a full pipe just
    // drops this request (one dump is pending already).
    unsafe {
        let e = *libc::__errno_location();
        let b = 1u8;
        let _ = libc::write(PIPE.load(Ordering::Relaxed), (&b as *const u8).cast(), 1);
        *libc::__errno_location() = e;
    }
}

/// Installs the dump signal named by `TURQ_DUMP_SIGNAL` (a number or a
/// name, as `linger::parse_signal` reads it), once: a bad value or a failure
/// is the caller's error (the default runtime does not start), said once.
pub(crate) fn install_from_env() -> Result<(), String> {
    static ONCE: OnceLock<Result<(), String>> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Ok(name) = std::env::var("TURQ_DUMP_SIGNAL") else { return Ok(()) };
        linger::parse_signal(&name).and_then(install).map_err(|e| format!("TURQ_DUMP_SIGNAL: {e}"))
    })
    .clone()
}

fn install(sig: libc::c_int) -> Result<(), String> {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // The reader blocks: its end back to blocking mode.
    // SAFETY: our own descriptor.
    unsafe { libc::fcntl(fds[0], libc::F_SETFL, 0) };
    PIPE.store(fds[1], Ordering::Relaxed);
    let reader = fds[0];
    std::thread::Builder::new()
        .name("turquoise-dump".into())
        .spawn(move || loop {
            let mut b = [0u8; 64];
            // SAFETY: reads into our buffer from our pipe (an OS thread,
            // outside any preemptible function: a plain blocking read).
            let n = unsafe { libc::read(reader, b.as_mut_ptr().cast(), b.len()) };
            if n == 0 || (n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted) {
                return;
            }
            if n > 0 {
                let text = crate::thread::dump_text();
                match std::env::var_os("TURQ_DUMP_FILE") {
                    Some(path) => {
                        let f = std::fs::OpenOptions::new().create(true).append(true).open(&path);
                        if let Ok(mut f) = f {
                            let _ = f.write_all(text.as_bytes());
                        }
                    }
                    None => {
                        let _ = std::io::stderr().write_all(text.as_bytes());
                    }
                }
            }
        })
        .map_err(|e| format!("thread: {e}"))?;
    // SAFETY: a zeroed sigaction with our handler, SA_RESTART so that the
    // program's calls are not interrupted; the old action is not needed.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
            return Err(format!("sigaction: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}
