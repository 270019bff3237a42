//! Is a thread inside code that must not be interrupted, asked from a signal
//! handler of its own?
//!
//! linger's handler never stops a function inside non-reentrant code (libc's
//! malloc and stdio locks, the loader, parts of Rust's `std`: the table in
//! `ranges.rs`); it walks the interrupted call chain to find out. A program's
//! signal handler that calls `printf` or `malloc` has the same problem: run
//! while its thread is inside `malloc`, it deadlocks on the arena lock. This
//! module offers that judgement for any thread ([`interrupted_in_deferred`]).
//!
//! A thread's call chain ends at its entry: the frame that called `main` or
//! the thread's start routine ([`enter_thread`]; libc's start-up frames above
//! it are not the program's calls), the entry of the preemptible function it
//! runs, or the signal frame of a program's handler (beyond it is the code
//! that handler interrupted; linger's own handler's frame is seen through).

use std::cell::Cell;

use crate::thread::ts;
use crate::unwind::Chain;
use crate::{ranges, Error};

/// Stack the walk needs below the interrupted point (see `preempt.rs`).
const WALK_ROOM: usize = 16 * 1024;

/// One thread's stack and where its call chain ends.
struct State {
    /// The thread's stack and where its call chain ends (0: unknown).
    lo: Cell<usize>,
    hi: Cell<usize>,
    entry: Cell<usize>,
}

thread_local! {
    /// This thread's state, for its handlers (const, no destructor).
    static STATE: Cell<*const State> = const { Cell::new(std::ptr::null()) };
    /// Frees it at thread exit.
    static OWNER: Owner = const { Owner(Cell::new(std::ptr::null_mut())) };
}

struct Owner(Cell<*mut State>);

impl Drop for Owner {
    fn drop(&mut self) {
        let p = self.0.replace(std::ptr::null_mut());
        if p.is_null() {
            return;
        }
        let _ = STATE.try_with(|s| s.set(std::ptr::null()));
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: allocated by `enter_thread`, unpublished just above.
        drop(unsafe { Box::from_raw(p) });
    }
}

fn state() -> Option<&'static State> {
    let p = STATE.try_with(Cell::get).ok()?;
    // SAFETY: published by `enter_thread` and unpublished before it is
    // freed, on this thread only.
    unsafe { p.as_ref() }
}

/// Prepares the calling thread for [`interrupted_in_deferred`]: linger's
/// per-thread state (its unwinder, its mark for
/// reading the code table, its timer, see [`crate::init`]) and this
/// module's. `entry` is where its call chain ends: the stack pointer of the
/// code that is about to call the thread's own code (`main`, a start
/// routine), whose frames and those above are not judged; 0 when unknown
/// (the whole stack counts, libc's start-up frames included). Call it again
/// with 0 once that code has returned. Not async-signal-safe.
pub fn enter_thread(entry: usize) -> Result<(), Error> {
    crate::runtime::init()?;
    let st = match state() {
        Some(st) => st,
        None => {
            let layout = std::alloc::Layout::new::<State>();
            // SAFETY: a non-zero size; all-zero bytes are a valid `State`
            // (cells of integers).
            let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut State;
            if p.is_null() {
                return Err(Error::OutOfMemory);
            }
            if OWNER.try_with(|o| o.0.set(p)).is_err() {
                // SAFETY: just allocated with this layout, never published.
                unsafe { std::alloc::dealloc(p as *mut u8, layout) };
                return Err(Error::OutOfMemory); // the thread is exiting
            }
            let _ = STATE.try_with(|s| s.set(p));
            // SAFETY: initialised (zeroed) above and owned by this thread.
            unsafe { &*p }
        }
    };
    let (lo, hi) = crate::interpose::stack::thread_stack().unwrap_or((0, 0));
    st.lo.set(lo);
    st.hi.set(hi);
    st.entry.set(entry);
    Ok(())
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
    match judge(state()?, uc) {
        Verdict::Clear => Some(false),
        Verdict::Deferred { .. } => Some(true),
        Verdict::Unknown => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Clear,
    /// `patch`: where a return trap could take the signal (the return
    /// address slot of the outermost deferred call, and that call's code).
    Deferred { patch: Option<(usize, usize)> },
    Unknown,
}

fn judge(st: &State, uc: &libc::ucontext_t) -> Verdict {
    let g = &uc.uc_mcontext.gregs;
    let (pc, sp) = (g[libc::REG_RIP as usize] as usize, g[libc::REG_RSP as usize] as usize);
    let Some(table) = ranges::read() else { return Verdict::Unknown };
    let in_pc = table.must_defer(pc);
    let by_pc = if in_pc { Verdict::Deferred { patch: None } } else { Verdict::Clear };
    // A stack we do not know (a coroutine's): the interrupted code only.
    let Some((lo, hi, entry)) = chain_bounds(st, sp) else { return by_pc };
    if sp < lo.saturating_add(WALK_ROOM) {
        return by_pc;
    }
    // The system call of a plain wrapper, waiting (rewound by the kernel
    // to restart): only the frames above it count.
    let waiting = in_pc && table.is_known(pc) && ranges::at_syscall_instruction(pc);
    match crate::unwind::walk_to_signal_frame(&table, uc, lo, hi, entry, in_pc && !waiting) {
        Some(Chain::Clear { .. }) => Verdict::Clear,
        Some(Chain::Deferred { patch, .. }) => Verdict::Deferred { patch },
        // No unwind information, or another walk of this thread's is under
        // way below us: the conservative scan of the stack's words.
        _ if !in_pc && !table.in_inlined(pc) && crate::preempt::scan_clear(&table, sp, entry) => Verdict::Clear,
        _ => Verdict::Deferred { patch: None },
    }
}

/// The stack `sp` is on and where the call chain on it ends: the running
/// preemptible function's, the thread's own, or its alternate signal stack.
fn chain_bounds(st: &State, sp: usize) -> Option<(usize, usize, usize)> {
    let f = ts().current.get();
    if !f.is_null() {
        // SAFETY: `current` is a live frame while set.
        let f = unsafe { &*f };
        let entry = f.entry_sp.get();
        if sp >= f.floor() && sp < entry && entry <= f.stack_hi {
            return Some((f.floor(), f.stack_hi, entry));
        }
    }
    let (lo, hi) = (st.lo.get(), st.hi.get());
    if sp >= lo && sp < hi {
        let e = st.entry.get();
        return Some((lo, hi, if e > sp && e <= hi { e } else { hi }));
    }
    // SAFETY: an all-zero stack_t is a valid out value; the call only
    // queries this thread's alternate stack.
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer; sigaltstack is async-signal-safe.
    if unsafe { libc::sigaltstack(std::ptr::null(), &mut ss) } == 0 && ss.ss_flags & libc::SS_DISABLE == 0 {
        let (alo, ahi) = (ss.ss_sp as usize, ss.ss_sp as usize + ss.ss_size);
        if sp >= alo && sp < ahi {
            return Some((alo, ahi, ahi));
        }
    }
    None
}
