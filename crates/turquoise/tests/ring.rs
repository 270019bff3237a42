//! The SPSC ring on event counts: every value arrives, in order, between
//! OS threads and green threads (preempted ones too), through a small ring
//! that is full and empty all the time; ends close cleanly; values left in
//! the ring are dropped with it.

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
