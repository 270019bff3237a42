//! Variables that every image the program starts gets, and the program
//! itself does not see (`linger-run --children`).
//!
//! `--children` works through the environment: `LD_PRELOAD` and the
//! `LINGER_RUN_*` variables must reach every program that is started. Left
//! in the environment, the program would see them (`export -p`,
//! `os.environ`): a difference from its plain run. So linger-run removes
//! them before `main` in every mode, and with `--children` hands them to
//! [`set`]; every way of starting a new image adds them back to the
//! environment it passes: the `exec` family and `posix_spawn`/`posix_spawnp`
//! here, and `system` and `popen`, whose `posix_spawn` is internal to libc,
//! by pointing `environ` at a copy with them for the length of the call.
//! Starting a program with a raw `execve` system call bypasses this.

use std::ffi::{c_char, CStr, CString};
use std::sync::OnceLock;

/// What to add.
struct Extra {
    /// The libraries to put in front of the child's `LD_PRELOAD`.
    preload: CString,
    /// `LD_PRELOAD=` followed by them, for an environment without one.
    preload_entry: CString,
    /// Other `NAME=value` entries, added unless the environment has NAME.
    entries: Vec<CString>,
}

static EXTRA: OnceLock<Extra> = OnceLock::new();

/// From now on, every image the program starts gets `preload` in front of
/// its `LD_PRELOAD` and the `NAME=value` `entries` (set once, before `main`).
pub(crate) fn set(preload: &str, entries: &[(String, String)]) {
    let c = |s: String| CString::new(s).ok();
    let (Some(pre), Some(pre_entry)) = (c(preload.to_owned()), c(format!("LD_PRELOAD={preload}"))) else { return };
    let entries = entries.iter().filter_map(|(n, v)| c(format!("{n}={v}"))).collect();
    let _ = EXTRA.set(Extra { preload: pre, preload_entry: pre_entry, entries });
}

/// Is there anything to add?
#[inline]
pub(crate) fn active() -> bool {
    EXTRA.get().is_some()
}

/// Entries that fit the stack buffers below (more go to the heap, which a
/// `vfork` child must not touch: programs with that many variables are rare).
const STACK_ENTRIES: usize = 512;
const STACK_PRELOAD: usize = 4096;

/// `NAME` of a `NAME=value` entry, with its `=`.
fn name_of(entry: &[u8]) -> &[u8] {
    entry.iter().position(|&b| b == b'=').map_or(entry, |i| &entry[..=i])
}

/// Calls `f` with `envp` plus our variables (or `envp` itself when there
/// is nothing to add). Allocates nothing for usual environments: exec
/// wrappers run in `vfork` children.
pub(crate) fn with<R>(envp: *const *const c_char, f: impl FnOnce(*const *const c_char) -> R) -> R {
    let Some(x) = EXTRA.get() else { return f(envp) };
    // SAFETY: `envp` is NULL or a NULL-terminated array of C strings (the
    // exec contract).
    let given: &[*const c_char] = unsafe {
        let mut n = 0;
        while !envp.is_null() && !(*envp.add(n)).is_null() {
            n += 1;
        }
        if n == 0 { &[] } else { std::slice::from_raw_parts(envp, n) }
    };
    // SAFETY: the entries are C strings.
    let bytes = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_bytes();
    let total = given.len() + x.entries.len() + 2;
    let mut small = [std::ptr::null::<c_char>(); STACK_ENTRIES];
    let mut big: Vec<*const c_char> = Vec::new();
    let out: &mut [*const c_char] = if total <= STACK_ENTRIES {
        &mut small[..total]
    } else {
        big.resize(total, std::ptr::null());
        &mut big
    };
    let mut pre_buf = [0u8; STACK_PRELOAD];
    let mut pre_big: Vec<u8> = Vec::new();
    let ours = x.preload.as_bytes();
    let mut n = 0;
    let mut had_preload = false;
    for &e in given {
        let b = bytes(e);
        let mut entry = e;
        if let Some(v) = b.strip_prefix(b"LD_PRELOAD=") {
            had_preload = true;
            if !v.is_empty() && !v.windows(ours.len()).any(|w| w == ours) {
                // "LD_PRELOAD=" ours ":" theirs NUL
                let len = 11 + ours.len() + 1 + v.len() + 1;
                let buf: &mut [u8] = if len <= STACK_PRELOAD {
                    &mut pre_buf[..len]
                } else {
                    pre_big.resize(len, 0);
                    &mut pre_big
                };
                buf[..11].copy_from_slice(b"LD_PRELOAD=");
                buf[11..11 + ours.len()].copy_from_slice(ours);
                buf[11 + ours.len()] = b':';
                buf[12 + ours.len()..len - 1].copy_from_slice(v);
                buf[len - 1] = 0;
                entry = buf.as_ptr() as *const c_char;
            } else if v.is_empty() {
                entry = x.preload_entry.as_ptr();
            }
        }
        out[n] = entry;
        n += 1;
    }
    if !had_preload {
        out[n] = x.preload_entry.as_ptr();
        n += 1;
    }
    for e in &x.entries {
        let name = name_of(e.as_bytes());
        if !given.iter().any(|&g| bytes(g).starts_with(name)) {
            out[n] = e.as_ptr();
            n += 1;
        }
    }
    out[n] = std::ptr::null();
    f(out.as_ptr())
}

/// The process's environment array.
pub(crate) fn current() -> *const *const c_char {
    crate::base::glibc::environ_ptr()
}

/// Calls `f` (libc's `system` or `popen`, which start their child with
/// `environ` inside libc) with `environ` pointing at a copy that has our
/// variables, and puts it back after. For that long, other threads that
/// read the environment see them too, and a `setenv` of theirs meanwhile
/// copies them into the environment it makes, where they stay.
pub(crate) fn with_environ<R>(f: impl FnOnce() -> R) -> R {
    if !active() {
        return f();
    }
    let old = current();
    with(old, |merged| {
        // SAFETY: `merged` outlives the call (it lives in the caller's
        // frame), and the old array is restored before it goes away.
        unsafe { crate::base::glibc::set_environ(merged) };
        let r = f();
        // If the program replaced `environ` meanwhile (a `setenv` in
        // another thread), its array stays.
        if current() == merged {
            // SAFETY: the array the environment was before the call.
            unsafe { crate::base::glibc::set_environ(old) };
        }
        r
    })
}

type PosixSpawnFn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    *const *const c_char,
    *const *const c_char,
) -> libc::c_int;
type SystemFn = unsafe extern "C" fn(*const c_char) -> libc::c_int;
type PopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut libc::FILE;

fn real_posix_spawn() -> Option<PosixSpawnFn> {
    crate::base::sys::real!("posix_spawn", PosixSpawnFn)
}
fn real_posix_spawnp() -> Option<PosixSpawnFn> {
    crate::base::sys::real!("posix_spawnp", PosixSpawnFn)
}
fn real_system() -> Option<SystemFn> {
    crate::base::sys::real!("system", SystemFn)
}
fn real_popen() -> Option<PopenFn> {
    crate::base::sys::real!("popen", PopenFn)
}

pub(crate) fn prepare() {
    let _ = (real_posix_spawn(), real_posix_spawnp(), real_system(), real_popen());
}

/// `posix_spawn` or `posix_spawnp` (`real`), with our variables added to
/// the environment.
///
/// # Safety
/// Same contract as POSIX `posix_spawn`.
unsafe fn spawn(
    real: Option<PosixSpawnFn>,
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> libc::c_int {
    let Some(real) = real else { return libc::ENOSYS };
    // The child shares every description it inherits.
    super::fd_modes::new_process();
    // SAFETY: forwarded, with the environment extended.
    with(envp, |envp| unsafe { real(pid, path, actions, attr, argv, envp) })
}

/// # Safety
/// Same contract as POSIX `posix_spawn`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> libc::c_int {
    // SAFETY: the caller's arguments.
    unsafe { spawn(real_posix_spawn(), pid, path, actions, attr, argv, envp) }
}

/// # Safety
/// Same contract as POSIX `posix_spawnp`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    actions: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> libc::c_int {
    // SAFETY: the caller's arguments.
    unsafe { spawn(real_posix_spawnp(), pid, file, actions, attr, argv, envp) }
}

/// # Safety
/// Same contract as POSIX `system`.
#[no_mangle]
pub unsafe extern "C" fn system(command: *const c_char) -> libc::c_int {
    let Some(real) = real_system() else {
        crate::base::sys::set_errno(libc::ENOSYS);
        return -1;
    };
    super::fd_modes::new_process();
    // SAFETY: forwarded verbatim.
    with_environ(|| unsafe { real(command) })
}

/// # Safety
/// Same contract as POSIX `popen`.
#[no_mangle]
pub unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    let Some(real) = real_popen() else {
        crate::base::sys::set_errno(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    super::fd_modes::new_process();
    // SAFETY: forwarded verbatim.
    with_environ(|| unsafe { real(command, mode) })
}
