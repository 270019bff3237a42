//! libc synchronisation objects shared by preemptible functions or green
//! threads, and a watchdog for tests whose failure is a deadlock (included
//! with `#[path]` by linger's `futex_waits` and turquoise's `green_futex`;
//! not a test of its own).
#![allow(dead_code)] // each test uses a part

use std::cell::UnsafeCell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Aborts the process if the test is not done within `secs`: a regression
/// there is a deadlock, which would otherwise hang the test run.
pub struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    pub fn new(what: &'static str, secs: u64) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        std::thread::spawn(move || {
            let t = Instant::now();
            while !d.load(Ordering::SeqCst) {
                if t.elapsed() > Duration::from_secs(secs) {
                    // Not `eprintln!`, which the test harness captures.
                    let _ = writeln!(std::io::stderr(), "{what}: still running after {secs} s (deadlock?)");
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A libc synchronisation object shared by functions and threads.
pub struct Shared<T>(UnsafeCell<T>);
// SAFETY: pthread objects and semaphores are made to be used from several
// threads at once, through their functions only.
unsafe impl<T> Sync for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Send for Shared<T> {}

impl<T> Shared<T> {
    pub fn new(v: T) -> Arc<Shared<T>> {
        Arc::new(Shared(UnsafeCell::new(v)))
    }
    pub fn get(&self) -> *mut T {
        self.0.get()
    }
}

pub fn mutex() -> Arc<Shared<libc::pthread_mutex_t>> {
    Shared::new(libc::PTHREAD_MUTEX_INITIALIZER)
}

pub fn cond() -> Arc<Shared<libc::pthread_cond_t>> {
    Shared::new(libc::PTHREAD_COND_INITIALIZER)
}

pub fn lock(m: &Shared<libc::pthread_mutex_t>) {
    // SAFETY: an initialised mutex that outlives the call.
    assert_eq!(unsafe { libc::pthread_mutex_lock(m.get()) }, 0);
}

pub fn unlock(m: &Shared<libc::pthread_mutex_t>) {
    // SAFETY: as above, locked by the caller.
    assert_eq!(unsafe { libc::pthread_mutex_unlock(m.get()) }, 0);
}

/// `pthread_cond_wait(c, m)`, `m` held.
pub fn wait(c: &Shared<libc::pthread_cond_t>, m: &Shared<libc::pthread_mutex_t>) {
    // SAFETY: initialised objects; the caller holds the mutex.
    assert_eq!(unsafe { libc::pthread_cond_wait(c.get(), m.get()) }, 0);
}

pub fn signal(c: &Shared<libc::pthread_cond_t>) {
    // SAFETY: an initialised condition variable.
    assert_eq!(unsafe { libc::pthread_cond_signal(c.get()) }, 0);
}

/// Spins for about `d`, calling nothing.
pub fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A counter updated in two steps under a mutex, with a check that no two
/// holders are ever inside at once: what broken mutual exclusion would show
/// (and, with the count, lost updates).
pub struct Counted {
    m: Arc<Shared<libc::pthread_mutex_t>>,
    count: std::sync::atomic::AtomicU64,
    inside: AtomicBool,
}

impl Counted {
    pub fn new() -> Arc<Counted> {
        Arc::new(Counted { m: mutex(), count: Default::default(), inside: AtomicBool::new(false) })
    }

    /// Takes the mutex, reads the counter, spins for `hold`, writes it back
    /// plus one, and unlocks.
    pub fn bump(&self, hold: Duration) {
        lock(&self.m);
        assert!(!self.inside.swap(true, Ordering::SeqCst), "two holders inside the mutex");
        let v = self.count.load(Ordering::Relaxed);
        spin_for(hold);
        self.count.store(v + 1, Ordering::Relaxed);
        self.inside.store(false, Ordering::SeqCst);
        unlock(&self.m);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// A one-item queue between a producer and a consumer: a mutex, two
/// condition variables, and the item (0: empty).
pub struct Slot {
    m: Arc<Shared<libc::pthread_mutex_t>>,
    not_empty: Arc<Shared<libc::pthread_cond_t>>,
    not_full: Arc<Shared<libc::pthread_cond_t>>,
    item: std::sync::atomic::AtomicU64,
}

impl Slot {
    pub fn new() -> Arc<Slot> {
        Arc::new(Slot { m: mutex(), not_empty: cond(), not_full: cond(), item: Default::default() })
    }

    /// Puts `v` (not 0), waiting while the slot is full.
    pub fn put(&self, v: u64, timed: bool) {
        lock(&self.m);
        while self.item.load(Ordering::Relaxed) != 0 {
            self.wait(&self.not_full, timed);
        }
        self.item.store(v, Ordering::Relaxed);
        signal(&self.not_empty);
        unlock(&self.m);
    }

    /// Takes the item, waiting while the slot is empty.
    pub fn take(&self, timed: bool) -> u64 {
        lock(&self.m);
        let mut v;
        loop {
            v = self.item.load(Ordering::Relaxed);
            if v != 0 {
                break;
            }
            self.wait(&self.not_empty, timed);
        }
        self.item.store(0, Ordering::Relaxed);
        signal(&self.not_full);
        unlock(&self.m);
        v
    }

    /// `pthread_cond_wait`, or with `timed` `pthread_cond_timedwait` with a
    /// deadline a minute away, which must not come.
    fn wait(&self, c: &Shared<libc::pthread_cond_t>, timed: bool) {
        if !timed {
            return wait(c, &self.m);
        }
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: writes the current time into a local.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        ts.tv_sec += 60;
        // SAFETY: initialised objects, a valid deadline; the mutex is held.
        assert_eq!(unsafe { libc::pthread_cond_timedwait(c.get(), self.m.get(), &ts) }, 0, "timed out");
    }
}
