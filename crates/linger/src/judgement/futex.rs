//! The futex-stop rule (`Builder::stop_in_futex_waits`): a deadline may stop
//! a function that waits in a futex inside libc's synchronisation functions.
//!
//! linger never stops a function inside libc: a deadline that finds it there
//! waits for the call to return. A green thread that blocks in
//! `pthread_mutex_lock` on a mutex another green thread of its worker holds
//! would then sleep in the kernel until the holder unlocks, and the holder can
//! only run on that worker: a deadlock. With the option, the handler stops a
//! function whose interrupted point is
//!
//! - a futex wait: the `syscall` instruction with `rax` = `SYS_futex` (the
//!   kernel rewound an untimed wait there to restart it after our
//!   `SA_RESTART` handler, or the call is about to start), or just past the
//!   instruction with `rax` = `-EINTR`, the instruction before it being
//!   `mov eax, SYS_futex` (a timed wait: the kernel ends those with `EINTR`
//!   after a handler, it never restarts them); the operation (`rsi` without
//!   `FUTEX_PRIVATE_FLAG` and `FUTEX_CLOCK_REALTIME`) `FUTEX_WAIT` or
//!   `FUTEX_WAIT_BITSET`, never a priority-inheritance one;
//! - inside one call, made by the function's own code, to one of the entry
//!   points in [`ENTRIES`] (`pthread_mutex_lock`, `pthread_cond_wait`,
//!   `sem_wait`...): the call chain is one run of deferred frames, the
//!   outermost of which lies in that entry point's code (or in a function
//!   it ends in with a tail jump), then the function's own frames. A futex
//!   wait reached any other way (`malloc` waiting for an arena, `fflush(NULL)`
//!   for a stream under the stream list's lock, a `pthread_mutex_lock` in a
//!   `qsort` comparator) stays deferred: those may hold another lock while
//!   they wait;
//! - not a wait for one of glibc's internal locks (no frame of the call in
//!   `__lll_lock_wait_private`): `pthread_join` frees the joined thread's
//!   stack under the stack cache's lock, where `free` may wait for an arena.
//!
//! Resumed, the function returns from the handler to the `syscall`
//! instruction and waits again (the kernel answers `EAGAIN` at once if the
//! word changed, and glibc's loop looks again), or, after a timed wait,
//! hands glibc the `EINTR` it would have had anyway. Why such a point holds
//! nothing another function of the thread could need, and what glibc state a
//! stopped wait leaves, is argued in `docs/safety.md` ("Futex waits in libc:
//! `stop_in_futex_waits`"), checked against glibc 2.36's sources.
//!
//! glibc keeps one per-thread chain of the cleanup buffers its own code
//! pushes around a cancellable wait (`pthread_cond_wait`, `sem_wait`,
//! `pthread_join`: `struct pthread`'s `cleanup`). A function stopped in such a
//! wait leaves its buffer at the head; functions stopped in that order and
//! resumed in another would leave the head pointing into a stack that moved
//! on, which every `longjmp` on the thread reads. So the functions that have
//! the option carry their own chain (swapped at every switch, see `flow.rs`),
//! as they carry their own chain of cancellation buffers (`exit.rs`). Where
//! its place in the thread descriptor cannot be found, the entry points that
//! push such a buffer are left out.

use std::ffi::{c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use crate::judgement::ranges::{self, Table};

/// glibc's entry points whose futex waits may be stopped, and whether the
/// wait happens with a cleanup buffer of glibc's own pushed (its
/// cancellation points). Each was read in glibc 2.36 (`docs/safety.md`): it
/// calls back no code of the program's, and every futex wait under it,
/// except the waits for glibc's internal locks that the rule leaves out,
/// holds at most locks of the synchronisation object it was given (the
/// condition variable's internal lock in `pthread_cond_signal`), which other
/// threads only take through these same entry points.
const ENTRIES: &[(&CStr, bool)] = &[
    (c"pthread_mutex_lock", false),
    (c"pthread_mutex_timedlock", false),
    (c"pthread_mutex_clocklock", false),
    (c"mtx_lock", false),
    (c"mtx_timedlock", false),
    (c"pthread_cond_wait", true),
    (c"pthread_cond_timedwait", true),
    (c"pthread_cond_clockwait", true),
    (c"cnd_wait", true),
    (c"cnd_timedwait", true),
    (c"pthread_cond_signal", false),
    (c"pthread_cond_broadcast", false),
    (c"pthread_cond_destroy", false),
    (c"cnd_signal", false),
    (c"cnd_broadcast", false),
    (c"cnd_destroy", false),
    (c"pthread_rwlock_rdlock", false),
    (c"pthread_rwlock_wrlock", false),
    (c"pthread_rwlock_timedrdlock", false),
    (c"pthread_rwlock_timedwrlock", false),
    (c"pthread_rwlock_clockrdlock", false),
    (c"pthread_rwlock_clockwrlock", false),
    (c"pthread_barrier_wait", false),
    (c"sem_wait", true),
    (c"sem_timedwait", true),
    (c"sem_clockwait", true),
    (c"pthread_join", true),
    (c"pthread_timedjoin_np", true),
    (c"pthread_clockjoin_np", true),
    (c"thrd_join", true),
];

/// The code the rule looks for, set once, outside any handler ([`prepare`]).
struct Code {
    /// Ranges `[start, end)` of the entry points (libc's own definitions)
    /// and of the functions they end in, sorted.
    entries: Box<[(usize, usize)]>,
    /// `__lll_lock_wait_private`: the wait for one of glibc's internal locks
    /// (`lll_lock` with `LLL_PRIVATE`: the thread-stack cache's, malloc's
    /// arenas', stdio's streams'), which glibc takes while holding another
    /// lock (`pthread_join` frees the joined thread's stack under the stack
    /// cache's lock, and `free` may wait for an arena there). A wait in it is
    /// never stopped, whatever called it.
    internal: Box<[(usize, usize)]>,
}

static CODE: OnceLock<Code> = OnceLock::new();

/// Finds the entry points and the cleanup chain's head (once per process,
/// outside any handler: the loader's lookups are not async-signal-safe),
/// once the range table is built and the thread can read it.
pub(crate) fn prepare() {
    CODE.get_or_init(|| {
        find_cleanup_head();
        resolve()
    });
}

extern "C" {
    /// glibc's push of a cleanup buffer on its own chain (the old
    /// interface, which glibc's cancellation points use internally).
    fn _pthread_cleanup_push(buf: *mut c_void, routine: extern "C" fn(*mut c_void), arg: *mut c_void);
    /// Pops it (running the routine if `execute`).
    fn _pthread_cleanup_pop(buf: *mut c_void, execute: libc::c_int);
}

extern "C" fn no_cleanup(_: *mut c_void) {}

/// Reads `_pthread_cleanup_push`'s load of the head (`mov rax, fs:[disp32]`,
/// within its first instructions) and checks the place by pushing and
/// popping a scratch buffer.
fn find_cleanup_head() {
    let f = _pthread_cleanup_push as unsafe extern "C" fn(*mut c_void, extern "C" fn(*mut c_void), *mut c_void) as *const u8;
    // SAFETY: the first 32 bytes of a function of libc's text (it is longer
    // than its four moves and `ret`).
    let code = unsafe { std::slice::from_raw_parts(f, 32) };
    let Some(i) = code.windows(5).position(|w| w == [0x64, 0x48, 0x8b, 0x04, 0x25]) else { return };
    let Some(d) = code.get(i + 5..i + 9) else { return };
    let off = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize;
    if off == 0 || off % 8 != 0 || off > 0x10000 {
        return;
    }
    // `struct _pthread_cleanup_buffer`: routine, arg, canceltype, prev.
    let mut scratch = [0usize; 4];
    let p = scratch.as_mut_ptr() as *mut c_void;
    // SAFETY: glibc's push and pop of a buffer as large as its own, popped
    // before it goes out of scope (without running the routine); the reads
    // are of a word of this thread's descriptor at an offset glibc's code
    // uses.
    let ok = unsafe {
        let before = gotcha::fs_word(off as isize);
        _pthread_cleanup_push(p, no_cleanup, std::ptr::null_mut());
        let during = gotcha::fs_word(off as isize);
        let recorded = scratch[3];
        _pthread_cleanup_pop(p, 0);
        let after = gotcha::fs_word(off as isize);
        during == p as usize && recorded == before && after == before
    };
    if ok {
        crate::machine::flow::CLEANUP_AT.store(off, Ordering::Relaxed);
    }
}

/// The code ranges of libc's entry points (and libpthread's, for a glibc
/// older than 2.34 that still has one), and of the functions they jump to
/// at their end: glibc's entry points often end in a tail call
/// (`sem_wait` jumps to `__new_sem_wait_slow64`, `pthread_join` to
/// `__pthread_clockjoin_ex`, `pthread_mutex_lock` to
/// `__pthread_mutex_lock_full` for robust and priority mutexes), whose frame
/// then replaces theirs on the call chain. Those are found in the entry
/// points' code: a `jmp rel32` (or conditional `jcc rel32`) whose target
/// is the first instruction of another function of the same object, by its
/// unwind tables, and again in those (two levels).
fn resolve() -> Code {
    let none = || Code { entries: Box::new([]), internal: Box::new([]) };
    let Some(table) = ranges::read() else { return none() };
    let cleanup_known = crate::machine::flow::CLEANUP_AT.load(Ordering::Relaxed) != 0;
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut internal = Vec::new();
    for lib in [c"libc.so.6", c"libpthread.so.0"] {
        // SAFETY: RTLD_NOLOAD only returns an object that is loaded; the
        // reference taken is kept for the life of the process (no dlclose:
        // ours would rebuild the table).
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        // SAFETY: as below.
        let p = unsafe { libc::dlsym(h, c"__lll_lock_wait_private".as_ptr()) } as usize;
        internal.extend(function_at(&table, p));
        for &(name, pushes) in ENTRIES {
            if pushes && !cleanup_known {
                continue;
            }
            // SAFETY: a NUL-terminated name looked up in a loaded object
            // (and its dependencies: the default version of libc's own).
            let p = unsafe { libc::dlsym(h, name.as_ptr()) } as usize;
            if let Some(r) = function_at(&table, p) {
                out.push(r);
            }
        }
    }
    if internal.is_empty() {
        // Without it, waits for glibc's own locks could not be told apart.
        return none();
    }
    let mut level = out.clone();
    for _ in 0..2 {
        let mut next = Vec::new();
        for &(s, e) in &level {
            for t in tail_targets(s, e) {
                if let Some(r) = function_at(&table, t).filter(|r| !out.contains(r) && same_object(&table, s, t)) {
                    out.push(r);
                    next.push(r);
                }
            }
        }
        level = next;
    }
    out.sort_unstable();
    out.dedup();
    Code { entries: out.into_boxed_slice(), internal: internal.into_boxed_slice() }
}

/// `[start, end)` of the function that starts exactly at `p`, by the unwind
/// tables of its object.
fn function_at(table: &Table, p: usize) -> Option<(usize, usize)> {
    if p == 0 || !table.is_known(p) {
        return None;
    }
    let obj = table.unwind_object(p)?;
    crate::judgement::eh_frame::function_extent(obj, p).filter(|&(s, e)| s == p && e > s)
}

/// Do `a` and `b` lie in the same object's unwind tables?
fn same_object(table: &Table, a: usize, b: usize) -> bool {
    match (table.unwind_object(a), table.unwind_object(b)) {
        (Some(x), Some(y)) => std::ptr::eq(x, y),
        _ => false,
    }
}

/// Targets outside `[s, e)` of the `jmp rel32` and `jcc rel32` encodings in
/// that code (a byte that merely looks like one yields a target that
/// `function_at` then has to accept as some function's first instruction).
fn tail_targets(s: usize, e: usize) -> Vec<usize> {
    // SAFETY: [s, e) is a function's code, in a mapped executable segment.
    let code = unsafe { std::slice::from_raw_parts(s as *const u8, e - s) };
    let mut v = Vec::new();
    for i in 0..code.len() {
        let (len, at) = match code[i] {
            0xE9 => (5, i + 1),
            0x0F if code.get(i + 1).is_some_and(|b| b & 0xF0 == 0x80) => (6, i + 2),
            _ => continue,
        };
        let Some(d) = code.get(at..at + 4) else { continue };
        let rel = i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as isize;
        let t = (s + i + len).wrapping_add_signed(rel);
        if t < s || t >= e {
            v.push(t);
        }
    }
    v
}

/// Is `at` in the code of one of the entry points? Async-signal-safe.
fn in_entry(code: &Code, at: usize) -> bool {
    let e = &code.entries;
    let i = e.partition_point(|r| r.1 <= at);
    i < e.len() && e[i].0 <= at
}

/// Are the interrupted registers those of a futex wait (above)?
/// Async-signal-safe.
fn at_futex_wait(table: &Table, uc: &libc::ucontext_t) -> bool {
    let g = &uc.uc_mcontext.gregs;
    let pc = g[crate::base::arch::REG_PC] as usize;
    let rax = g[crate::base::arch::REG_RET];
    // The code bytes are read inside the handler's reading section of the
    // table (see `ranges.rs`), and only in objects it knows.
    let futex = if rax == libc::SYS_futex {
        table.is_known(pc) && ranges::at_syscall_instruction(pc)
    } else if rax == -(libc::EINTR as i64) {
        // `mov eax, SYS_futex` then `syscall`, and the signal came as the
        // wait ended with EINTR.
        table.is_known(pc) && pc >= 7 && table.is_known(pc - 7) && {
            // SAFETY: [pc-7, pc) lies in a known executable segment (both
            // ends checked; a segment is contiguous).
            let b = unsafe { std::slice::from_raw_parts((pc - 7) as *const u8, 7) };
            b == [0xB8, libc::SYS_futex as u8, 0, 0, 0, 0x0F, 0x05]
        }
    } else {
        false
    };
    const OP_MASK: i64 = !((libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME) as i64);
    let op = g[crate::base::arch::REG_ARG2] & OP_MASK;
    futex && (op == libc::FUTEX_WAIT as i64 || op == libc::FUTEX_WAIT_BITSET as i64)
}

/// The rule, for a function whose interrupted point is in deferred code:
/// `Some(release)` if it may be stopped there (`release`: no return trap is
/// armed on its chain, so one it holds is dead), `None` if the usual
/// deferral applies. `[lo, hi)` is its stack and `entry` its entry frame.
/// Called from the preemption handler. Async-signal-safe.
pub(crate) fn judge(table: &Table, uc: &libc::ucontext_t, lo: usize, hi: usize, entry: usize, through_std: bool) -> Option<bool> {
    if !at_futex_wait(table, uc) {
        return None;
    }
    let code = CODE.get()?;
    let (at, trapped) = crate::judgement::unwind::deferred_call(table, uc, lo, hi, entry, &code.internal, through_std)?;
    in_entry(code, at).then_some(!trapped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `resolve` finds in this glibc: the entry points, the functions
    /// they end in (more ranges than names), glibc's internal lock wait
    /// apart, and nothing of malloc's or stdio's.
    #[test]
    fn finds_the_entry_points_and_what_they_jump_to() {
        crate::runtime::launch::init().unwrap();
        let code = CODE.get().expect("prepared at init");
        let named = ENTRIES.len(); // a few share code (aliases), a few may be missing
        assert!(code.entries.len() > named / 2, "{} ranges", code.entries.len());
        for f in [libc::pthread_mutex_lock as *const () as usize, libc::pthread_cond_wait as *const () as usize, libc::sem_wait as *const () as usize, libc::pthread_join as *const () as usize] {
            assert!(in_entry(code, f), "{f:#x} is no entry point");
        }
        for f in [libc::malloc as *const () as usize, libc::free as *const () as usize, libc::fflush as *const () as usize, libc::qsort as *const () as usize] {
            assert!(!in_entry(code, f), "{f:#x} taken for an entry point");
        }
        assert!(!code.internal.is_empty(), "no __lll_lock_wait_private");
        assert!(!in_entry(code, code.internal[0].0));
        // `sem_wait` ends in a tail jump on x86-64 glibc: its target is in too.
        let sem_wait = libc::sem_wait as *const () as usize;
        let targets = tail_targets(sem_wait, code.entries.iter().find(|r| r.0 == sem_wait).unwrap().1);
        assert!(targets.iter().any(|&t| code.entries.iter().any(|r| r.0 == t)), "sem_wait's tail call not followed");
    }
}
