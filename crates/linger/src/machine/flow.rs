//! Per-thread library state that belongs to a flow of control rather than
//! to a thread.
//!
//! A preemptible function runs on its caller's thread, so it shares the
//! caller's thread-local storage. Most of that is right (a cache, a buffer,
//! a thread id), but a few libraries keep state there that describes *what
//! the code currently running is in the middle of*. A function stopped in
//! the middle of something would then hand that state to its caller, and
//! back. The runtime swaps these at every switch into and out of a function
//! ([`enter`], [`leave`]), so each side sees its own:
//!
//! - the C++ runtime's exception globals (`__cxa_get_globals()`: the stack of
//!   caught exceptions and the count of uncaught ones), when libstdc++ or
//!   libc++abi is loaded;
//! - `errno`;
//! - the thread's locale set with `uselocale`;
//! - glibc's chain of cancellation buffers (`pthread_cleanup_push`), see
//!   `exit.rs`;
//! - for functions that may be stopped in libc's futex waits
//!   (`Builder::stop_in_futex_waits`), glibc's chain of the cleanup buffers
//!   its own cancellation points push (`pthread_cond_wait`, `sem_wait`,
//!   `pthread_join`), see `futex.rs`.
//!
//! What cannot be swapped (Rust's panic count, tokio's runtime context) is
//! described in `docs/safety.md`, "Thread-local state".

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use crate::state::saved::{Saved, CXA_WORDS};
use crate::state::thread::ThreadState;

/// `__cxa_get_globals`, or 0 when no C++ runtime is loaded.
static CXA_GET_GLOBALS: AtomicUsize = AtomicUsize::new(0);

/// Where glibc keeps the thread's locale (`__libc_tsd_LOCALE`), as an
/// offset from the thread pointer, or 0 if not known: then [`exchange`]
/// asks `uselocale`.
static LOCALE_AT: AtomicIsize = AtomicIsize::new(0);

/// Looks the C++ runtime up (at init, and again after new code was loaded:
/// a program may `dlopen` a C++ library later). At init, also finds where
/// glibc keeps the thread's locale.
pub(crate) fn look_up() {
    if LOCALE_AT.load(Ordering::Relaxed) == 0 {
        find_locale();
    }
    if CXA_GET_GLOBALS.load(Ordering::Relaxed) != 0 {
        return;
    }
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__cxa_get_globals".as_ptr()) } as usize;
    CXA_GET_GLOBALS.store(p, Ordering::Relaxed);
}

/// Finds the thread's locale word, so that a switch reads it with one load
/// instead of two calls to `uselocale(NULL)` (each a call through the PLT:
/// 6-12 ns of a 55 ns resume and pause here). Read from `uselocale`'s
/// first instructions (`mov rcx, [rip+GOT]` and, after a `lea`,
/// `mov rax, fs:[rcx]`, as Debian's glibc 2.36 compiles it; another build,
/// one with `endbr64` first say, keeps the calls) and then checked
/// on this thread by installing a locale of our own and the old one back;
/// anything else leaves the calls. Installing a locale still goes through
/// `uselocale` (it also sets the ctype tables' thread-locals).
fn find_locale() {
    let f = libc::uselocale as unsafe extern "C" fn(libc::locale_t) -> libc::locale_t as *const u8;
    // SAFETY: the first 3 bytes of a function's code (a PLT stub, where the
    // address is one, is 16 bytes long).
    if unsafe { std::slice::from_raw_parts(f, 3) } != [0x48, 0x8b, 0x0d] {
        return;
    }
    // SAFETY: the first 18 bytes of glibc's `uselocale` (its first
    // instruction is not a stub's; the function is longer: it sets four
    // thread-locals).
    let code = unsafe { std::slice::from_raw_parts(f, 18) };
    if code[14..18] != [0x64, 0x48, 0x8b, 0x01] {
        return;
    }
    let disp = i32::from_le_bytes([code[3], code[4], code[5], code[6]]) as isize;
    let slot = (f as isize + 7 + disp) as *const isize;
    // SAFETY: the GOT entry `uselocale` itself loads its offset from
    // (resolved at load time: libc is bound before any code runs).
    let off = unsafe { slot.read() };
    if off == 0 || off % 8 != 0 || !(-0x10_0000..0).contains(&off) {
        return;
    }
    // SAFETY: a locale made here, freed here; `fs_word` reads the word of
    // this thread's TLS at the offset glibc's own code uses.
    let ok = unsafe {
        let mine = libc::newlocale(libc::LC_ALL_MASK, c"C".as_ptr(), std::ptr::null_mut());
        if mine.is_null() {
            return;
        }
        let old = libc::uselocale(mine);
        let during = gotcha::fs_word(off);
        libc::uselocale(old);
        let after = gotcha::fs_word(off);
        libc::freelocale(mine);
        during == mine as usize && after != during && libc::uselocale(std::ptr::null_mut()) == old
    };
    if ok {
        LOCALE_AT.store(off, Ordering::Relaxed);
    }
}

/// This thread's locale: the value `uselocale` keeps (the global locale's
/// own address where `uselocale(NULL)` says `LC_GLOBAL_LOCALE`; both
/// install the same state).
#[inline(always)]
fn current_locale() -> usize {
    let off = LOCALE_AT.load(Ordering::Relaxed);
    if off != 0 {
        // SAFETY: `off` was checked by `find_locale` to be where this
        // thread's locale lives (the same variable in every thread).
        return unsafe { gotcha::fs_word(off) };
    }
    // SAFETY: a null argument only queries the thread's locale.
    unsafe { libc::uselocale(std::ptr::null_mut()) as usize }
}

/// Where the head of glibc's chain of its own cleanup buffers lives (an
/// offset from the `fs` base), or 0 if not known.
pub(crate) static CLEANUP_AT: AtomicUsize = AtomicUsize::new(0);

/// Makes `head` (0: none) the head of this thread's chain of glibc's own
/// cleanup buffers and returns the previous head (nothing, and 0, if its
/// place is not known: the entry points that push one are then never
/// stopped in, see `futex::resolve`).
#[inline(always)]
pub(crate) fn exchange_cleanup(head: usize) -> usize {
    let off = CLEANUP_AT.load(Ordering::Relaxed);
    if off == 0 {
        return 0;
    }
    // SAFETY: `off` was checked by `futex::find_cleanup_head` to be where this
    // thread's head lives (the same field in every thread), and `head` is a
    // chain of this flow's.
    unsafe { gotcha::swap_fs_word(off as isize, head) }
}

/// This thread's C++ exception globals, or null without a C++ runtime. The
/// address is read once per thread (a call through the loader otherwise).
#[inline(always)]
fn cxa_globals(t: &ThreadState) -> *mut usize {
    let p = t.cxa_globals.get();
    if p != 0 || CXA_GET_GLOBALS.load(Ordering::Relaxed) == 0 {
        return p as *mut usize;
    }
    cxa_globals_slow(t)
}

#[cold]
#[inline(never)]
fn cxa_globals_slow(t: &ThreadState) -> *mut usize {
    let f = CXA_GET_GLOBALS.load(Ordering::Relaxed);
    // SAFETY: `__cxa_get_globals` takes nothing and returns this thread's
    // globals (allocating them on first use), in both C++ runtimes.
    let get = unsafe { std::mem::transmute::<usize, extern "C" fn() -> *mut usize>(f) };
    let p = get();
    t.cxa_globals.set(p as usize);
    p
}

/// Is a C++ exception in flight on this thread (thrown and not yet caught:
/// `uncaughtExceptions` is non-zero)? Reads only the globals address cached
/// by an earlier switch, so it is async-signal-safe; without one, no C++
/// runtime was loaded when the running function was entered.
pub(crate) fn cxx_exception_in_flight(t: &ThreadState) -> bool {
    let g = t.cxa_globals.get() as *const usize;
    // SAFETY: a cached `__cxa_get_globals()` result: this thread's globals,
    // whose second word holds `uncaughtExceptions` (an unsigned int).
    !g.is_null() && unsafe { *(g.add(1) as *const u32) } != 0
}

/// This thread's errno (its address read once per thread).
#[inline(always)]
fn errno_at(t: &ThreadState) -> *mut i32 {
    let p = t.errno_at.get();
    if p != 0 {
        return p as *mut i32;
    }
    // SAFETY: no preconditions; the address is valid for the thread's life.
    let p = unsafe { libc::__errno_location() };
    t.errno_at.set(p as usize);
    p
}

/// Switching into a function on thread `t`: saves the caller's state into
/// `caller` and installs the function's (`own`).
#[inline(always)]
pub(crate) fn enter(t: &ThreadState, own: &Saved, caller: &Saved) {
    exchange(t, caller, own);
}

/// Back from the function (stopped or finished) on thread `t`: keeps its
/// state in `own` and gives the caller's back.
#[inline(always)]
pub(crate) fn leave(t: &ThreadState, own: &Saved, caller: &Saved) {
    exchange(t, own, caller);
}

/// Saves the thread's state into `out` and installs `into`'s.
#[inline(always)]
fn exchange(t: &ThreadState, out: &Saved, into: &Saved) {
    let g = cxa_globals(t);
    if !g.is_null() {
        for i in 0..CXA_WORDS {
            // SAFETY: `g` is this thread's `__cxa_eh_globals`, at least
            // CXA_WORDS words long; only this thread touches it.
            unsafe {
                out.cxa[i].set(*g.add(i));
                *g.add(i) = into.cxa[i].get();
            }
        }
    }
    let e = errno_at(t);
    // SAFETY: this thread's errno.
    unsafe {
        out.errno.set(*e);
        *e = into.errno.get();
    }
    out.chain.set(crate::machine::exit::exchange_chain(into.chain.get()));
    if into.cleanup_too {
        out.cleanup.set(exchange_cleanup(into.cleanup.get()));
    }
    let here = current_locale();
    out.locale.set(here);
    let next = into.locale.get();
    if next != 0 && next != here {
        // SAFETY: a locale this side had installed itself.
        unsafe { libc::uselocale(next as libc::locale_t) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locale_word_is_found_and_tracks_uselocale() {
        look_up();
        assert_ne!(LOCALE_AT.load(Ordering::Relaxed), 0, "glibc's locale word not found: switches fall back to uselocale calls");
        // SAFETY: a locale made and freed here, installed on this thread only
        // between the two `uselocale` calls.
        unsafe {
            let mine = libc::newlocale(libc::LC_ALL_MASK, c"C".as_ptr(), std::ptr::null_mut());
            assert!(!mine.is_null());
            let old = libc::uselocale(mine);
            assert_eq!(current_locale(), mine as usize);
            libc::uselocale(old);
            assert_ne!(current_locale(), mine as usize);
            libc::freelocale(mine);
        }
    }
}
