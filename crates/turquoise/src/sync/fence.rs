//! Asymmetric fences: a free side and an expensive side.
//!
//! Two threads that each store to one location and then load the other
//! (Dekker's pattern) need a full barrier between the store and the load on
//! both sides, or both may load the old values (on x86 the store waits in
//! the store buffer while the load goes ahead). When one side runs often
//! and the other seldom, [`light`] on the frequent side costs only a
//! compiler fence, and [`heavy`] on the rare side forces a full barrier on
//! every thread of the process that is running at that moment: any store
//! another thread made before its last [`light`] is visible to the caller
//! of [`heavy`] when it returns, and the caller's own earlier stores are
//! visible to the code that follows that [`light`].
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
//! use turquoise::sync::fence;
//!
//! static WRITING: AtomicBool = AtomicBool::new(false);
//! static STOP: AtomicBool = AtomicBool::new(false);
//! // frequent side
//! WRITING.store(true, Relaxed);
//! fence::light();
//! let stopped = STOP.load(Relaxed);
//! // rare side (another thread, usually)
//! STOP.store(true, Relaxed);
//! fence::heavy();
//! let writing = WRITING.load(Relaxed);
//! assert!(stopped || writing); // never both false
//! ```
//!
//! How [`heavy`] forces the barriers ([`mechanism`] says which applies):
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (an IPI to each CPU that
//! runs a thread of this process, about 0.5 to 10 us here), else
//! `MEMBARRIER_CMD_GLOBAL` (waits for every CPU to pass a quiescent state:
//! milliseconds), else, on x86-64 only, changing the protection of a page
//! of our own (see [`Mechanism::Mprotect`]). A call that fails falls back
//! to the next mechanism; none aborts.

use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How [`heavy`] forces a barrier on the other threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, registered once for
    /// the process: an interrupt on each CPU running one of our threads.
    MembarrierExpedited,
    /// `membarrier(MEMBARRIER_CMD_GLOBAL)`: returns once every CPU has gone
    /// through the scheduler or user space entry (slow: milliseconds).
    MembarrierGlobal,
    /// `mprotect` of a private, touched page of ours from read-write to
    /// read-only: the kernel must shoot the page's translation down on
    /// every CPU that may cache it, that is every CPU running a thread of
    /// this process, and on x86 it does so with an interrupt (IPI) to each
    /// and waits for each to acknowledge. Taking an interrupt drains the
    /// CPU's store buffer (interrupt delivery and `iret` are serialising),
    /// so when `mprotect` returns, the stores each of those threads made
    /// before the instruction it was interrupted at are visible. Threads
    /// not running were switched out, which is a full barrier too. Only
    /// on x86-64: arm64, for one, invalidates TLBs by broadcast (`tlbi`),
    /// without interrupting the other CPUs, so there it is no barrier.
    Mprotect,
    /// No way to interrupt the others (a target other than x86-64 without
    /// membarrier): [`light`] then issues a full fence itself and
    /// [`heavy`] is a full fence.
    Symmetric,
}

const UNKNOWN: u8 = 0;
const SYMMETRIC: u8 = 4;

impl Mechanism {
    fn code(self) -> u8 {
        match self {
            Mechanism::MembarrierExpedited => 1,
            Mechanism::MembarrierGlobal => 2,
            Mechanism::Mprotect => 3,
            Mechanism::Symmetric => SYMMETRIC,
        }
    }

    fn from_code(c: u8) -> Option<Mechanism> {
        Some(match c {
            1 => Mechanism::MembarrierExpedited,
            2 => Mechanism::MembarrierGlobal,
            3 => Mechanism::Mprotect,
            SYMMETRIC => Mechanism::Symmetric,
            _ => return None,
        })
    }

    /// The one to try when this one fails.
    fn next(self) -> Mechanism {
        match self {
            Mechanism::MembarrierExpedited => Mechanism::MembarrierGlobal,
            Mechanism::MembarrierGlobal if cfg!(target_arch = "x86_64") => Mechanism::Mprotect,
            _ => Mechanism::Symmetric,
        }
    }
}

/// The mechanism in use (chosen at the first call of this, [`heavy`] or
/// [`light`]; a failure of it later moves on to the next).
static CURRENT: AtomicU8 = AtomicU8::new(UNKNOWN);

// The commands of membarrier(2) (linux/membarrier.h).
const CMD_QUERY: libc::c_int = 0;
const CMD_GLOBAL: libc::c_int = 1;
const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes two integer arguments (cmd, flags) and
    // touches no memory of ours; an unknown command is refused by errno.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint) }
}

/// Finds the best mechanism the kernel offers (registering the process for
/// expedited barriers, once).
fn choose() -> Mechanism {
    let supported = membarrier(CMD_QUERY);
    if supported > 0 {
        if supported & CMD_PRIVATE_EXPEDITED as libc::c_long != 0 && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 {
            return Mechanism::MembarrierExpedited;
        }
        if supported & CMD_GLOBAL as libc::c_long != 0 {
            return Mechanism::MembarrierGlobal;
        }
    }
    Mechanism::MembarrierGlobal.next()
}

/// The mechanism [`heavy`] uses.
pub fn mechanism() -> Mechanism {
    if let Some(m) = Mechanism::from_code(CURRENT.load(Ordering::Acquire)) {
        return m;
    }
    let m = choose();
    // Two first callers may race: both chose the same.
    let _ = CURRENT.compare_exchange(UNKNOWN, m.code(), Ordering::AcqRel, Ordering::Acquire);
    Mechanism::from_code(CURRENT.load(Ordering::Acquire)).unwrap_or(m)
}

/// For tests: makes [`heavy`] use `m` from now on (expedited membarrier is
/// registered first if asked for). Returns the mechanism actually set: the
/// first one at or after `m` that works here.
#[doc(hidden)]
pub fn use_mechanism(m: Mechanism) -> Mechanism {
    let supported = membarrier(CMD_QUERY).max(0);
    let mut m = m;
    loop {
        let ok = match m {
            Mechanism::MembarrierExpedited => {
                supported & CMD_PRIVATE_EXPEDITED as libc::c_long != 0 && membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
            }
            Mechanism::MembarrierGlobal => supported & CMD_GLOBAL as libc::c_long != 0,
            Mechanism::Mprotect => cfg!(target_arch = "x86_64") && mprotect_usable(),
            Mechanism::Symmetric => true,
        };
        if ok {
            CURRENT.store(m.code(), Ordering::Release);
            return m;
        }
        m = m.next();
    }
}

/// The cheap side: a compiler fence (the compiler keeps the order of the
/// caller's memory accesses around it; the CPU's reordering is dealt with
/// by [`heavy`]). Where no mechanism can interrupt the other threads
/// ([`Mechanism::Symmetric`]) it is a full fence; the first `light` or
/// `heavy` of the process finds out which applies, so no `light` relies on
/// a mechanism that was never there.
#[inline]
pub fn light() {
    compiler_fence(Ordering::SeqCst);
    match CURRENT.load(Ordering::Relaxed) {
        SYMMETRIC => fence(Ordering::SeqCst),
        UNKNOWN => {
            if mechanism() == Mechanism::Symmetric {
                fence(Ordering::SeqCst);
            }
        }
        _ => {}
    }
}

/// The expensive side: a full barrier on the caller and on every thread of
/// the process that is running, as if each had executed `fence(SeqCst)` at
/// the instruction it was at. A mechanism that fails moves on to the next
/// one that interrupts the others, never to [`Mechanism::Symmetric`] once
/// the process has found another: `light()`s made meanwhile issued no fence
/// of their own. If none works for the moment (the `mprotect` page could
/// not be mapped: out of memory), it tries again from the best, after a
/// pause, until one does.
pub fn heavy() {
    fence(Ordering::SeqCst);
    let first = mechanism();
    let mut m = first;
    let mut pause = Duration::from_micros(50);
    loop {
        let ok = match m {
            Mechanism::MembarrierExpedited => membarrier(CMD_PRIVATE_EXPEDITED) == 0,
            Mechanism::MembarrierGlobal => membarrier(CMD_GLOBAL) == 0,
            Mechanism::Mprotect => shoot_down(),
            Mechanism::Symmetric => true,
        };
        if ok {
            break;
        }
        m = m.next();
        if m == Mechanism::Symmetric && first != Mechanism::Symmetric {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
            m = Mechanism::MembarrierExpedited;
            continue;
        }
        CURRENT.store(m.code(), Ordering::Release);
    }
    fence(Ordering::SeqCst);
}

/// The page whose protection [`shoot_down`] flips, mapped once; under the
/// lock so that two callers do not interleave their `mprotect`s.
struct Page(usize);

static PAGE: Mutex<Option<Page>> = Mutex::new(None);

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Maps the page if need be (under the lock); `None` if it cannot be.
fn page(p: &mut Option<Page>) -> Option<usize> {
    if p.is_none() {
        // SAFETY: a fresh private anonymous mapping, at an address the
        // kernel chooses; nothing else refers to it.
        let a = unsafe { libc::mmap(std::ptr::null_mut(), page_size(), libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if a != libc::MAP_FAILED {
            *p = Some(Page(a as usize));
        }
    }
    p.as_ref().map(|p| p.0)
}

fn mprotect_usable() -> bool {
    linger::critical(|| page(&mut PAGE.lock().unwrap_or_else(|e| e.into_inner())).is_some())
}

/// The `mprotect` barrier: touches the page (so that its translation is
/// present and writable), then makes it read-only (the shootdown) and
/// read-write again. False if a call failed.
fn shoot_down() -> bool {
    linger::critical(|| {
        let mut p = PAGE.lock().unwrap_or_else(|e| e.into_inner());
        let Some(addr) = page(&mut p) else { return false };
        let (addr, size) = (addr as *mut libc::c_void, page_size());
        // SAFETY: `addr` is our own page, never unmapped; only this code,
        // under the lock, writes it or changes its protection, and it is
        // read-write whenever the lock is free (a page that could not be
        // made read-write again is forgotten, leaked).
        unsafe {
            std::ptr::write_volatile(addr as *mut u8, 1);
            let shot = libc::mprotect(addr, size, libc::PROT_READ) == 0;
            if libc::mprotect(addr, size, libc::PROT_READ | libc::PROT_WRITE) != 0 {
                *p = None;
                return false;
            }
            shot
        }
    })
}
