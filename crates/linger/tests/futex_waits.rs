//! `Builder::stop_in_futex_waits`: functions on one thread that wait for
//! each other in libc's synchronisation functions (`pthread_mutex_lock`,
//! `pthread_cond_wait`, `sem_wait`, rwlocks, barriers) are stopped in the
//! wait, so the caller can run the one that will end it: no deadlock. Without
//! the option such a wait lasts until libc returns, and waits reached through
//! other libc code stay deferred even with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linger::{Builder, Cancelled, Linger};

#[path = "support/pthread.rs"]
mod pthread;
use pthread::{cond, lock, mutex, spin_for, unlock, wait, Counted, Shared, Slot, Watchdog};

fn sem(value: u32) -> Arc<Shared<libc::sem_t>> {
    // SAFETY: an all-zero sem_t is storage for `sem_init` to initialise.
    let s = Shared::new(unsafe { std::mem::zeroed::<libc::sem_t>() });
    // SAFETY: initialising the semaphore in place, before anyone uses it; it
    // stays at this address (inside the Arc) for its life.
    assert_eq!(unsafe { libc::sem_init(s.get(), 0, value) }, 0);
    s
}

fn futex_builder() -> Builder {
    Builder::new().stop_in_futex_waits(true)
}

/// Launches `f` with the option, for a first slice of `first` (zero: not
/// started).
fn start<T: Send + 'static>(first: Duration, f: impl FnOnce() -> T + Send + 'static) -> Linger<T> {
    futex_builder().launch(f, first).unwrap()
}

/// Resumes each unfinished function for `slice` in turn until all are done;
/// returns how many resumes ended with a futex stop and how long each of
/// those took.
fn round_robin<T>(fs: &mut [Linger<T>], slice: Duration) -> Vec<Duration> {
    let mut stopped_in_wait = Vec::new();
    while fs.iter().any(|l| l.is_continuation()) {
        for l in fs.iter_mut().filter(|l| l.is_continuation()) {
            let before = linger::stats().futex_stops;
            let t = Instant::now();
            linger::resume(l, slice).unwrap();
            if linger::stats().futex_stops > before {
                stopped_in_wait.push(t.elapsed());
            }
        }
    }
    stopped_in_wait
}

/// The case on one thread: functions that each take a normal
/// mutex, hold it over several slices (so they are stopped holding it) and
/// update a counter under it. The others block in `pthread_mutex_lock`,
/// are stopped there, and the caller's next turns run the holder: no
/// deadlock, and no update is lost.
#[test]
fn mutex_held_by_a_stopped_function_is_no_deadlock() {
    let _w = Watchdog::new("mutex", 120);
    linger::reset_stats();
    const FUNCTIONS: u64 = 3;
    const ROUNDS: u64 = 40;
    for _ in 0..5 {
        let c = Counted::new();
        let mut fs: Vec<_> = (0..FUNCTIONS)
            .map(|_| {
                let c = c.clone();
                futex_builder()
                    .launch(
                        move || {
                            for _ in 0..ROUNDS {
                                c.bump(Duration::from_micros(300));
                                spin_for(Duration::from_micros(50));
                            }
                        },
                        Duration::ZERO,
                    )
                    .unwrap()
            })
            .collect();
        let stops = round_robin(&mut fs, Duration::from_micros(100));
        assert_eq!(c.count(), FUNCTIONS * ROUNDS, "lost updates");
        assert!(!stops.is_empty(), "no function was stopped in pthread_mutex_lock");
    }
    let s = linger::stats();
    assert!(s.futex_stops > 0 && s.futex_stops <= s.preemptions, "{s:?}");
}

/// Producer and consumer on one thread, through a one-slot queue guarded by
/// a mutex and two condition variables; each waits in `pthread_cond_wait`
/// (and, every other item, in `pthread_cond_timedwait` with a distant
/// deadline, whose wait the kernel ends with EINTR) until the other runs.
#[test]
fn condition_variable_between_functions_on_one_thread() {
    let _w = Watchdog::new("condvar", 120);
    const ITEMS: u64 = 2000;
    let slot = Slot::new();
    let producer = {
        let slot = slot.clone();
        futex_builder()
            .launch(
                move || {
                    for i in 1..=ITEMS {
                        slot.put(i, i % 2 == 1);
                        spin_for(Duration::from_micros(20));
                    }
                    0
                },
                Duration::ZERO,
            )
            .unwrap()
    };
    let consumer = futex_builder()
        .launch(
            move || {
                let mut sum = 0;
                for i in 1..=ITEMS {
                    let v = slot.take(i % 2 == 1);
                    assert_eq!(v, i, "items out of order");
                    sum += v;
                }
                sum
            },
            Duration::ZERO,
        )
        .unwrap();
    linger::reset_stats();
    let mut fs = [producer, consumer];
    let stops = round_robin(&mut fs, Duration::from_micros(100));
    let [_, consumer] = fs;
    assert_eq!(consumer.completion(), Some(ITEMS * (ITEMS + 1) / 2));
    assert!(stops.len() as u64 >= ITEMS / 2, "only {} stops in waits for {ITEMS} items", stops.len());
}

/// Two functions that take turns through two semaphores: each `sem_wait`
/// waits for the other function's `sem_post` (and half of them go through
/// `sem_timedwait`, which linger wraps).
#[test]
fn semaphores_between_functions_on_one_thread() {
    let _w = Watchdog::new("semaphore", 120);
    const TURNS: u64 = 2000;
    let (a, b) = (sem(0), sem(0));
    let turn = Arc::new(AtomicU64::new(0));
    let side = |mine: Arc<Shared<libc::sem_t>>, theirs: Arc<Shared<libc::sem_t>>, parity: u64, turn: Arc<AtomicU64>| {
        futex_builder()
            .launch(
                move || {
                    for i in 0..TURNS {
                        if parity == 1 || i > 0 {
                            if i % 2 == 0 {
                                // SAFETY: an initialised semaphore.
                                while unsafe { libc::sem_wait(mine.get()) } != 0 {}
                            } else {
                                let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                                // SAFETY: writes the current time into a local.
                                unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
                                ts.tv_sec += 60;
                                // SAFETY: an initialised semaphore, a valid deadline.
                                assert_eq!(unsafe { libc::sem_timedwait(mine.get(), &ts) }, 0);
                            }
                        }
                        let t = turn.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(t % 2, parity, "out of turn");
                        // SAFETY: an initialised semaphore.
                        assert_eq!(unsafe { libc::sem_post(theirs.get()) }, 0);
                    }
                },
                Duration::ZERO,
            )
            .unwrap()
    };
    linger::reset_stats();
    // The first side's first turn needs no wait.
    let mut fs = [side(a.clone(), b.clone(), 0, turn.clone()), side(b.clone(), a.clone(), 1, turn.clone())];
    let stops = round_robin(&mut fs, Duration::from_micros(100));
    assert_eq!(turn.load(Ordering::SeqCst), 2 * TURNS);
    assert!(!stops.is_empty());
}

/// `op` (`pthread_rwlock_rdlock`, `_wrlock`, `_unlock`) on `rw`, which must
/// succeed.
fn rw_call(op: unsafe extern "C" fn(*mut libc::pthread_rwlock_t) -> libc::c_int, rw: &Shared<libc::pthread_rwlock_t>) {
    // SAFETY: an initialised rwlock; unlocks only follow this function's locks.
    assert_eq!(unsafe { op(rw.get()) }, 0);
}

/// A writer waits in `pthread_rwlock_wrlock` while a stopped function holds
/// a read lock, and two functions meet at a barrier (the first one there
/// waits for the second). (A write lock held by a function makes another
/// function of the same thread get `EDEADLK`: glibc records the writer's
/// thread id, see `docs/safety.md`.)
#[test]
fn rwlock_and_barrier_between_functions_on_one_thread() {
    let _w = Watchdog::new("rwlock/barrier", 120);
    linger::reset_stats();
    for _ in 0..50 {
        let rw = Shared::new(libc::PTHREAD_RWLOCK_INITIALIZER);
        let reading = Arc::new(AtomicBool::new(false));
        let (rw2, reading2) = (rw.clone(), reading.clone());
        let mut reader = start(Duration::ZERO, move || {
            rw_call(libc::pthread_rwlock_rdlock, &rw2);
            reading2.store(true, Ordering::SeqCst);
            spin_for(Duration::from_micros(500));
            reading2.store(false, Ordering::SeqCst);
            rw_call(libc::pthread_rwlock_unlock, &rw2);
        });
        // Until it is stopped holding the read lock (a first slice may end
        // at the return of `pthread_rwlock_rdlock`, before the store; a
        // late deadline may let it run to its end).
        while !reading.load(Ordering::SeqCst) && reader.is_continuation() {
            linger::resume(&mut reader, Duration::from_micros(100)).unwrap();
        }
        if !reader.is_continuation() {
            continue;
        }
        let writer = start(Duration::ZERO, move || {
            rw_call(libc::pthread_rwlock_wrlock, &rw);
            assert!(!reading.load(Ordering::SeqCst), "written while read");
            rw_call(libc::pthread_rwlock_unlock, &rw);
        });
        round_robin(&mut [reader, writer], Duration::from_micros(100));
    }
    let rw_stops = linger::stats().futex_stops;
    assert!(rw_stops > 0);
    for _ in 0..50 {
        // SAFETY: all-zero storage for `pthread_barrier_init`.
        let bar = Shared::new(unsafe { std::mem::zeroed::<libc::pthread_barrier_t>() });
        // SAFETY: initialising in place, before use; destroyed below after both passed.
        assert_eq!(unsafe { libc::pthread_barrier_init(bar.get(), std::ptr::null(), 2) }, 0);
        let passed = Arc::new(AtomicU64::new(0));
        let meet = |lag: Duration| {
            let (bar, passed) = (bar.clone(), passed.clone());
            futex_builder()
                .launch(
                    move || {
                        spin_for(lag);
                        // SAFETY: an initialised barrier for two.
                        let r = unsafe { libc::pthread_barrier_wait(bar.get()) };
                        assert!(r == 0 || r == libc::PTHREAD_BARRIER_SERIAL_THREAD);
                        passed.fetch_add(1, Ordering::SeqCst);
                    },
                    Duration::ZERO,
                )
                .unwrap()
        };
        round_robin(&mut [meet(Duration::ZERO), meet(Duration::from_micros(300))], Duration::from_micros(100));
        assert_eq!(passed.load(Ordering::SeqCst), 2);
        // SAFETY: nobody waits at it any more.
        assert_eq!(unsafe { libc::pthread_barrier_destroy(bar.get()) }, 0);
    }
    assert!(linger::stats().futex_stops > rw_stops, "never stopped at the barrier");
}

/// Launches `f` with 1 ms slices (stopping in futex waits if `stop`) while
/// `holder` keeps what `f` waits for until 50 ms after it took it (see
/// `hold_elsewhere`). Returns how long the launch took, the futex stops it
/// made, then lets `f` finish and returns its value.
///
/// The time is the launch's when it was stopped (an upper bound), and the
/// time since the holder took the resource when it was not: a launch whose
/// wait was deferred ends after the holder gave the resource back, so at
/// least 50 ms after it took it, however late this thread got to launch
/// on a loaded machine (measured from the launch, 44.6 ms was once seen).
fn launch_against<T: Send + 'static>(stop: bool, holder: Holder, f: impl FnOnce() -> T + Send + 'static) -> (Duration, u64, T) {
    linger::reset_stats();
    let t = Instant::now();
    let mut l = Builder::new().stop_in_futex_waits(stop).launch(f, Duration::from_millis(1)).unwrap();
    let stops = linger::stats().futex_stops;
    let took = if stops > 0 { t.elapsed() } else { holder.taken.elapsed() };
    holder.thread.join().unwrap();
    while l.is_continuation() {
        linger::resume(&mut l, Duration::from_millis(1)).unwrap();
    }
    (took, stops, l.completion().expect("completed"))
}

/// A thread holding something for 50 ms, and when it took it.
struct Holder {
    thread: std::thread::JoinHandle<()>,
    taken: Instant,
}

/// Another thread takes something with `take` and gives it back with
/// `give` 50 ms later; returns once it was taken.
fn hold_elsewhere(take: impl FnOnce() + Send + 'static, give: impl FnOnce() + Send + 'static) -> Holder {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        take();
        tx.send(Instant::now()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        give();
    });
    let taken = rx.recv().unwrap();
    Holder { thread, taken }
}

/// Another thread holds `m` for 50 ms, from about the moment this returns.
fn mutex_held_elsewhere(m: Arc<Shared<libc::pthread_mutex_t>>) -> Holder {
    let m2 = m.clone();
    hold_elsewhere(move || lock(&m), move || unlock(&m2))
}

/// Without the option the current rule stands: a deadline that finds the
/// function in `pthread_mutex_lock` waits for libc to return, here until
/// another thread unlocks 50 ms later. With it, the function is stopped at
/// its deadline, and finishes once the mutex is free.
#[test]
fn without_the_option_the_wait_is_deferred() {
    let _w = Watchdog::new("option", 120);
    for round in 0..10 {
        for stop in [false, true] {
            let m = mutex();
            let holder = mutex_held_elsewhere(m.clone());
            let (took, stops, ()) = launch_against(stop, holder, move || {
                lock(&m);
                unlock(&m);
            });
            if stop {
                assert!(took < Duration::from_millis(40), "round {round}: stopped only after {took:?}");
                assert_eq!(stops, 1, "round {round}");
            } else {
                assert!(took >= Duration::from_millis(45), "round {round}: the wait was cut after {took:?}");
                assert_eq!(stops, 0, "round {round}");
            }
        }
    }
}

extern "C" fn compare_under_lock(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
    let m = COMPARATOR_MUTEX.load(Ordering::SeqCst) as *mut libc::pthread_mutex_t;
    // SAFETY: the test's mutex, alive while `qsort` runs; `a` and `b` point
    // into the array being sorted.
    unsafe {
        assert_eq!(libc::pthread_mutex_lock(m), 0);
        libc::pthread_mutex_unlock(m);
        (*(a as *const u32)).cmp(&*(b as *const u32)) as libc::c_int
    }
}

static COMPARATOR_MUTEX: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Futex waits that other libc code makes stay deferred with the option:
/// `flockfile` waiting for a stream another thread holds, and a
/// `pthread_mutex_lock` in a comparator that `qsort` called (the chain has
/// libc below the function's own code twice).
#[test]
fn waits_reached_through_other_libc_code_stay_deferred() {
    let _w = Watchdog::new("other libc", 120);
    for _ in 0..5 {
        // SAFETY: a temporary file of our own, closed once both are done.
        let f = unsafe { libc::tmpfile() } as usize;
        assert_ne!(f, 0);
        let file = move || f as *mut libc::FILE;
        // SAFETY (both): the stream stays open until after the join.
        let holder = hold_elsewhere(move || unsafe { flockfile(file()) }, move || unsafe { funlockfile(file()) });
        let (took, stops, ()) = launch_against(true, holder, move || {
            // SAFETY: as above.
            unsafe {
                flockfile(file());
                funlockfile(file());
            }
        });
        assert!(took >= Duration::from_millis(45) && stops == 0, "flockfile's wait was cut after {took:?}");
        // SAFETY: nobody uses the stream any more.
        unsafe { libc::fclose(file()) };

        let m = mutex();
        COMPARATOR_MUTEX.store(m.get() as usize, Ordering::SeqCst);
        let holder = mutex_held_elsewhere(m.clone());
        let (took, stops, sorted) = launch_against(true, holder, || {
            let mut v: Vec<u32> = (0..64).rev().collect();
            // SAFETY: `v` holds 64 u32s; the comparator reads two of them.
            unsafe { libc::qsort(v.as_mut_ptr().cast(), v.len(), 4, Some(compare_under_lock)) };
            v
        });
        assert!(took >= Duration::from_millis(45) && stops == 0, "the comparator's wait was cut after {took:?}");
        assert_eq!(sorted, (0..64).collect::<Vec<u32>>());
    }
}

extern "C" {
    fn flockfile(f: *mut libc::FILE);
    fn funlockfile(f: *mut libc::FILE);
    /// glibc's push of a buffer on its own cleanup chain.
    fn _pthread_cleanup_push(buf: *mut libc::c_void, routine: extern "C" fn(*mut libc::c_void), arg: *mut libc::c_void);
    fn _pthread_cleanup_pop(buf: *mut libc::c_void, execute: libc::c_int);
}

extern "C" fn nothing(_: *mut libc::c_void) {}

/// The head of this thread's chain of glibc's own cleanup buffers, read by
/// pushing a scratch buffer (`routine, arg, canceltype, prev`).
fn cleanup_head() -> usize {
    let mut buf = [0usize; 4];
    // SAFETY: a buffer as large as glibc's, popped before it goes out of
    // scope, without running the routine.
    unsafe {
        _pthread_cleanup_push(buf.as_mut_ptr().cast(), nothing, std::ptr::null_mut());
        let prev = buf[3];
        _pthread_cleanup_pop(buf.as_mut_ptr().cast(), 0);
        prev
    }
}

/// A function stopped in `pthread_cond_wait` (which pushes a cleanup buffer
/// on the thread's chain around its wait) leaves the caller's chain as it
/// was; cancelled there it is reclaimed, and the mutex and the condition
/// variable's other waiters go on working.
#[test]
fn stopped_waits_leave_the_caller_its_chain_and_can_be_cancelled() {
    let _w = Watchdog::new("cancel", 120);
    let before = cleanup_head();
    for _ in 0..20 {
        let (m, c) = (mutex(), cond());
        let waiter = |m: Arc<Shared<libc::pthread_mutex_t>>, c: Arc<Shared<libc::pthread_cond_t>>, done: Arc<AtomicBool>| {
            futex_builder()
                .launch(
                    move || {
                        lock(&m);
                        while !done.load(Ordering::SeqCst) {
                            wait(&c, &m);
                        }
                        unlock(&m);
                    },
                    Duration::from_micros(200),
                )
                .unwrap()
        };
        let done = Arc::new(AtomicBool::new(false));
        let mut a = waiter(m.clone(), c.clone(), done.clone());
        let mut b = waiter(m.clone(), c.clone(), done.clone());
        assert!(a.is_continuation() && b.is_continuation());
        assert_eq!(cleanup_head(), before, "a stopped function's cleanup buffer is on the caller's chain");
        // Resumed until a slice ends in its futex wait (the first may have
        // ended at the return of `pthread_mutex_lock`, with `m` held): it
        // holds nothing then.
        loop {
            let stops = linger::stats().futex_stops;
            linger::resume(&mut a, Duration::from_micros(200)).unwrap();
            assert_eq!(cleanup_head(), before);
            if linger::stats().futex_stops > stops {
                break;
            }
        }
        assert_eq!(a.cancel(), Cancelled::Reclaimed);
        assert_eq!(cleanup_head(), before);
        // The other waiter is woken and finishes; the mutex is free.
        lock(&m);
        done.store(true, Ordering::SeqCst);
        // SAFETY: an initialised condition variable.
        unsafe { libc::pthread_cond_broadcast(c.get()) };
        unlock(&m);
        while b.is_continuation() {
            linger::resume(&mut b, Duration::from_millis(1)).unwrap();
        }
        lock(&m);
        unlock(&m);
        // `a` stays counted as a waiter of `c` (docs/safety.md): `c` is
        // leaked rather than destroyed.
        std::mem::forget(c);
    }
}

/// How long a function that enters a wait keeps its caller waiting: about
/// one slice (100 us) plus the stop's own overrun.
#[test]
fn a_wait_costs_the_caller_about_one_slice() {
    let _w = Watchdog::new("cost", 120);
    let m = mutex();
    lock(&m);
    let mut all = Vec::new();
    for _ in 0..200 {
        let m2 = m.clone();
        let mut l = futex_builder()
            .launch(
                move || {
                    lock(&m2);
                    unlock(&m2);
                },
                Duration::ZERO,
            )
            .unwrap();
        for _ in 0..5 {
            let t = Instant::now();
            linger::resume(&mut l, Duration::from_micros(100)).unwrap();
            all.push(t.elapsed());
            assert!(l.is_continuation());
        }
        assert_eq!(l.cancel(), Cancelled::Reclaimed);
    }
    unlock(&m);
    all.sort();
    let (p50, p99) = (all[all.len() / 2], all[all.len() * 99 / 100]);
    eprintln!("resume of a function waiting in pthread_mutex_lock, 100 us slices: p50 {p50:?}, p99 {p99:?}, max {:?}", all.last().unwrap());
    assert!(p50 < Duration::from_millis(2), "p50 {p50:?}");
}
