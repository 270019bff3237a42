//! The SPSC ring on event counts: every value arrives, in order, between
//! OS threads and green threads (preempted ones too), through a small ring
//! that is full and empty all the time; ends close cleanly; values left in
//! the ring are dropped with it. The SPMC ring (`mod spmc`): every value
//! reaches exactly one of four receivers, none is dropped twice or leaked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::sync::ring::{channel, Receiver, Sender};

const N: u64 = 2_000_000;

fn send_all(mut tx: Sender<u64>) {
    for i in 0..N {
        tx.send(i).unwrap();
    }
}

fn receive_all(mut rx: Receiver<u64>) -> u64 {
    let mut next = 0;
    while let Some(v) = rx.recv() {
        assert_eq!(v, next, "out of order or lost");
        next += 1;
    }
    next
}

#[test]
fn os_thread_to_green_thread_and_back() {
    let t = Instant::now();
    let (tx, rx) = channel(64);
    let green = turquoise::thread::Builder::new().slice(Duration::from_micros(200)).spawn(move || receive_all(rx)).unwrap();
    send_all(tx);
    assert_eq!(green.join().unwrap(), N);
    let there = t.elapsed();
    let (tx, rx) = channel(64);
    let green = turquoise::thread::Builder::new().slice(Duration::from_micros(200)).spawn(move || send_all(tx)).unwrap();
    assert_eq!(receive_all(rx), N);
    green.join().unwrap();
    eprintln!("{N} values OS -> green in {there:?}, green -> OS in {:?}", t.elapsed() - there);
}

#[test]
fn between_os_threads_through_one_slot() {
    let t = Instant::now();
    let (tx, rx) = channel(1);
    let r = std::thread::spawn(move || receive_all(rx));
    let n = N / 20;
    let mut tx = tx;
    for i in 0..n {
        tx.send(i).unwrap();
    }
    drop(tx);
    assert_eq!(r.join().unwrap(), n);
    eprintln!("{n} values through a 1-slot ring in {:?}", t.elapsed());
}

#[test]
fn a_gone_receiver_refuses_and_leftovers_are_dropped() {
    let item = Arc::new(());
    let (mut tx, mut rx) = channel(8);
    for _ in 0..5 {
        tx.send(item.clone()).unwrap();
    }
    assert!(rx.recv().is_some());
    drop(rx);
    assert!(tx.send(item.clone()).is_err());
    assert_eq!(Arc::strong_count(&item), 5, "the refused value came back and was dropped");
    drop(tx);
    assert_eq!(Arc::strong_count(&item), 1, "the 4 values left in the ring were dropped with it");
}

mod spmc {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::{Duration, Instant};

    use turquoise::sync::ring::spmc::{channel, Receiver, Sender};

    /// Values per run: `RING_VALUES`, else 10^6 through 64 slots and 10^5
    /// through 1 or 2 (where nearly every value waits, ten times slower).
    fn values(capacity: usize) -> u64 {
        let set = std::env::var("RING_VALUES").ok().and_then(|s| s.parse().ok());
        set.unwrap_or(if capacity < 64 { 100_000 } else { 1_000_000 })
    }

    /// A value whose drops are counted.
    struct Item {
        v: u64,
        drops: &'static AtomicU64,
    }

    impl Drop for Item {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Fails the process if `done` is not dropped within 60 s.
    fn watchdog(what: String) -> mpsc::Sender<()> {
        let (done, wait) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(Duration::from_secs(60)) {
                eprintln!("{what}: hung for 60 s");
                std::process::abort();
            }
        });
        done
    }

    fn send_all(mut tx: Sender<Item>, n: u64, drops: &'static AtomicU64) {
        for v in 0..n {
            assert!(tx.send(Item { v, drops }).is_ok(), "a receiver is still there");
        }
    }

    /// Receives until the end, marks each value in `seen` (which it must
    /// not have been before); returns how many and their sum.
    fn receive_all(rx: Receiver<Item>, seen: &[AtomicU64]) -> (u64, u64) {
        let (mut count, mut sum) = (0, 0);
        while let Some(item) = rx.recv() {
            let bit = 1 << (item.v % 64);
            let before = seen[(item.v / 64) as usize].fetch_or(bit, Ordering::Relaxed);
            assert_eq!(before & bit, 0, "{} received twice", item.v);
            count += 1;
            sum += item.v;
        }
        (count, sum)
    }

    /// One sender (an OS thread, or a green thread preempted every 100 us)
    /// and 4 receivers (2 OS threads, 2 green threads) over `values()`.
    fn four_receivers(capacity: usize, green_sender: bool) {
        let t = Instant::now();
        let n = values(capacity);
        let what = format!("capacity {capacity}, green sender {green_sender}");
        let done = watchdog(what.clone());
        // A counter of its own per run (one run per capacity and sender
        // kind; tests run in parallel), in a static: not leaked memory,
        // which the sanitizer's leak check (make test-asan) reports.
        static DROPS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
        let run = [1, 2, 64].iter().position(|&c| c == capacity).expect("a capacity of the tests") * 2 + usize::from(green_sender);
        let drops = &DROPS[run];
        drops.store(0, Ordering::Relaxed);
        let seen: Arc<[AtomicU64]> = (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        let (tx, rx) = channel(capacity);
        let mut os = Vec::new();
        let mut green = Vec::new();
        for _ in 0..2 {
            let (r, s) = (rx.clone(), seen.clone());
            os.push(std::thread::spawn(move || receive_all(r, &s)));
            let (r, s) = (rx.clone(), seen.clone());
            green.push(turquoise::thread::spawn(move || receive_all(r, &s)));
        }
        drop(rx);
        if green_sender {
            let slice = Duration::from_micros(100);
            turquoise::thread::Builder::new().slice(slice).spawn(move || send_all(tx, n, drops)).unwrap().join().unwrap();
        } else {
            send_all(tx, n, drops);
        }
        let mut results: Vec<(u64, u64)> = os.into_iter().map(|t| t.join().unwrap()).collect();
        results.extend(green.into_iter().map(|t| t.join().unwrap()));
        let count: u64 = results.iter().map(|r| r.0).sum();
        let sum: u64 = results.iter().map(|r| r.1).sum();
        assert_eq!((count, sum), (n, n * (n - 1) / 2), "{what}: every value once");
        let full = |i: usize| if (i as u64 + 1) * 64 <= n { u64::MAX } else { (1 << (n % 64)) - 1 };
        assert!(seen.iter().enumerate().all(|(i, w)| w.load(Ordering::Relaxed) == full(i)), "{what}: a value missing");
        assert_eq!(drops.load(Ordering::Relaxed), n, "{what}: drops == sends");
        drop(done);
        eprintln!("{what}: {n} values to 4 receivers (shares {:?}) in {:?}", results.iter().map(|r| r.0).collect::<Vec<_>>(), t.elapsed());
    }

    #[test]
    fn os_sender_to_four_receivers() {
        for capacity in [1, 2, 64] {
            four_receivers(capacity, false);
        }
    }

    #[test]
    fn preempted_green_sender_to_four_receivers() {
        for capacity in [1, 2, 64] {
            four_receivers(capacity, true);
        }
    }

    #[test]
    fn gone_receivers_refuse_and_leftovers_are_dropped() {
        let item = Arc::new(());
        let (mut tx, rx) = channel(8);
        let rx2 = rx.clone();
        for _ in 0..5 {
            tx.send(item.clone()).unwrap();
        }
        assert!(rx.recv().is_some());
        drop(rx);
        assert!(rx2.recv().is_some(), "one receiver left: it still receives");
        tx.send(item.clone()).unwrap();
        drop(rx2);
        assert!(tx.send(item.clone()).is_err());
        assert_eq!(Arc::strong_count(&item), 5, "the refused value came back and was dropped");
        drop(tx);
        assert_eq!(Arc::strong_count(&item), 1, "the 4 values left in the ring were dropped with it");
    }

    #[test]
    fn a_gone_receiver_wakes_a_waiting_sender() {
        for _ in 0..200 {
            let (mut tx, rx) = channel(1);
            tx.send(0u32).unwrap();
            let r = std::thread::spawn(move || drop(rx));
            assert_eq!(tx.send(1), Err(1), "the ring stays full until the receivers go");
            r.join().unwrap();
        }
    }

    #[test]
    fn a_gone_sender_wakes_waiting_receivers_after_the_rest() {
        for _ in 0..200 {
            let (mut tx, rx) = channel(4);
            let rs: Vec<_> = (0..3)
                .map(|_| {
                    let rx = rx.clone();
                    std::thread::spawn(move || std::iter::from_fn(|| rx.recv()).count())
                })
                .collect();
            drop(rx);
            for i in 0..3u32 {
                tx.send(i).unwrap();
            }
            drop(tx);
            assert_eq!(rs.into_iter().map(|r| r.join().unwrap()).sum::<usize>(), 3);
        }
    }
}
