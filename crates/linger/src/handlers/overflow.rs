//! Stack overflow inside a preemptible function: a clear message and an
//! error for the caller instead of silent corruption or a bare SIGSEGV.
//!
//! The SIGSEGV handler runs on an alternate signal stack (the overflowed stack
//! has no room). If the fault address is in the guarded range below the
//! running function's stack, it prints one line to stderr and uses
//! corosensei's trap support to reset the coroutine so it returns
//! `Outcome::Overflowed` to the caller, which reports `Error::StackOverflow`.
//! The function's destructors do not run. Every other fault goes to the
//! previous handler (Rust's own stack overflow reporter, or the default
//! action).
//!
//! **Overflows inside library code** are different: abandoning `printf`
//! there would leave its `FILE` lock held, `malloc` an arena lock, `println!`
//! the stdout lock, and other threads would hang on them for good. So when
//! the fault lands in the stack's emergency reserve (see `stack.rs`) and the
//! call chain has deferred code on it, the reserve is opened, a return trap
//! is set on the outermost deferred call (as for a deferred deadline, see
//! `return_trap.rs`), and the faulting instruction runs again: the library
//! call finishes on the reserve and releases what it holds, and the trap
//! stops the function the moment the call returns to its own code. The
//! caller then gets the overflow (`Suspend::Overflowed`, handled in
//! `runtime.rs`). A second overflow, past the reserve, is abandoned at once.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use crate::state::stats::bump;
use crate::machine::switch::Outcome;
use crate::state::thread::{ts, Frame};
use crate::judgement::unwind::Chain;
use crate::Error;

static OLD_ACTION: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static OLD_FLAGS: AtomicI32 = AtomicI32::new(0);
/// Has [`install`] succeeded once?
static INSTALLED: AtomicBool = AtomicBool::new(false);
const ALT_SIZE: usize = 64 * 1024;

/// Our handler's address and the disposition it replaced: `sigaction`
/// queries report the latter, so the program sees the SIGSEGV disposition
/// it would have without linger.
pub(crate) fn replaced_disposition(handler: usize) -> Option<(usize, i32)> {
    (handler == on_segv as *const () as usize)
        .then(|| (OLD_ACTION.load(Ordering::Relaxed), OLD_FLAGS.load(Ordering::Relaxed)))
}

/// Installs the SIGSEGV handler (process-wide, once).
pub(crate) fn install(preempt_signal: i32) -> Result<(), Error> {
    // Through libc's own sigaction: ours would wrap the handler as the
    // program's.
    let Some(sigaction) = crate::machine::signal::real_sigaction() else {
        return Err(Error::Signal(std::io::Error::from_raw_os_error(libc::ENOSYS)));
    };
    // SAFETY: querying/installing a sigaction with valid pointers; on_segv is
    // async-signal-safe (write(2), reads of thread-local cells).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if sigaction(libc::SIGSEGV, std::ptr::null(), &mut old) != 0 {
            return Err(Error::Signal(std::io::Error::last_os_error()));
        }
        if old.sa_sigaction == on_segv as *const () as usize {
            return Ok(());
        }
        OLD_ACTION.store(old.sa_sigaction, Ordering::Relaxed);
        OLD_FLAGS.store(old.sa_flags, Ordering::Relaxed);
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_segv as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaddset(&mut sa.sa_mask, preempt_signal);
        if sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()) != 0 {
            return Err(Error::Signal(std::io::Error::last_os_error()));
        }
    }
    INSTALLED.store(true, Ordering::Release);
    Ok(())
}

/// Installs the SIGSEGV handler unless it was installed before: for
/// isolation, which may start before the runtime does and must have the
/// handler in place before gotcha hands out a trapped variable's fake
/// address. A program's own SIGSEGV handler installed since is left in
/// place (its trampoline redirects trapped accesses too).
pub(crate) fn ensure_installed(preempt_signal: i32) -> Result<(), Error> {
    if INSTALLED.load(Ordering::Acquire) {
        return Ok(());
    }
    install(preempt_signal)
}

struct AltStack(Cell<usize>);

impl Drop for AltStack {
    fn drop(&mut self) {
        let p = self.0.get();
        if p != 0 {
            // SAFETY: disable the alternate stack before unmapping our mapping.
            unsafe {
                let ss = libc::stack_t { ss_sp: std::ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
                libc::sigaltstack(&ss, std::ptr::null_mut());
                libc::munmap(p as *mut libc::c_void, ALT_SIZE);
            }
        }
    }
}

thread_local! {
    static ALT: AltStack = const { AltStack(Cell::new(0)) };
}

/// Gives this thread an alternate signal stack if it has none (Rust threads
/// already have one; threads made by C code usually do not).
pub(crate) fn ensure_altstack() {
    // SAFETY: query into a local; mapping and installing our own memory.
    unsafe {
        let mut cur: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut cur) != 0 || cur.ss_flags & libc::SS_DISABLE == 0 {
            return;
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            ALT_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return;
        }
        let ss = libc::stack_t { ss_sp: p, ss_flags: 0, ss_size: ALT_SIZE };
        if libc::sigaltstack(&ss, std::ptr::null_mut()) != 0 {
            libc::munmap(p, ALT_SIZE);
            return;
        }
        ALT.with(|a| a.0.set(p as usize));
    }
}

/// Stack the call-chain walk gets in the reserve (it may not fit on the
/// alternate signal stack: Rust gives its threads `SIGSTKSZ`, 8 KiB, and
/// the kernel's signal frame alone takes 3.5 KiB or more).
const WALK_STACK: usize = 24 * 1024;

/// The lowest part of an opened reserve, lent to the walk as a stack.
struct Lent {
    base: usize,
    limit: usize,
}

// SAFETY: `[limit, base)` is mapped, writable memory that nothing else uses
// while the walk runs on it (below every live frame of the function, which
// is stopped in the SIGSEGV handler); both ends are 16-byte aligned.
unsafe impl corosensei::stack::Stack for Lent {
    fn base(&self) -> corosensei::stack::StackPointer {
        std::num::NonZeroUsize::new(self.base).expect("not at address 0")
    }
    fn limit(&self) -> corosensei::stack::StackPointer {
        std::num::NonZeroUsize::new(self.limit).expect("not at address 0")
    }
}

/// What faulted in the reserve.
enum Fault {
    /// The entry of the preemption handler.
    OurHandler,
    /// The function's code, with this call chain.
    Chain(Chain),
}

/// An overflow of the running function `f` at `addr` (registers in `uc`):
/// if it faulted in the reserve with library code on its call chain, opens
/// the reserve and sets the return trap that ends the function when that
/// code returns (see the module's doc). True if so: the faulting
/// instruction may run again.
fn finish_on_reserve(f: &Frame, addr: usize, uc: &libc::ucontext_t) -> bool {
    let (lo, hi) = f.reserve;
    let entry = f.entry_sp.get();
    let sp = uc.uc_mcontext.gregs[crate::base::arch::REG_SP] as usize;
    if f.reserve_open.get() || f.overflow_due.get() || addr < lo || addr >= hi || entry == 0 || sp < lo || sp >= entry {
        return false;
    }
    // The walk's stack: the bottom of the reserve, below the faulting
    // frame (and its red zone).
    let top = (sp.min(addr).saturating_sub(256)) & !15;
    if top < lo + WALK_STACK {
        return false;
    }
    if !crate::machine::stack::open_reserve(lo, hi) {
        return false;
    }
    f.reserve_open.set(true);
    let pc = uc.uc_mcontext.gregs[crate::base::arch::REG_PC] as usize;
    let walk = || {
        // A reading section (see `ranges.rs`): a `dlclose` on another
        // thread waits for it before unmapping what the walk reads. Opened
        // and closed on the lent stack, with all the walk's state (under
        // valgrind, which does not follow this switch, nothing the section
        // leaves behind passes through the alternate stack).
        let table = crate::judgement::ranges::read()?;
        if crate::judgement::unwind::function_start(&table, pc) == Some(crate::handlers::preempt::handler_entry()) {
            return Some(Fault::OurHandler);
        }
        let first_deferred = table.must_defer(pc);
        crate::judgement::unwind::walk_at_fault(&table, uc, lo, f.stack_hi, entry, first_deferred).map(Fault::Chain)
    };
    let chain = match corosensei::on_stack(Lent { base: top, limit: lo }, walk) {
        // The preemption handler, entered with the stack at its very end,
        // faulted in its first instructions, before `handler_out_of_stack`
        // could know it: it runs on the reserve, and decides as usual (a
        // deadline near the end of the stack is never fatal).
        Some(Fault::OurHandler) => return true,
        Some(Fault::Chain(c)) => Some(c),
        None => None,
    };
    let trapped = match chain {
        Some(Chain::Deferred { trapped: true, .. }) => true,
        // SAFETY: the slot was found on `f`'s live call chain just now, and
        // `f` is stopped in this handler, which holds the preemption signal.
        Some(Chain::Deferred { patch: Some((slot, code)), .. }) => unsafe {
            crate::handlers::preempt::set_return_trap(f, slot, code)
        },
        Some(Chain::Deferred { patch: None, .. }) => false,
        // Its own code overflowed (or nothing says otherwise): abandoned now.
        _ => return false,
    };
    f.overflow_due.set(true);
    if !trapped {
        // Library code, but no trap could be set from here (the walk lost
        // the chain at the faulting instruction, or the call reads its own
        // return address): the deadline is due now, and the preemption
        // handler's deferred-deadline path stops the function once it is
        // back in its own code, as for any deadline that lands in libc.
        let t = ts();
        f.deadline.set(crate::state::thread::now_ns());
        crate::handlers::preempt::retry_soon(t);
    }
    bump(&ts().stats.library_overflows);
    true
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    if crate::handlers::preempt::handler_out_of_stack(info, uc) || crate::handlers::preempt::lost_timer_signal(info, uc) {
        return;
    }
    // An access through a trapped variable's fake address (isolation):
    // pointed at the current libset's copy, the instruction runs again.
    // SAFETY: the kernel's siginfo/ucontext for this SA_SIGINFO handler.
    if unsafe { gotcha::trap_redirect(info, uc) } {
        return;
    }
    // SAFETY: the kernel passes valid siginfo/ucontext to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let frame = ts().current.get();
    if !frame.is_null() {
        // SAFETY: `current` is a live frame while set.
        let f = unsafe { &*frame };
        // A frame larger than a page may skip over the guard page: accept
        // faults up to 64 KiB below it (Rust and hardened C probe every page).
        let in_guard = addr < f.guard.1 && addr + 64 * 1024 >= f.guard.0;
        // When a signal arrives with too little stack left for its frame,
        // the kernel cannot deliver it and sends a SIGSEGV of its own
        // (SI_KERNEL, no address) instead. Our timer's is retried above; a
        // program signal's is lost, and the stack counts as exhausted.
        // SAFETY: valid siginfo/ucontext from the kernel.
        let (code, sp) = unsafe {
            ((*info).si_code, (*(uc as *mut libc::ucontext_t)).uc_mcontext.gregs[crate::base::arch::REG_SP] as usize)
        };
        let frame_did_not_fit = code == libc::SI_KERNEL && sp >= f.guard.0 && sp < f.stack_lo + 32 * 1024;
        // SAFETY: valid ucontext from the kernel.
        if in_guard && finish_on_reserve(f, addr, unsafe { &*(uc as *const libc::ucontext_t) }) {
            return;
        }
        if in_guard || frame_did_not_fit {
            if let Some(trap) = f.trap.take() {
                // Nothing is printed: the launch or resume returns
                // `Error::StackOverflow` (C: `EFAULT`), which says what to
                // do, and `stats().stack_overflows` counts it.
                // The timer may have fired without its handler running (the
                // SI_KERNEL case) or while the handler was arming it: forget
                // what we believed was armed, so the next launch re-arms.
                let t = ts();
                t.armed.set(crate::state::thread::NEVER);
                t.pending.set(false);
                // A reading section of the code table opened on the
                // abandoned stack (the walks keep clear of its end, but
                // should one not) ends with it: `dlclose` waits for it.
                crate::judgement::ranges::abandon_reading();
                // SAFETY: the fault happened on this coroutine's stack (the
                // guard check above), and we update the interrupted context
                // with exactly the registers corosensei asks for.
                unsafe {
                    let regs = trap.setup_trap_handler(|| Outcome::Overflowed);
                    let g = &mut (*(uc as *mut libc::ucontext_t)).uc_mcontext.gregs;
                    g[crate::base::arch::REG_PC] = regs.rip as i64;
                    g[crate::base::arch::REG_SP] = regs.rsp as i64;
                    g[crate::base::arch::REG_FP] = regs.rbp as i64;
                    g[crate::base::arch::REG_ARG1] = regs.rdi as i64;
                    g[crate::base::arch::REG_ARG2] = regs.rsi as i64;
                }
                return;
            }
        }
    }
    chain(sig, info, uc);
}

fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    let old = OLD_ACTION.load(Ordering::Relaxed);
    // SAFETY: the kernel passes a valid siginfo.
    let sent = unsafe { (*info).si_code } <= 0; // kill, raise, sigqueue: no fault to re-execute
    if old == libc::SIG_IGN && sent {
        return;
    }
    if old == libc::SIG_DFL || old == libc::SIG_IGN {
        // Restore the default action; returning re-executes the faulting
        // instruction, which then terminates the process as usual. A signal
        // that was sent rather than caused is sent again (it stays pending
        // until this handler returns).
        crate::base::glibc::die_by(libc::SIGSEGV, sent);
        return;
    }
    // SAFETY: `old` was installed by someone as a handler of this signal, with
    // the calling convention its flags say.
    unsafe {
        if OLD_FLAGS.load(Ordering::Relaxed) & libc::SA_SIGINFO != 0 {
            let h: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(old);
            h(sig, info, uc);
        } else {
            let h: extern "C" fn(libc::c_int) = std::mem::transmute(old);
            h(sig);
        }
    }
}
