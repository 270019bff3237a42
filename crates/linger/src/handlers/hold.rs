//! libas-safe's hold mode, the mechanism (`crate::deferral` is its face):
//! a program's signal that comes while its thread is in deferred code is
//! held in a per-thread ring and run when the outermost deferred call
//! returns (a return trap) or a retry finds the thread out of it. The
//! design and its limits are in `deferral`'s documentation and
//! `docs/safety.md`, "libas-safe".

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicU64, Ordering};

use libc::{c_int, c_void};

use crate::handlers::program_signals::{holding, run_program_handler, Action};
use crate::state::thread::{now_ns, ts};
use crate::judgement::unwind::Chain;
use crate::{judgement::ranges, machine::sigmask, Error};

/// Signals held at once per thread. Standard signals take one entry each
/// at most (a second one coalesces, as pending ones do); a burst of
/// real-time signals beyond this waits in the kernel's queue.
const RING: usize = 64;
/// Stack the walk needs below the interrupted point (see `preempt.rs`).
const WALK_ROOM: usize = 16 * 1024;
/// The backstop behind a return trap, doubled up to 128 times (32 ms):
/// the trap is lost if the deferred call is left by `longjmp`.
const BACKSTOP_NS: u64 = 250_000;
const BACKSTOP_DOUBLINGS: u32 = 7;
/// Retries at the base interval before backing off, as linger's.
const RETRIES_BEFORE_BACKOFF: u32 = 32;

/// A signal of the program's, held.
#[derive(Clone, Copy)]
struct Held {
    sig: c_int,
    action: Action,
    info: libc::siginfo_t,
}

/// One thread's held signals, its stack and its trap. Only its own thread
/// (code and handlers) touches it; changes happen with the program's
/// signals blocked and `busy` set, so a handler never finds it half-changed.
struct State {
    ring: [Cell<Held>; RING],
    head: Cell<usize>,
    len: Cell<usize>,
    /// Real-time signals the ring had no room for, blocked by us in the
    /// interrupted code's mask: their later instances wait in the kernel.
    blocked: Cell<u64>,
    /// The thread's stack and where its call chain ends (0: unknown).
    lo: Cell<usize>,
    hi: Cell<usize>,
    entry: Cell<usize>,
    /// Our return trap: the patched slot (0: none), its stub, and the stack
    /// the slot is on.
    trap_slot: Cell<usize>,
    trap_stub: Cell<usize>,
    trap_stack: Cell<(usize, usize)>,
    retries: Cell<u32>,
    busy: Cell<bool>,
    /// The outermost `flush` delivering now: the address and value of a
    /// marker on its stack (gone once it returned or was left by `longjmp`),
    /// and the stack pointer where it calls the program's handlers.
    delivering: Cell<(usize, u64, usize)>,
    /// What the handlers such flushes are running add to the mask (their
    /// `sa_mask` and signal): held signals they block wait for them.
    inflight: Cell<u64>,
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
        // The main thread's destructors run inside `exit`, before the
        // program's `atexit` handlers: its signals stay held there.
        // SAFETY: getpid and gettid have no preconditions.
        if unsafe { libc::gettid() == libc::getpid() } {
            return;
        }
        let p = self.0.replace(std::ptr::null_mut());
        if p.is_null() {
            return;
        }
        // Another thread ends: what glibc does after this (freeing its
        // malloc cache under the arena lock) would run a handler unheld.
        // Its signals wait from now on; one sent to the process goes to
        // another thread.
        sigmask::hold();
        let _ = STATE.try_with(|s| s.set(std::ptr::null()));
        compiler_fence(Ordering::SeqCst);
        // SAFETY: allocated by `enter`, unpublished just above; the
        // thread is ending, so no frame can return into its trap any more.
        let st = unsafe { Box::from_raw(p) };
        if st.trap_slot.get() != 0 {
            crate::judgement::return_trap::release_detached(st.trap_stub.get());
        }
    }
}

fn state() -> Option<&'static State> {
    let p = STATE.try_with(Cell::get).ok()?;
    // SAFETY: published by `enter` and unpublished before it is
    // freed, on this thread only.
    unsafe { p.as_ref() }
}

/// Gives the calling thread its state for holding signals and judging its
/// call chain, its chain ending at `entry` (see `deferral::enter_thread`).
pub(crate) fn enter(entry: usize) -> Result<(), Error> {
    let st = match state() {
        Some(st) => st,
        None => {
            let layout = std::alloc::Layout::new::<State>();
            // SAFETY: a non-zero size; all-zero bytes are a valid `State`
            // (empty ring, no trap, cells of integers and `Held`s of plain C
            // values).
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
    let (lo, hi) = crate::base::sys::thread_stack().unwrap_or((0, 0));
    st.lo.set(lo);
    st.hi.set(hi);
    st.entry.set(entry);
    Ok(())
}

/// `deferral::interrupted_in_deferred`.
pub(crate) fn interrupted_in_deferred(uc: &libc::ucontext_t) -> Option<bool> {
    match judge(state()?, uc) {
        Verdict::Clear => Some(false),
        Verdict::Deferred { .. } => Some(true),
        Verdict::Unknown => None,
    }
}

/// Forgets, in a forked child, what the parent's threads held (once per
/// process).
pub(crate) fn forget_in_children() {
    static ATFORK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registering a plain `extern "C"` handler with no arguments.
    ATFORK.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forget_in_child));
    });
}

impl Verdict {
    /// No place for a trap in the runtime's own way in or out of a function
    /// (a function is current, the code runs on another stack): its stop at
    /// a trap assumes the function's stack.
    fn filter_transit(self, sp: usize) -> Verdict {
        match self {
            Verdict::Deferred { .. } if !on_function_stack(sp) => Verdict::Deferred { patch: None },
            v => v,
        }
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
    let (pc, sp) = (g[crate::base::arch::REG_PC] as usize, g[crate::base::arch::REG_SP] as usize);
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
    match crate::judgement::unwind::walk_to_signal_frame(&table, uc, lo, hi, entry, in_pc && !waiting) {
        Some(Chain::Clear { .. }) => Verdict::Clear,
        Some(Chain::Deferred { patch, .. }) => Verdict::Deferred { patch },
        // No unwind information, or another walk of this thread's is under
        // way below us: the conservative scan of the stack's words.
        _ if !in_pc && !table.in_inlined(pc) && crate::handlers::preempt::scan_clear(&table, sp, entry) => Verdict::Clear,
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

fn synchronous(sig: c_int) -> bool {
    matches!(sig, libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS)
}

/// Real-time signals queue; standard ones coalesce.
fn realtime(sig: c_int) -> bool {
    sig >= libc::SIGRTMIN()
}

/// The program's signal `sig` came to its handler's trampoline (`signals.rs`)
/// at `uc`: holds it, or runs its handler now (after the signals held
/// before it). False if the mode is off for it: the caller runs it.
/// Async-signal-safe.
///
/// # Safety
/// Called from the trampoline with the kernel's `info` and `uc`.
pub(crate) unsafe fn arrived(sig: c_int, action: &Action, info: *mut libc::siginfo_t, uc: *mut libc::ucontext_t) -> bool {
    if !holding() || info.is_null() || uc.is_null() || synchronous(sig) {
        return false;
    }
    // A `vfork` child shares this thread's state with its parent.
    let Some(st) = state().filter(|_| crate::machine::signal::in_owner_process()) else { return false };
    // The trampoline runs with every signal of ours blocked (its `sa_mask`,
    // see `trampoline_mask`) until a handler of the program's runs: nothing
    // comes in between while it decides.
    // SAFETY: the kernel's ucontext for this handler, ours to edit.
    let uc = unsafe { &mut *uc };
    let verdict = judge(st, uc);
    // SAFETY: the kernel's siginfo.
    let held = verdict != Verdict::Clear && keep(st, sig, action, unsafe { &*info }, uc, verdict);
    if !held {
        if st.len.get() > 0 {
            flush(st, Context::Signal(uc)); // those that came before this one
        }
        // With the mask the kernel would have given it.
        let prev = sigmask::hold();
        sigmask::set(sigmask::word(&uc.uc_sigmask) | handler_mask(sig, action));
        run_program_handler(sig, action, info, uc as *mut libc::ucontext_t as *mut c_void);
        sigmask::set(prev);
    }
    true
}

/// What the kernel adds to the mask while `action` handles `sig`.
fn handler_mask(sig: c_int, action: &Action) -> u64 {
    action.mask | if action.flags & libc::SA_NODEFER != 0 { 0 } else { sigmask::bit(sig) }
}

/// The `sa_mask` of the program's handlers' trampoline while the mode is
/// on: the program's asynchronous signals and the preemption signal, so
/// that neither a signal of the program's nor the timer (`after_timer`)
/// comes while it decides. Its handler then runs with its own mask.
pub(crate) fn trampoline_mask() -> Option<libc::sigset_t> {
    holding().then(|| sigmask::as_sigset(sigmask::program() | sigmask::bit(crate::machine::signal::number())))
}

/// Holds `info` for `sig`, which interrupted `uc`, and arranges to look
/// again. False if it could not be kept.
fn keep(st: &State, sig: c_int, action: &Action, info: &libc::siginfo_t, uc: &mut libc::ucontext_t, verdict: Verdict) -> bool {
    locked(st, || keep_locked(st, sig, action, info, uc, verdict))
}

fn keep_locked(st: &State, sig: c_int, action: &Action, info: &libc::siginfo_t, uc: &mut libc::ucontext_t, verdict: Verdict) -> bool {
    let bit = sigmask::bit(sig);
    let coalesced = !realtime(sig) && ring(st).any(|h| h.sig == sig);
    let held = if coalesced {
        true
    } else if st.len.get() < RING {
        let i = (st.head.get() + st.len.get()) % RING;
        st.ring[i].set(Held { sig, action: *action, info: *info });
        st.len.set(st.len.get() + 1);
        true
    } else {
        // No room: to the back of the kernel's queue, behind the ring,
        // with the signal blocked until the ring is delivered.
        // SAFETY: rt_tgsigqueueinfo to this very thread, with a siginfo
        // the kernel gave us (any code may be queued to oneself).
        let queued = unsafe {
            libc::syscall(libc::SYS_rt_tgsigqueueinfo, libc::getpid(), libc::gettid(), sig, info as *const libc::siginfo_t)
        } == 0;
        if queued {
            // SAFETY: the first word of the kernel's mask in the ucontext.
            unsafe { *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) |= bit };
            st.blocked.set(st.blocked.get() | bit);
        }
        queued
    };
    if held {
        wake_later(st, verdict, uc);
    }
    held
}

/// Runs `f` with the program's signals blocked and `busy` set: neither a
/// signal of the program's nor the timer's look (`after_timer`) finds the
/// state half-changed, or takes the mask held here for the program's.
///
/// `busy` is set before the mask is held and cleared after it is given
/// back: the timer is not blocked here, and a look of its between the two
/// would take the held mask for the program's, run the held signals with
/// it and release what we blocked (`blocked`); the mask given back after
/// would then block those signals again with nothing left to release them
/// (a lost real-time signal, found by `tests/as-safe` under load).
fn locked<R>(st: &State, f: impl FnOnce() -> R) -> R {
    let was = st.busy.replace(true);
    compiler_fence(Ordering::SeqCst);
    let prev = sigmask::hold();
    let r = f();
    sigmask::set(prev);
    compiler_fence(Ordering::SeqCst);
    st.busy.set(was);
    r
}

/// The held signals, oldest first.
fn ring(st: &State) -> impl Iterator<Item = Held> + '_ {
    (0..st.len.get()).map(move |k| st.ring[(st.head.get() + k) % RING].get())
}

/// Makes sure the held signals are looked at again: when the outermost
/// deferred call returns (a return trap, kept if it is still on the
/// chain), with a timer behind it; or by timer retries where no trap can
/// be set. Called with `busy` set.
fn wake_later(st: &State, verdict: Verdict, uc: &libc::ucontext_t) {
    let (pc, sp) = (uc.uc_mcontext.gregs[crate::base::arch::REG_PC] as usize, uc.uc_mcontext.gregs[crate::base::arch::REG_SP] as usize);
    if st.trap_slot.get() != 0 {
        if trap_alive(st, pc, sp) {
            return backstop(st, true);
        }
        release_trap(st);
    }
    if let Verdict::Deferred { patch: Some((slot, code)) } = verdict.filter_transit(sp) {
        if crate::handlers::preempt::may_trap(code) {
            // SAFETY: `slot` was just found on the interrupted chain by the
            // walk, and that code is interrupted by this handler.
            if let Some(i) = unsafe { crate::judgement::return_trap::arm_detached(slot) } {
                st.trap_slot.set(slot);
                st.trap_stub.set(i);
                st.trap_stack.set(chain_bounds(st, sp).map_or((0, 0), |b| (b.0, b.1)));
                return backstop(st, true);
            }
        }
    }
    backstop(st, false);
}

/// Is our trap still where a return will reach it, or being reached? The
/// interrupted code may be its stub: the call returned into it, and it is
/// about to read the real return address from its data (given back, that
/// reads 0, and the program returns to address 0). Otherwise its slot must
/// be live (at or above the interrupted stack pointer) and still hold the
/// trap address; on another stack than the interrupted one we cannot tell,
/// and keep it.
fn trap_alive(st: &State, pc: usize, sp: usize) -> bool {
    if crate::judgement::return_trap::in_stub(st.trap_stub.get(), pc) {
        return true;
    }
    let slot = st.trap_slot.get();
    let (lo, hi) = st.trap_stack.get();
    if sp < lo || sp >= hi {
        return true;
    }
    // SAFETY: [sp, hi) is the live part of the stack the slot was on.
    slot >= sp && slot + 8 <= hi && unsafe { std::ptr::read_volatile(slot as *const usize) } == crate::judgement::return_trap::trap_address(st.trap_stub.get())
}

fn release_trap(st: &State) {
    crate::judgement::return_trap::release_detached(st.trap_stub.get());
    st.trap_slot.set(0);
}

/// Arms the thread's timer to look again: behind a trap (`long`), 250 us
/// doubling to 32 ms; otherwise linger's retry schedule (10 us, 32 times,
/// then doubling to 250 us).
fn backstop(st: &State, long: bool) {
    let n = st.retries.get();
    st.retries.set(n.saturating_add(1));
    let base = crate::handlers::preempt::RETRY_NS.load(Ordering::Relaxed);
    let delay = if long {
        BACKSTOP_NS << n.min(BACKSTOP_DOUBLINGS)
    } else {
        (base << n.saturating_sub(RETRIES_BEFORE_BACKOFF).min(16)).min(BACKSTOP_NS)
    };
    let t = ts();
    let _ = crate::machine::timer::arm(t, now_ns() + delay.max(crate::handlers::preempt::min_delay(t)));
}

/// A return trap fired, at the return into `slot` (`return_trap.rs`, before
/// linger's own stop): frees ours if it is ours, and runs the held signals,
/// the outermost deferred call having returned. False if linger must not
/// take a stop here: the return is off the running function's stack (on
/// its caller's, which is not the function's flow), where only a trap of
/// ours can be (linger's own are set on the function's chain). Not told by
/// `trap_slot`: a signal that came while the trap fired (the real return
/// address back in the slot) may have given it back already.
pub(crate) fn at_return(slot: usize) -> bool {
    let Some(st) = state() else { return true };
    let ours = st.trap_slot.get() == slot;
    if ours {
        locked(st, || {
            if st.trap_slot.get() == slot {
                release_trap(st);
            }
        });
    }
    if st.len.get() > 0 {
        // SAFETY: the stub pushed the real return address back into the slot.
        let pc = unsafe { std::ptr::read_volatile(slot as *const usize) };
        flush(st, Context::Trap { pc, sp: slot + 8 });
    }
    on_function_stack(slot)
}

/// Is `sp` on the running function's stack, if a function runs? (A thread
/// running the runtime's way in or out of a function is on its caller's.)
fn on_function_stack(sp: usize) -> bool {
    let f = ts().current.get();
    // SAFETY: `current` is a live frame while set.
    f.is_null() || unsafe { sp >= (*f).floor() && sp < (*f).stack_hi }
}

/// The thread's timer fired (linger's handler, at its end): held signals
/// run now if the thread is out of deferred code, else wait on.
pub(crate) fn after_timer(uc: &mut libc::ucontext_t) {
    if !holding() {
        return;
    }
    let Some(st) = state().filter(|st| st.len.get() > 0 && crate::machine::signal::in_owner_process()) else { return };
    if st.busy.get() {
        return backstop(st, false); // interrupted our own bookkeeping
    }
    let verdict = judge(st, uc);
    if verdict == Verdict::Clear {
        return flush(st, Context::Signal(uc));
    }
    locked(st, || wake_later(st, verdict, uc));
}

/// The program changed its signal mask: a held signal a handler blocked
/// (its `sa_mask`) may be unblocked now; look again soon.
pub(crate) fn mask_changed() {
    if let Some(st) = state().filter(|st| holding() && st.len.get() > 0) {
        locked(st, || backstop(st, false));
    }
}

/// Where held signals are delivered.
enum Context<'a> {
    /// In ordinary code, at the return of a deferred call to `pc` with the
    /// stack pointer at `sp` (a return trap).
    Trap { pc: usize, sp: usize },
    /// In a handler of ours that interrupted the thread at this context.
    Signal(&'a mut libc::ucontext_t),
}

/// Distinct markers for `flush`'s frames.
static MARKER: AtomicU64 = AtomicU64::new(1);

/// Runs the held signals' handlers, oldest first, each with the mask the
/// kernel would have set: the interrupted code's, plus its `sa_mask` and
/// its signal unless `SA_NODEFER`. Inside a handler run this way (a trap or
/// a retry in its library calls), only signals that handler's mask does
/// not block run: the others wait for it to return. errno is kept.
fn flush(st: &State, mut ctx: Context) {
    // SAFETY: errno location is valid for the thread.
    let errno = unsafe { *libc::__errno_location() };
    // `busy` covers every moment the mask is held here (see `locked`), and
    // is given back as found: a flush run by a handler of the program's
    // that came between two of ours (below) returns into code that is busy.
    let was_busy = st.busy.replace(true);
    compiler_fence(Ordering::SeqCst);
    let outer = sigmask::hold();
    let here = match &ctx {
        Context::Trap { .. } => outer,
        Context::Signal(uc) => sigmask::word(&uc.uc_sigmask),
    };
    // The program's own mask here: without what we blocked (real-time
    // signals the ring had no room for), which a flush nested in a handler
    // run below may have released already.
    let program = here & !st.blocked.get();
    let marker = MARKER.fetch_add(1, Ordering::Relaxed);
    let mark = std::hint::black_box(&marker) as *const u64 as usize;
    let sp = crate::base::arch::stack_pointer();
    let outer_flush = st.delivering.get();
    let (at, value, below) = outer_flush;
    // That flush is still under way: its marker is still there. (It is on
    // a stack of this thread's, which stays mapped; a value other than its
    // own means that flush is gone.)
    // SAFETY: as above.
    let live = at != 0 && unsafe { std::ptr::read_volatile(at as *const u64) } == value;
    // Inside a handler it runs: below its calls. A live one elsewhere is
    // another flow's (a preemptible function's, stopped mid-way while its
    // caller runs): kept for when it goes on.
    let nested = live && sp < below;
    let outer_inflight = st.inflight.get();
    if !nested {
        st.delivering.set((mark, marker, sp));
        st.inflight.set(0);
    }
    // Held signals the code here blocks: its own mask (without what we
    // blocked), and the masks of the handlers it runs inside. Outside such
    // a handler, held signals came before whatever blocked them here and
    // run all the same, unless every signal is blocked: the runtime holds
    // them while a function that holds its signals is stopped or on its way
    // (linger-run's main, `Builder::hold_signals`), or the program blocked
    // them all; they wait for the mask to change, as pending ones would.
    let every = sigmask::program();
    let blocking = if nested {
        program | st.inflight.get()
    } else if program & every == every {
        u64::MAX
    } else {
        0
    };
    // The ones we blocked (no room in the ring) are no handler's.
    while let Some(e) = take(st, blocking) {
        st.retries.set(0);
        if st.len.get() > 0 {
            // The handler may leave by `longjmp`: the rest must not wait
            // for another signal.
            backstop(st, true);
        }
        let m = program | st.blocked.get() | handler_mask(e.sig, &e.action);
        let mut info = e.info;
        let mut fake = Fake::new();
        let ucp = match &mut ctx {
            Context::Signal(uc) => *uc as *mut libc::ucontext_t as *mut c_void,
            Context::Trap { pc, sp } => fake.at(*pc, *sp, program),
        };
        // Set before the handler can be interrupted: a flush nested in it
        // (at a trap in its library calls, or the timer's, even before its
        // first instruction) must leave what it blocks for later, the
        // instances of its own signal behind it first of all.
        let inflight = st.inflight.replace(st.inflight.get() | handler_mask(e.sig, &e.action));
        sigmask::set(m);
        compiler_fence(Ordering::SeqCst);
        st.busy.set(false);
        run_program_handler(e.sig, &e.action, &mut info, ucp);
        st.busy.set(true);
        compiler_fence(Ordering::SeqCst);
        sigmask::hold();
        st.inflight.set(inflight);
    }
    if !nested {
        st.delivering.set(if live { outer_flush } else { (0, 0, 0) });
        st.inflight.set(if live { outer_inflight } else { 0 });
    }
    if st.len.get() > 0 {
        backstop(st, false); // some wait for a mask to change
    }
    // Overflowed signals whose held instances all ran: their later ones
    // may come now, from the kernel's queue.
    let left = ring(st).fold(0, |b, h| b | sigmask::bit(h.sig));
    st.blocked.set(st.blocked.get() & left);
    let after = program | st.blocked.get();
    match ctx {
        Context::Trap { .. } => sigmask::set(after),
        Context::Signal(uc) => {
            // SAFETY: the first word of the kernel's mask in the ucontext.
            unsafe { *(&mut uc.uc_sigmask as *mut libc::sigset_t as *mut u64) = after };
            sigmask::set(outer);
        }
    }
    compiler_fence(Ordering::SeqCst);
    st.busy.set(was_busy);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Takes the oldest held signal not in `mask` out of the ring.
fn take(st: &State, mask: u64) -> Option<Held> {
    let (head, len) = (st.head.get(), st.len.get());
    let k = (0..len).find(|&k| mask & sigmask::bit(st.ring[(head + k) % RING].get().sig) == 0)?;
    let e = st.ring[(head + k) % RING].get();
    // Close the gap: the older ones move up by one.
    for j in (0..k).rev() {
        st.ring[(head + j + 1) % RING].set(st.ring[(head + j) % RING].get());
    }
    st.head.set((head + 1) % RING);
    st.len.set(len - 1);
    Some(e)
}

/// The context a handler run at a return trap is given: the return's
/// program counter and stack pointer, and the mask there. Editing it
/// changes nothing (there is no `rt_sigreturn` to read it back).
struct Fake {
    uc: libc::ucontext_t,
    fp: libc::_libc_fpstate,
}

impl Fake {
    fn new() -> Fake {
        // SAFETY: all-zero values are valid for these plain C structs.
        unsafe { std::mem::zeroed() }
    }

    fn at(&mut self, pc: usize, sp: usize, mask: u64) -> *mut c_void {
        self.fp.cwd = 0x37f;
        self.fp.mxcsr = 0x1f80;
        self.uc.uc_mcontext.fpregs = &mut self.fp;
        self.uc.uc_mcontext.gregs[crate::base::arch::REG_PC] = pc as i64;
        self.uc.uc_mcontext.gregs[crate::base::arch::REG_SP] = sp as i64;
        // SAFETY: the first word of glibc's sigset_t is the kernel's mask.
        unsafe { *(&mut self.uc.uc_sigmask as *mut libc::sigset_t as *mut u64) = mask };
        &mut self.uc as *mut libc::ucontext_t as *mut c_void
    }
}

/// In a forked child: the held signals were sent to the parent. (A trap
/// stays set until it fires: its stub is the return address.)
extern "C" fn forget_in_child() {
    if let Some(st) = state() {
        let blocked = st.blocked.replace(0);
        st.len.set(0);
        st.retries.set(0);
        st.delivering.set((0, 0, 0));
        st.inflight.set(0);
        // SAFETY: a raw rt_sigprocmask unblocking what we blocked.
        unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_UNBLOCK, &blocked as *const u64, std::ptr::null_mut::<u64>(), 8usize) };
    }
}
