//! Many threads, many paused functions, and moving continuations between threads.

use std::cell::Cell;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linger::{launch, pause, resume, Builder, Error, Linger};

fn busy(iters: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

#[test]
fn sixteen_threads_preempt_on_time() {
    let threads: Vec<_> = (0..24)
        .map(|_| {
            std::thread::spawn(|| {
                let mut worst = Duration::ZERO;
                for _ in 0..20 {
                    let t = Instant::now();
                    let mut l = launch(|| busy(u64::MAX), Duration::from_millis(1)).unwrap();
                    worst = worst.max(t.elapsed());
                    assert!(l.is_continuation());
                    resume(&mut l, Duration::from_micros(200)).unwrap();
                    assert!(l.is_continuation());
                }
                (worst, linger::stats().preemptions)
            })
        })
        .collect();
    for t in threads {
        let (worst, preemptions) = t.join().unwrap();
        assert!(preemptions >= 40, "each thread preempted each time: {preemptions}");
        // 24 spinning threads share 2 cores: generous bound, but finite.
        assert!(worst < Duration::from_secs(2), "a 1 ms slice took {worst:?}");
    }
}

#[test]
fn ten_thousand_paused_functions_round_robin() {
    const N: usize = 10_000;
    let mut ls: Vec<Linger<usize>> = (0..N)
        .map(|i| {
            launch(
                move || {
                    let mut acc = i;
                    for k in 0..5 {
                        acc += k;
                        pause();
                    }
                    acc
                },
                Duration::MAX,
            )
            .unwrap()
        })
        .collect();
    assert!(ls.iter().all(|l| l.yielded()));
    let mut rounds = 0;
    while ls.iter().any(|l| l.is_continuation()) {
        for l in ls.iter_mut() {
            resume(l, Duration::MAX).unwrap();
        }
        rounds += 1;
    }
    assert_eq!(rounds, 5);
    for (i, l) in ls.into_iter().enumerate() {
        assert_eq!(l.completion(), Some(i + 10));
    }
}

thread_local! {
    static HITS: Cell<u64> = const { Cell::new(0) };
}

#[test]
fn non_migratable_continuation_refuses_another_thread() {
    let l = launch(
        || -> () {
            loop {
                HITS.with(|h| h.set(std::hint::black_box(h.get() + 1)));
            }
        },
        Duration::from_micros(200),
    )
    .unwrap();
    assert!(l.is_continuation());
    let mine = HITS.with(|h| h.get());
    let (tx, rx) = mpsc::channel();
    let (back_tx, back_rx) = mpsc::channel();
    let other = std::thread::spawn(move || {
        let mut l: Linger<()> = rx.recv().unwrap();
        for _ in 0..100 {
            assert!(matches!(resume(&mut l, Duration::from_micros(100)), Err(Error::WrongThread)));
        }
        assert_eq!(HITS.with(|h| h.get()), 0, "the other thread's TLS was touched");
        back_tx.send(l).unwrap();
    });
    tx.send(l).unwrap();
    other.join().unwrap();
    let mut l = back_rx.recv().unwrap();
    // Still usable at home.
    for _ in 0..20 {
        resume(&mut l, Duration::from_micros(100)).unwrap();
    }
    assert!(HITS.with(|h| h.get()) > mine);
}

#[test]
fn migratable_continuation_moves_between_threads() {
    // Preempted on one thread, resumed on others many times; uses no TLS.
    for _ in 0..3 {
        // SAFETY: busy() uses no thread-local storage.
        let mut l = unsafe { Builder::new().migratable(true) }
            .launch(|| busy(40_000_000), Duration::from_micros(200))
            .unwrap();
        let mut hops = 0;
        while l.is_continuation() {
            l = std::thread::spawn(move || {
                let mut l = l;
                resume(&mut l, Duration::from_micros(300)).unwrap();
                l
            })
            .join()
            .unwrap();
            hops += 1;
        }
        assert!(hops > 3);
        assert_eq!(l.completion(), Some(busy(40_000_000)));
    }
}

#[test]
fn paused_migratable_function_can_be_cancelled_on_another_thread() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct D;
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    for _ in 0..100 {
        // SAFETY: the function uses no thread-local storage.
        let l = unsafe { Builder::new().migratable(true) }
            .launch(
                || {
                    let _d = D;
                    pause();
                },
                Duration::MAX,
            )
            .unwrap();
        std::thread::spawn(move || drop(l)).join().unwrap();
    }
    assert_eq!(DROPS.load(Ordering::SeqCst), 100);
}
