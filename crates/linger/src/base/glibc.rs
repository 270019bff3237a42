//! glibc's own definitions of the libc functions the runtime's housekeeping
//! relies on for their libc meaning.
//!
//! A call to `getenv` or `unsetenv` by symbol resolves through the global
//! scope, where the program comes first, and programs do define these
//! names: bash has its own `getenv`/`setenv`/`unsetenv` family, which does
//! nothing before bash's `main` has set its variables up, so linger-run's
//! removal of `LD_PRELOAD` was silently lost and every child ran sliced
//! (issue 11). Variables are read from `environ` itself, as glibc's
//! `getenv` does; the functions are looked up in libc.so.6 itself, by glibc
//! version, once (outside any handler: see `prepare`). The survey of every other
//! libc name the runtime calls is in `docs/safety.md` ("Functions the program
//! may define itself").

use std::ffi::{c_char, c_int, CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The base symbol version of x86-64 glibc: every function here has it.
const VERSION: &CStr = c"GLIBC_2.2.5";

/// glibc's definition of `name` (0 if not found): libc.so.6's, whatever
/// the program or other libraries define.
fn lookup(name: &CStr) -> usize {
    // SAFETY: NUL-terminated names; RTLD_NOLOAD only returns libc.so.6 if it
    // is already loaded (it always is: we link against it), taking a
    // reference we keep for the life of the process.
    unsafe {
        let libc_so = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if libc_so.is_null() {
            return 0;
        }
        libc::dlvsym(libc_so, name.as_ptr(), VERSION.as_ptr()) as usize
    }
}

/// Looks up (once) glibc's definition of a function.
macro_rules! glibc_fn {
    ($name:literal, $ty:ty) => {{
        static SLOT: AtomicUsize = AtomicUsize::new(0);
        let mut p = SLOT.load(Ordering::Relaxed);
        if p == 0 {
            p = lookup($name);
            SLOT.store(p, Ordering::Relaxed);
        }
        // SAFETY: glibc's function of this name has this C signature.
        (p != 0).then(|| unsafe { std::mem::transmute::<usize, $ty>(p) })
    }};
}

type SetenvFn = unsafe extern "C" fn(*const c_char, *const c_char, c_int) -> c_int;
type UnsetenvFn = unsafe extern "C" fn(*const c_char) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
type RaiseFn = unsafe extern "C" fn(c_int) -> c_int;

fn setenv_fn() -> Option<SetenvFn> {
    glibc_fn!(c"setenv", SetenvFn)
}
fn unsetenv_fn() -> Option<UnsetenvFn> {
    glibc_fn!(c"unsetenv", UnsetenvFn)
}
fn signal_fn() -> Option<SignalFn> {
    glibc_fn!(c"signal", SignalFn)
}
fn raise_fn() -> Option<RaiseFn> {
    glibc_fn!(c"raise", RaiseFn)
}

/// Resolves everything ahead of time: [`die_by`] runs in signal handlers,
/// where the loader's lookups are not allowed.
pub(crate) fn prepare() {
    let _ = (setenv_fn(), unsetenv_fn(), signal_fn(), raise_fn());
}

extern "C" {
    /// The process's environment (glibc's `__environ`, the array `main`
    /// gets as `envp` until something grows it).
    static mut environ: *const *const c_char;
}

/// The process's environment array.
pub(crate) fn environ_ptr() -> *const *const c_char {
    // SAFETY: reads the pointer itself, which glibc keeps valid.
    unsafe { environ }
}

/// Points `environ` at `p`.
///
/// # Safety
/// `p` is a NULL-terminated array of C strings that stays valid while it is
/// the environment; no other thread edits the environment meanwhile.
pub(crate) unsafe fn set_environ(p: *const *const c_char) {
    // SAFETY: per the contract.
    unsafe { environ = p };
}

/// The value of `name` in the environment, read as glibc's `getenv` does:
/// no allocation, no lock (async-signal-safe). Like any C library reading
/// its settings, not synchronised with a concurrent `setenv` (which is why
/// Rust's `std::env::set_var` is `unsafe`).
pub(crate) fn env_bytes(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: `environ` is NULL or a NULL-terminated array of
    // NUL-terminated strings, per the contract above.
    unsafe {
        let mut p = environ_ptr();
        if p.is_null() {
            return None;
        }
        while !(*p).is_null() {
            let entry = CStr::from_ptr(*p).to_bytes();
            if let Some(v) = entry.strip_prefix(name).and_then(|r| r.strip_prefix(b"=")) {
                return Some(v);
            }
            p = p.add(1);
        }
    }
    None
}

/// The variable `name` of the process's environment as glibc's `getenv`
/// reads it, as an owned value.
pub fn var_os(name: &str) -> Option<OsString> {
    env_bytes(name.as_bytes()).map(|v| OsStr::from_bytes(v).to_owned())
}

/// [`var_os`] as a (lossily decoded) string.
pub fn var(name: &str) -> Option<String> {
    var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// glibc's `setenv(name, value, 1)`, or `unsetenv(name)` for `None`: edits
/// the environment array in place for a variable that exists, so `main`'s
/// `envp` (the same array) sees the change too. False if it failed.
///
/// # Safety
/// No other thread may read or write the environment meanwhile (as for
/// `std::env::set_var`): linger-run calls it before `main`, with one thread.
pub unsafe fn set_var(name: &str, value: Option<&OsStr>) -> bool {
    let Ok(name) = std::ffi::CString::new(name) else { return false };
    match value {
        Some(v) => {
            let (Ok(v), Some(set)) = (std::ffi::CString::new(v.as_bytes()), setenv_fn()) else { return false };
            // SAFETY: NUL-terminated strings; the caller's contract excludes
            // concurrent environment access.
            unsafe { set(name.as_ptr(), v.as_ptr(), 1) == 0 }
        }
        None => {
            let Some(unset) = unsetenv_fn() else { return false };
            // SAFETY: as above.
            unsafe { unset(name.as_ptr()) == 0 }
        }
    }
}

/// Restores `sig`'s default action and raises it, with glibc's `signal` and
/// `raise` (not a program's, nor linger's wrappers). Async-signal-safe once
/// the runtime has started (which looks the functions up).
pub fn die_by(sig: c_int, send: bool) {
    // SAFETY: installing SIG_DFL and raising a signal are always valid.
    unsafe {
        match signal_fn() {
            Some(signal) => signal(sig, libc::SIG_DFL),
            None => libc::signal(sig, libc::SIG_DFL),
        };
        if send {
            match raise_fn() {
                Some(raise) => raise(sig),
                None => libc::raise(sig),
            };
        }
    }
}
