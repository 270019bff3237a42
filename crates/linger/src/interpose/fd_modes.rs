//! What the program set on each descriptor that a parked call must honour
//! (`O_NONBLOCK`, `SO_RCVTIMEO`, `SO_SNDTIMEO`), kept from the calls that
//! set them, so that a call that would block does not ask the kernel again
//! (`fcntl(F_GETFL)` and `getsockopt` at every park: two of the six system
//! calls a request cost a green-thread server, issue 28).
//!
//! **Known only where nothing else can change it.** An entry is *known*
//! only for a descriptor this process made through one of our wrappers
//! (`socket`, `socketpair`, `accept`, `accept4`, `pipe`, `pipe2`, `open`,
//! `openat`), so that its file description has no other descriptor: the
//! flag and the options are the description's (the socket's), shared by
//! every descriptor of it, in this process or another. From then on our
//! wrappers of `fcntl(F_SETFL)`, `ioctl(FIONBIO)` and `setsockopt` keep it
//! up to date. The entry is forgotten (and the kernel asked at each park,
//! as before) once the description may have another descriptor:
//!
//! - `dup`, `dup2`, `dup3`, `fcntl(F_DUPFD*)`: both numbers;
//! - a descriptor sent to another process (`SCM_RIGHTS` in `sendmsg`,
//!   `sendmmsg`): the numbers sent;
//! - any new process (`fork` through libc, `posix_spawn`, `system`,
//!   `popen`): every entry, at once (an epoch).
//!
//! `close`, `close_range`, `fclose` and a `dup2` onto a number forget it.
//! A descriptor that came otherwise (inherited, received, made by a call
//! we do not wrap: `epoll_create`, `eventfd`, libc's own opens) is unknown.
//!
//! **What is not seen** (`docs/safety.md`, "What a park knows of a
//! descriptor"): a raw system call (`syscall(SYS_fcntl, ...)`, a close
//! made without libc), a process that got the descriptor through a path
//! above we do not wrap (`clone` made by hand), or a call made through a
//! second copy of libc. Then a program's change of its own descriptor's
//! mode is missed: a park where the call should have failed with
//! `EAGAIN`, or the reverse.
//!
//! **Signal safety.** Lookups and updates are atomics on chunks that are
//! never freed; only making a chunk allocates, which is skipped inside the
//! program's signal handlers (the descriptor then stays unknown).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Once;

use libc::c_int;

/// One descriptor number's entry.
struct Entry {
    /// `epoch << 32 | flags` (see the constants); 0: unknown.
    word: AtomicU64,
    /// `SO_RCVTIMEO` in ns (meaningful with `RCV`).
    rcv: AtomicU64,
    /// `SO_SNDTIMEO` in ns (meaningful with `SND`).
    snd: AtomicU64,
}

/// The entry describes the descriptor now (with the current epoch).
const KNOWN: u64 = 1;
/// `O_NONBLOCK` is set.
const NONBLOCK: u64 = 2;
/// A receive timeout is set (`rcv`).
const RCV: u64 = 4;
/// A send timeout is set (`snd`).
const SND: u64 = 8;

/// Numbers per chunk, and chunks: numbers up to 2^20 (`RLIMIT_NOFILE`'s
/// usual hard limit); larger ones are always unknown.
const CHUNK: usize = 4096;
const CHUNKS: usize = 256;

static TABLE: [AtomicPtr<Entry>; CHUNKS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];

/// Bumped when a new process may share every description: entries of an
/// older epoch are unknown. Starts at 1 so that a zero word is unknown.
static EPOCH: AtomicU32 = AtomicU32::new(1);

fn epoch() -> u64 {
    u64::from(EPOCH.load(Ordering::Acquire)) << 32
}

/// The entry of `fd` if its chunk exists (never allocates).
fn find(fd: c_int) -> Option<&'static Entry> {
    let fd = usize::try_from(fd).ok().filter(|&fd| fd < CHUNK * CHUNKS)?;
    let p = TABLE[fd / CHUNK].load(Ordering::Acquire);
    // SAFETY: a published chunk holds CHUNK entries and is never freed.
    (!p.is_null()).then(|| unsafe { &*p.add(fd % CHUNK) })
}

/// The entry of `fd`, its chunk made if need be. Not in one of the
/// program's signal handlers (which may have interrupted `malloc`): there a
/// descriptor made in a new chunk stays unknown. In a `critical` scope: a
/// function stopped inside the `Once` below would block the next caller on
/// its thread.
fn make(fd: c_int) -> Option<&'static Entry> {
    if let Some(e) = find(fd) {
        return Some(e);
    }
    let i = usize::try_from(fd).ok().filter(|&fd| fd < CHUNK * CHUNKS)? / CHUNK;
    if crate::handlers::program_signals::in_program_handler() {
        return None;
    }
    crate::critical(|| make_chunk(i));
    find(fd)
}

/// Makes chunk `i` (and, the first time, registers the fork handler).
fn make_chunk(i: usize) {
    static FORK: Once = Once::new();
    FORK.call_once(|| {
        // SAFETY: a plain handler with no arguments, for both sides.
        unsafe { libc::pthread_atfork(None, Some(new_process), Some(new_process)) };
    });
    let new: Box<[Entry]> = (0..CHUNK).map(|_| Entry { word: AtomicU64::new(0), rcv: AtomicU64::new(0), snd: AtomicU64::new(0) }).collect();
    let new = Box::into_raw(new) as *mut Entry;
    if let Err(_other) = TABLE[i].compare_exchange(std::ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: `new` came from `Box::into_raw` above and was published
        // nowhere.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(new, CHUNK)) });
    }
}

/// Every entry becomes unknown: a new process may share every description.
pub(crate) extern "C" fn new_process() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// `fd` was just made by this process, alone on its description: known,
/// with `nonblock` and no socket timeout (a new socket has none).
pub(crate) fn made(fd: c_int, nonblock: bool) {
    made_with(fd, nonblock, None);
}

/// As [`made`], with the socket timeouts (receive, send) in ns (0: none)
/// when they are known: an accepted socket inherits its listener's.
fn made_with(fd: c_int, nonblock: bool, timeouts: Option<(u64, u64)>) {
    // Making a chunk allocates, which may set errno: the program's stays.
    let errno = crate::base::sys::errno();
    let entry = make(fd);
    crate::base::sys::set_errno(errno);
    let Some(e) = entry else { return };
    let (rcv, snd) = timeouts.unwrap_or((0, 0));
    e.rcv.store(rcv, Ordering::Relaxed);
    e.snd.store(snd, Ordering::Relaxed);
    let mut w = epoch() | KNOWN;
    if nonblock {
        w |= NONBLOCK;
    }
    if rcv != 0 {
        w |= RCV;
    }
    if snd != 0 {
        w |= SND;
    }
    e.word.store(w, Ordering::Release);
}

/// `fd` was accepted from `listener`: known if the listener's timeouts are
/// (Linux copies them to the new socket; not `O_NONBLOCK`, which is the
/// new file's own, from `accept4`'s flags).
pub(crate) fn accepted(fd: c_int, listener: c_int, nonblock: bool) {
    match find(listener).and_then(read) {
        Some(m) => made_with(fd, nonblock, Some((m.rcv, m.snd))),
        None => forget(fd, fd),
    }
}

/// `first..=last` no longer name what they named, or may share their
/// description: unknown from now on.
pub(crate) fn forget(first: c_int, last: c_int) {
    if first < 0 || last < first {
        return;
    }
    let last = last.min((CHUNK * CHUNKS - 1) as c_int);
    let mut fd = first;
    while fd <= last {
        let c = fd as usize / CHUNK;
        let end = (((c + 1) * CHUNK - 1) as c_int).min(last);
        if TABLE[c].load(Ordering::Acquire).is_null() {
            fd = end + 1;
            continue;
        }
        for i in fd..=end {
            if let Some(e) = find(i) {
                if e.word.load(Ordering::Relaxed) != 0 {
                    e.word.store(0, Ordering::Release);
                }
            }
        }
        fd = end + 1;
    }
}

/// The program set (or cleared) `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblock(fd: c_int, on: bool) {
    update(fd, |w| if on { w | NONBLOCK } else { w & !NONBLOCK });
}

/// The program set a socket timeout on `fd` (`input`: `SO_RCVTIMEO`) of
/// `ns` (0: none).
pub(crate) fn set_timeout(fd: c_int, input: bool, ns: u64) {
    let Some(e) = find(fd) else { return };
    let bit = if input { RCV } else { SND };
    // The value first: a reader that sees the bit reads this value or a
    // newer one (a concurrent setsockopt on the same socket: either order
    // is one the kernel could have made).
    if ns != 0 {
        (if input { &e.rcv } else { &e.snd }).store(ns, Ordering::Relaxed);
    }
    update(fd, |w| if ns != 0 { w | bit } else { w & !bit });
}

/// Applies `f` to a known entry of this epoch; others stay unknown.
fn update(fd: c_int, f: impl Fn(u64) -> u64) {
    let Some(e) = find(fd) else { return };
    let now = epoch();
    let _ = e.word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
        (w & KNOWN != 0 && w & !0xffff_ffff == now).then(|| f(w))
    });
}

/// What a known entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Modes {
    pub(crate) nonblock: bool,
    /// `SO_RCVTIMEO` in ns, 0: none.
    pub(crate) rcv: u64,
    /// `SO_SNDTIMEO` in ns, 0: none.
    pub(crate) snd: u64,
}

fn read(e: &Entry) -> Option<Modes> {
    let w = e.word.load(Ordering::Acquire);
    if w & KNOWN == 0 || w & !0xffff_ffff != epoch() {
        return None;
    }
    Some(Modes {
        nonblock: w & NONBLOCK != 0,
        rcv: if w & RCV != 0 { e.rcv.load(Ordering::Relaxed) } else { 0 },
        snd: if w & SND != 0 { e.snd.load(Ordering::Relaxed) } else { 0 },
    })
}

/// `fd`'s modes if known and the table is on (None: ask the kernel).
pub(crate) fn get(fd: c_int) -> Option<Modes> {
    if !enabled() {
        return None;
    }
    read(find(fd)?)
}

/// Off with `LINGER_FD_MODES=0` (read once, without allocating): every
/// park asks the kernel, as before (for comparison, and a way out for a
/// program that changes its descriptors behind libc's back).
fn enabled() -> bool {
    // 0: not read yet, 1: on, 2: off.
    static STATE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // A bad value keeps the table (and fails the first launch:
            // `Config::from_env`).
            let on = crate::base::glibc::env_bytes(b"LINGER_FD_MODES").and_then(crate::base::parse::flag_value).unwrap_or(true);
            STATE.store(if on { 1 } else { 2 }, Ordering::Relaxed);
            on
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_until_shared_or_closed() {
        let fd = 900_001;
        made(fd, false);
        assert_eq!(get(fd), Some(Modes { nonblock: false, rcv: 0, snd: 0 }));
        set_nonblock(fd, true);
        set_timeout(fd, true, 5_000_000);
        assert_eq!(get(fd), Some(Modes { nonblock: true, rcv: 5_000_000, snd: 0 }));
        set_timeout(fd, true, 0);
        assert_eq!(get(fd).map(|m| m.rcv), Some(0));
        forget(fd, fd);
        assert_eq!(get(fd), None);
        // Unknown stays unknown: updates do not make it known.
        set_nonblock(fd, false);
        assert_eq!(get(fd), None);
        made(fd, true);
        new_process();
        assert_eq!(get(fd), None);
        // Past the table: always unknown.
        made(1 << 21, false);
        assert_eq!(get(1 << 21), None);
    }
}
