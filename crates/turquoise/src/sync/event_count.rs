//! Event counts: a version number that waiters sleep on until it changes,
//! with no lost wake-up and no system call on an increment nobody waits for.
//!
//! ```
//! use std::sync::Arc;
//! use turquoise::sync::EventCount;
//!
//! let ec = Arc::new(EventCount::new());
//! let seen = ec.value();
//! let e = ec.clone();
//! let t = std::thread::spawn(move || e.wait(seen)); // returns once it changed
//! ec.increment();
//! assert!(t.join().unwrap() > seen);
//! ```
//!
//! A waiter reads the version, looks at the data it guards, and waits with
//! the version it read: a change in between is never missed, since the
//! wait returns at once when the version is no longer the one given.
//!
//! The version lives in the low 31 bits of one 32-bit word, a "someone
//! sleeps" flag in its top (sign) bit (so versions count modulo 2^31). An
//! increment adds to the word and looks at the flag before and after:
//! both clear, that is all; else it clears the flag and wakes every waiter
//! (OS threads sleep on a futex on the word; green threads and async tasks
//! leave a `Waker` in a list). A version that wraps around carries into
//! the flag: that increment wakes nobody in particular and clears it. A
//! waiter sets the flag with a compare-and-swap on the version it waits
//! on, then sleeps only while the word still holds that version with the
//! flag.
//!
//! [`EventCount`] is for any number of producers (an atomic add). The
//! single producer of [`EventCount::single_producer`] increments with one
//! plain x86 instruction (`add` without `lock`, then a branch on the sign
//! and carry it left in the CPU flags); its waiters pay for that with an
//! asymmetric fence ([`super::fence::heavy`]) before they sleep.
//! `docs/safety.md`, "Event counts and asymmetric fences", gives the
//! argument.

use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::ec_word::{self, SLEEPERS, VERSION};
use crate::base::arch;
use super::fence;

/// How many times a waiter looks at the word before it sets the flag.
const SPINS: u32 = 64;

/// The waiting side of an event count (and its version): shared by
/// reference or `Arc`. An [`EventCount`] derefs to it; a single producer's
/// waiters hold it in an `Arc`.
pub struct Versions {
    /// [`SLEEPERS`] | version.
    word: AtomicU32,
    /// Incremented by a plain (not atomic) read-modify-write: waiters fence
    /// with [`fence::heavy`] before they sleep.
    plain: bool,
    /// The green threads' and async tasks' wakers, by key.
    wakers: Mutex<Vec<(u64, Waker)>>,
}

/// Keys of the entries in `wakers`, never reused.
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

impl Versions {
    const fn new(plain: bool, version: u32) -> Versions {
        Versions { word: AtomicU32::new(version & VERSION), plain, wakers: Mutex::new(Vec::new()) }
    }

    /// The current version (0 at first; modulo 2^31). Reading it acquires
    /// what the increment that made it released.
    #[inline]
    pub fn value(&self) -> u32 {
        self.word.load(Ordering::Acquire) & VERSION
    }

    /// Whether the word holds the "someone sleeps" flag (for tests: it is
    /// cleared by the increment after it was set, or by the one that set it
    /// when its version wrapped around).
    #[doc(hidden)]
    pub fn flagged(&self) -> bool {
        self.word.load(Ordering::Acquire) & SLEEPERS != 0
    }

    /// Waits until the version is not `old` and returns the new one: a green
    /// thread parks, an OS thread sleeps on a futex. Returns at once if it
    /// already differs.
    pub fn wait(&self, old: u32) -> u32 {
        if let Some(v) = self.spin(old) {
            return v;
        }
        if crate::thread::current().is_some() {
            return super::wait(self.address(), self.wait_async(old));
        }
        self.sleep(old, None).expect("no deadline")
    }

    /// [`Versions::wait`] for at most `timeout`: `None` if the version was
    /// still `old` then. A green thread parks on its worker's timer (when
    /// its runtime has one; else it sleeps as an OS thread would).
    pub fn wait_timeout(&self, old: u32, timeout: Duration) -> Option<u32> {
        if let Some(v) = self.spin(old) {
            return Some(v);
        }
        let deadline = Instant::now().checked_add(timeout);
        let timed_green = crate::thread::current().is_some() && crate::base::context::drivers().is_some_and(|d| d.time);
        if let (true, Some(d)) = (timed_green, deadline) {
            return super::wait_until(self.address(), d, self.wait_async(old));
        }
        self.sleep(old, deadline)
    }

    /// A future that is ready, with the new version, once the version is
    /// not `old` (for async tasks).
    pub fn wait_async(&self, old: u32) -> Wait<'_> {
        Wait { on: self, old, key: None }
    }

    /// The waiting side of a single-producer event count whose producer
    /// is C code that increments with [`Versions::add_single`].
    pub(crate) fn single_producer_raw() -> Versions {
        Versions::new(cfg!(target_arch = "x86_64"), 0)
    }

    /// [`Producer::add`] (on a single-producer event count's `Versions`).
    /// Meant for one caller at a time (the C API's contract): concurrent
    /// callers race as the plain add does with the waiters' flag, on the
    /// one word, which only ever changes as a whole, and may lose
    /// increments and the wake-ups they owed; nothing else is shared.
    #[inline]
    pub(crate) fn add_single(&self, n: u32) -> u32 {
        let n = n & VERSION;
        plain_add(self, n);
        // Only the producer changes the version bits (a waiter's
        // compare-and-swap writes back the version it compared, a wake
        // only clears the flag), and it reads its own last store: the
        // version it just made, less `n`, is the one it replaced. The
        // compiler keeps this load (atomic) but it costs next to nothing
        // (forwarded from the add's store).
        self.word.load(Ordering::Relaxed).wrapping_sub(n) & VERSION
    }

    fn address(&self) -> *const () {
        self as *const Versions as *const ()
    }

    /// Looks a few times for a change before the caller goes to sleep.
    fn spin(&self, old: u32) -> Option<u32> {
        for _ in 0..SPINS {
            let v = self.value();
            if v != old {
                return Some(v);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Gets ready to sleep on version `old` (`ec_word::arm`).
    fn arm(&self, old: u32) -> Option<u32> {
        ec_word::arm(&self.word, old, self.plain.then_some(fence::heavy as fn()))
    }

    /// The OS thread's wait: sleeps on the word until the version changes
    /// or the deadline passes (`None`).
    fn sleep(&self, old: u32, deadline: Option<Instant>) -> Option<u32> {
        loop {
            if let Some(v) = self.arm(old) {
                return Some(v);
            }
            let left = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return None,
                },
                None => None,
            };
            futex_wait(&self.word, old | SLEEPERS, left);
        }
    }

    /// After an increment that replaced a flagged word, or carried into
    /// the flag: clears the flag and wakes everyone (waiters that still
    /// want to sleep set it again).
    #[cold]
    #[inline(never)]
    fn wake_all(&self) {
        // Cleared before the wake: a waiter whose futex wait starts later
        // finds the word changed; one that set the flag since (on the new
        // version) finds it cleared and sets it again.
        ec_word::clear_flag(&self.word);
        futex_wake(&self.word);
        let wakers = linger::critical(|| std::mem::take(&mut *self.lock()));
        for (_, w) in wakers {
            w.wake();
        }
    }

    /// The waker list. Only ever locked inside `linger::critical`: a green
    /// thread is not stopped holding it.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Waker)>> {
        self.wakers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `waker` in the list under `key` (a new key if it has none or
    /// was taken out by a wake); returns the key.
    fn register(&self, key: Option<u64>, waker: &Waker) -> u64 {
        linger::critical(|| {
            let mut list = self.lock();
            if let Some(entry) = key.and_then(|k| list.iter_mut().find(|e| e.0 == k)) {
                if !entry.1.will_wake(waker) {
                    entry.1 = waker.clone();
                }
                return entry.0;
            }
            let k = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
            list.push((k, waker.clone()));
            k
        })
    }

    fn unregister(&self, key: u64) {
        linger::critical(|| self.lock().retain(|e| e.0 != key));
    }
}

/// The future of [`Versions::wait_async`].
pub struct Wait<'a> {
    on: &'a Versions,
    old: u32,
    key: Option<u64>,
}

impl Future for Wait<'_> {
    type Output = u32;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let v = self.on.value();
        if v != self.old {
            return Poll::Ready(v);
        }
        // In the list before the flag is set: an increment that sees the
        // flag clears it and then takes the list, this waker in it.
        let key = self.on.register(self.key, cx.waker());
        self.key = Some(key);
        match self.on.arm(self.old) {
            Some(v) => Poll::Ready(v),
            None => Poll::Pending,
        }
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            self.on.unregister(k);
        }
    }
}

/// An event count for any number of producers: share it by reference or
/// `Arc`. Waiting is [`Versions`]' (it derefs to it).
pub struct EventCount {
    versions: Versions,
}

impl Default for EventCount {
    fn default() -> EventCount {
        EventCount::new()
    }
}

impl AsRef<Versions> for Versions {
    fn as_ref(&self) -> &Versions {
        self
    }
}

impl AsRef<Versions> for EventCount {
    fn as_ref(&self) -> &Versions {
        self
    }
}

impl Deref for EventCount {
    type Target = Versions;

    fn deref(&self) -> &Versions {
        &self.versions
    }
}

impl EventCount {
    /// At version 0.
    pub const fn new() -> EventCount {
        EventCount::starting_at(0)
    }

    /// At `version` (modulo 2^31), for tests of the wrap-around.
    #[doc(hidden)]
    pub const fn starting_at(version: u32) -> EventCount {
        EventCount { versions: Versions::new(false, version) }
    }

    /// Adds one to the version and wakes whoever waits; returns the
    /// version it replaced. No waiter: one atomic add and a test.
    #[inline]
    pub fn increment(&self) -> u32 {
        self.add(1)
    }

    /// Adds `n` (modulo 2^31) to the version, as [`EventCount::increment`].
    #[inline]
    pub fn add(&self, n: u32) -> u32 {
        let n = n & VERSION;
        let (old, owes) = ec_word::add(&self.versions.word, n);
        if owes {
            self.versions.wake_all();
        }
        old & VERSION
    }

    /// An event count with one producer: the [`Producer`], which is the
    /// only handle that increments (owned, `Send`, neither `Clone` nor
    /// `Sync`), and the waiting side, to share.
    ///
    /// The producer cannot be copied nor used from two threads at once:
    ///
    /// ```compile_fail
    /// let (p, _) = turquoise::sync::EventCount::single_producer();
    /// let q = p.clone();
    /// ```
    ///
    /// ```compile_fail
    /// let (mut p, _) = turquoise::sync::EventCount::single_producer();
    /// let p = &p;
    /// std::thread::scope(|s| {
    ///     s.spawn(|| p.versions().value());
    /// });
    /// ```
    pub fn single_producer() -> (Producer, Arc<Versions>) {
        EventCount::single_producer_at(0)
    }

    /// [`EventCount::single_producer`] at `version` (modulo 2^31), for
    /// tests of the wrap-around.
    #[doc(hidden)]
    pub fn single_producer_at(version: u32) -> (Producer, Arc<Versions>) {
        let versions = Arc::new(Versions::new(cfg!(target_arch = "x86_64"), version));
        (Producer { versions: versions.clone(), _not_sync: PhantomData }, versions)
    }
}

/// The one incrementing handle of a single-producer event count (see
/// [`EventCount::single_producer`]).
pub struct Producer {
    versions: Arc<Versions>,
    /// `Send` but not `Sync`: one thread at a time increments.
    _not_sync: PhantomData<Cell<()>>,
}

impl Producer {
    /// Adds one to the version and wakes whoever waits; returns the
    /// version it replaced. No waiter: on x86-64 one `add` without `lock`
    /// prefix and two branches on the CPU flags it set (plus a load of the
    /// word, forwarded from the add's store, if the result is used).
    #[inline]
    pub fn increment(&mut self) -> u32 {
        self.add(1)
    }

    /// Adds `n` (modulo 2^31) to the version, as [`Producer::increment`].
    #[inline]
    pub fn add(&mut self, n: u32) -> u32 {
        self.versions.add_single(n)
    }

    /// The waiting side.
    pub fn versions(&self) -> &Arc<Versions> {
        &self.versions
    }
}

/// Adds `n` (below 2^31) to the word of `v` in one instruction that is not
/// atomic with respect to the other CPUs (they may write between its load
/// and its store), and wakes as `ec_word::owes_wake` says.
#[inline(always)]
fn plain_add(v: &Versions, n: u32) {
    // SAFETY: the pointer is the word's, valid and aligned for 4 bytes for
    // as long as `v` is borrowed.
    if unsafe { arch::plain_add_owes_wake(v.word.as_ptr(), n) } {
        v.wake_all();
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec { tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: the word is a live, aligned u32 for the call's duration and
    // `ts_ptr` is null or points at `ts`, alive until it returns. Any
    // result (woken, EAGAIN, EINTR, ETIMEDOUT) sends the caller back to
    // look at the word.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, ts_ptr);
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: the word is a live, aligned u32; a wake reads nothing else.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX);
    }
}
