//! Event counts: producers increment (`EC_INCREMENTS` in all, 10^7 by
//! default, in rounds repeated for `EC_SECONDS`, 8 by default) while waiters on OS threads, green threads and async tasks wait
//! for versions at random, nap at random, and must be woken for every
//! change they wait for. A lost wake-up hangs a waiter: a watchdog fails
//! the test after 60 s instead.

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::sync::{EventCount, Producer, Versions};

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn increments() -> u32 {
    env("EC_INCREMENTS", 10_000_000)
}

/// Runs `round` (one run of producers and waiters on a fresh event count)
/// at least once, and again until `EC_SECONDS` have passed.
fn rounds(what: &str, mut round: impl FnMut()) {
    let t = Instant::now();
    let mut n = 0;
    while n == 0 || t.elapsed() < Duration::from_secs(env("EC_SECONDS", 8).into()) {
        round();
        n += 1;
    }
    eprintln!("{what}: {n} rounds in {:?}", t.elapsed());
}

/// A small generator for the random choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What a waiter waits for next: the version it saw or, now and then, an
/// older one (which has changed already: it must return at once).
fn pick(now: u32, rng: &mut Rng) -> u32 {
    now.saturating_sub((rng.next() % 4).saturating_sub(2) as u32)
}

/// An OS thread's or a green thread's waits: returns how many it did.
fn wait_loop(v: &Versions, total: u32, mut rng: Rng, nap: fn(Duration)) -> u64 {
    let mut waits = 0;
    loop {
        let now = v.value();
        if now >= total {
            return waits;
        }
        let old = pick(now, &mut rng);
        let got = if rng.next() % 8 == 0 {
            match v.wait_timeout(old, Duration::from_micros(rng.next() % 500)) {
                Some(got) => got,
                None => continue,
            }
        } else {
            v.wait(old)
        };
        assert!(got > old && v.value() >= got, "waited on {old}, woken with {got}");
        waits += 1;
        if rng.next() % 16 == 0 {
            nap(Duration::from_micros(rng.next() % 200));
        }
    }
}

/// An async task's waits.
async fn wait_loop_async<V: AsRef<Versions>>(v: Arc<V>, total: u32, mut rng: Rng) -> u64 {
    let mut waits = 0;
    loop {
        let v = (*v).as_ref();
        let now = v.value();
        if now >= total {
            return waits;
        }
        let old = pick(now, &mut rng);
        let got = if rng.next() % 8 == 0 {
            match tokio::time::timeout(Duration::from_micros(rng.next() % 500), v.wait_async(old)).await {
                Ok(got) => got,
                Err(_) => continue,
            }
        } else {
            v.wait_async(old).await
        };
        assert!(got > old && v.value() >= got, "waited on {old}, woken with {got}");
        waits += 1;
        if rng.next() % 16 == 0 {
            tokio::time::sleep(Duration::from_micros(rng.next() % 200)).await;
        }
    }
}

/// Fails the process if not disarmed within 60 s.
struct Watchdog(Arc<AtomicBool>);

impl Watchdog {
    fn arm(what: &'static str) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(60);
            while !d.load(Acquire) {
                if Instant::now() > until {
                    eprintln!("{what}: a waiter still waits after 60 s (lost wake-up?)");
                    std::process::exit(1);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

/// Starts the waiters (2 OS threads, 4 green threads, 4 async tasks on a
/// tokio runtime), runs `produce` (which must bring the version to
/// `total`), and joins them.
fn with_waiters<V: AsRef<Versions> + Send + Sync + 'static>(what: &'static str, v: Arc<V>, total: u32, produce: impl FnOnce()) {
    let _dog = Watchdog::arm(what);
    let t = Instant::now();
    let os: Vec<_> = (0..2u64)
        .map(|i| {
            let v = v.clone();
            std::thread::spawn(move || wait_loop((*v).as_ref(), total, Rng(0x9E37 + i), std::thread::sleep))
        })
        .collect();
    let green: Vec<_> = (0..4u64)
        .map(|i| {
            let v = v.clone();
            turquoise::thread::spawn(move || wait_loop((*v).as_ref(), total, Rng(0x7F4A + i), turquoise::thread::sleep))
        })
        .collect();
    let va = v.clone();
    let tasks = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let hs: Vec<_> = (0..4u64).map(|i| tokio::spawn(wait_loop_async(va.clone(), total, Rng(0x3C6E + i)))).collect();
            let mut waits = 0;
            for h in hs {
                waits += h.await.unwrap();
            }
            waits
        })
    });
    produce();
    let produced = t.elapsed();
    assert_eq!((*v).as_ref().value(), total);
    let os: u64 = os.into_iter().map(|h| h.join().unwrap()).sum();
    let green: u64 = green.into_iter().map(|h| h.join().unwrap()).sum();
    let tasks = tasks.join().unwrap();
    eprintln!("{what}: {total} increments in {produced:?}; waits done: OS {os}, green {green}, async {tasks}; all joined after {:?}", t.elapsed());
}

/// Producers pause now and then, so that waiters get to sleep.
fn pause_now_and_then(i: u32) {
    if i % 8192 == 0 {
        std::thread::sleep(Duration::from_micros((i / 8192 % 40).into()));
    }
}

#[test]
fn multi_producer_wakes_every_waiter() {
    rounds("multi-producer", multi_producer_round);
}

fn multi_producer_round() {
    let total = increments() & !1;
    let ec = Arc::new(EventCount::new());
    with_waiters("multi-producer, 2 threads", ec.clone(), total, || {
        let ps: Vec<_> = (0..2)
            .map(|_| {
                let ec = ec.clone();
                std::thread::spawn(move || {
                    for i in 0..total / 2 {
                        ec.increment();
                        pause_now_and_then(i);
                    }
                })
            })
            .collect();
        for p in ps {
            p.join().unwrap();
        }
    });
}

fn single_producer_run(what: &'static str, run: impl Fn(Producer, u32)) {
    rounds(what, || {
        let total = increments();
        let (p, v) = EventCount::single_producer();
        with_waiters(what, v, total, || run(p, total));
    });
}

/// The single producer's loop, on the calling thread.
fn produce_plainly(mut p: Producer, total: u32) {
    for i in 0..total {
        p.increment();
        pause_now_and_then(i);
    }
}

#[test]
fn single_producer_wakes_every_waiter() {
    single_producer_run("single producer", produce_plainly);
}

fn pin_to(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET and
    // sched_setaffinity only read and write that local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[test]
fn single_producer_moved_between_cpus() {
    single_producer_run("single producer, moved between CPUs 0 and 1", |mut p, total| {
        let can = pin_to(0) && pin_to(1);
        let mut moves = 0u32;
        for i in 0..total {
            p.increment();
            if can && i % 4096 == 0 {
                pin_to((i / 4096 % 2) as usize);
                moves += 1;
            }
            pause_now_and_then(i);
        }
        eprintln!("producer moved {moves} times (affinity settable: {can})");
    });
}

#[test]
fn single_producer_in_a_preempted_green_thread() {
    single_producer_run("single producer in a green thread", |p, total| {
        let h = turquoise::thread::Builder::new()
            .slice(Duration::from_micros(200))
            .spawn(move || {
                let mut p = p;
                for _ in 0..total {
                    p.increment();
                }
            })
            .unwrap();
        while !h.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let preempted = h.stats().preemptions;
        h.join().unwrap();
        eprintln!("the producer's green thread was preempted {preempted} times");
        assert!(preempted > 0, "the producer ran without being preempted");
    });
}

/// The single producer's waiters fence with the `mprotect` shootdown
/// instead of membarrier (sound as well, slower; other tests of this
/// binary running meanwhile use it too, which changes only their cost).
#[test]
fn single_producer_with_mprotect_fences() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let used = turquoise::sync::fence::use_mechanism(turquoise::sync::fence::Mechanism::Mprotect);
    eprintln!("waiters fence with {used:?}");
    single_producer_run("single producer, mprotect fences", produce_plainly);
    turquoise::sync::fence::use_mechanism(turquoise::sync::fence::Mechanism::MembarrierExpedited);
}

/// The last version before the wrap-around (versions count modulo 2^31).
const TOP: u32 = (1 << 31) - 1;

/// Through the wrap-around with nobody waiting: versions count on modulo
/// 2^31, the carry into the flag bit leaves no flag behind (no wake-up owed
/// by the next increment, nothing that keeps waking a later waiter).
fn wraps(v: &Versions, mut add: impl FnMut(u32) -> u32) {
    assert_eq!(v.value(), TOP - 1);
    assert_eq!(add(1), TOP - 1);
    assert_eq!(add(1), TOP);
    assert_eq!((v.value(), v.flagged()), (0, false));
    assert_eq!(add(5), 0);
    assert_eq!(add(TOP), 5);
    assert_eq!((v.value(), v.flagged()), (4, false));
    assert_eq!(add(u32::MAX), 4, "n counts modulo 2^31 too");
    assert_eq!((v.value(), v.flagged()), (3, false));
    assert_eq!(v.wait_timeout(3, Duration::from_millis(20)), None, "no change, no wake-up");
    assert_eq!(v.wait_timeout(TOP, Duration::from_millis(20)), Some(3));
}

#[test]
fn versions_wrap_around() {
    assert_eq!(EventCount::starting_at(u32::MAX).value(), TOP);
    let ec = EventCount::starting_at(TOP - 1);
    wraps(&ec, |n| ec.add(n));
    let (mut p, v) = EventCount::single_producer_at(TOP - 1);
    wraps(&v, |n| p.add(n));
}

/// A waiter asleep on version `at` (the flag set) is woken by `add`, which
/// moves the version to `to` (through the wrap-around or not).
fn wakes_across_wrap<V: AsRef<Versions> + Send + Sync + 'static>(v: Arc<V>, at: u32, to: u32, add: impl FnOnce() -> u32) {
    let _dog = Watchdog::arm("wake-up across the wrap-around");
    assert_eq!((*v).as_ref().value(), at);
    let w = v.clone();
    let waiter = std::thread::spawn(move || (*w).as_ref().wait(at));
    while !(*v).as_ref().flagged() {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(add(), at);
    assert_eq!(waiter.join().unwrap(), to);
    assert_eq!(((*v).as_ref().value(), (*v).as_ref().flagged()), (to, false));
}

#[test]
fn sleepers_woken_across_the_wrap_around() {
    // (version waited on, what is added, version after)
    for (at, n, to) in [(TOP, 1, 0), (TOP - 1, 1, TOP), (TOP - 2, 5, 2), (5, TOP, 4)] {
        let ec = Arc::new(EventCount::starting_at(at));
        let e = ec.clone();
        wakes_across_wrap(ec, at, to, move || e.add(n));
        let (mut p, v) = EventCount::single_producer_at(at);
        wakes_across_wrap(v, at, to, move || p.add(n));
    }
}

/// What an increment costs with nobody waiting (printed, not asserted).
#[test]
fn increment_costs() {
    let n = 20_000_000u32;
    let ec = EventCount::new();
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(ec.increment());
    }
    let mp = t.elapsed() / n;
    let (mut p, v) = EventCount::single_producer();
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(p.increment());
    }
    let sp = t.elapsed() / n;
    assert_eq!(v.value(), n);
    eprintln!("increment, no waiter: multi-producer {mp:?}, single producer {sp:?}");
}
