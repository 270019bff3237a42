//! The synchronisation part of the tour (`make tour`): an event count
//! between a producer and a consumer that sleeps whenever it has caught up,
//! and a thousand activities sharing plain `Rc<RefCell<..>>` state without
//! a lock.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::sync::EventCount;
use turquoise::thread;

const VALUES: u64 = 2_000_000;
const SLOTS: usize = 1 << 12;

/// A single-producer event count: the producer (an OS thread) writes each
/// value into a ring of slots and then increments; the consumer (a green
/// thread) reads what the version says is there and waits, parking, when
/// it has caught up. The ring is never overrun: the producer waits for the
/// consumer's own event count when it is a whole ring ahead.
fn event_count() {
    println!("== an event count: {VALUES} values from an OS thread to a green thread that parks when caught up");
    let slots: Arc<Vec<AtomicU64>> = Arc::new((0..SLOTS).map(|_| AtomicU64::new(0)).collect());
    let (mut produced, published) = EventCount::single_producer();
    let consumed = Arc::new(EventCount::new());
    let t = Instant::now();
    let (s, c) = (slots.clone(), consumed.clone());
    let producer = std::thread::spawn(move || {
        for i in 0..VALUES {
            // Room: at most a ring ahead of what the consumer took.
            loop {
                let taken = c.value();
                if i < u64::from(taken) + SLOTS as u64 {
                    break;
                }
                c.wait(taken);
            }
            s[i as usize % SLOTS].store(i * 3, Ordering::Relaxed);
            produced.increment();
            if i % 100_000 == 0 {
                std::thread::sleep(Duration::from_millis(2)); // the consumer catches up and parks
            }
        }
    });
    let consumer = thread::spawn(move || {
        let (mut next, mut sum, mut waits) = (0u64, 0u64, 0u64);
        while next < VALUES {
            let v = published.value();
            // Versions count modulo 2^31: what is there is the difference.
            let ready = u64::from(v.wrapping_sub(next as u32) & 0x7fff_ffff);
            if ready == 0 {
                published.wait(v);
                waits += 1;
                continue;
            }
            for _ in 0..ready {
                sum += slots[next as usize % SLOTS].load(Ordering::Relaxed);
                next += 1;
            }
            consumed.add(ready as u32); // the slots are free again

        }
        (sum, waits)
    });
    producer.join().unwrap();
    let (sum, waits) = consumer.join().unwrap();
    let right = sum == 3 * VALUES * (VALUES - 1) / 2;
    println!(
        "  {:.1} ms, {:.1} ns a value; the consumer waited {waits} times; sum {}",
        t.elapsed().as_secs_f64() * 1e3,
        t.elapsed().as_nanos() as f64 / VALUES as f64,
        if right { "right" } else { "WRONG" }
    );
}

/// A thousand activities move money between accounts in one
/// `Rc<RefCell<Vec<i64>>>`, taking many microseconds per transfer while
/// their slices end all the time: they switch only at `checkpoint()`, so
/// no transfer is ever seen half done and the total never changes.
fn activities() {
    println!("== activities: 1,000 cooperative green threads sharing Rc<RefCell<..>> state, no lock");
    let t = Instant::now();
    let root = thread::Builder::new().preemptive(false).spawn(|| {
        let accounts = Rc::new(RefCell::new(vec![1_000i64; 100]));
        let audits = Rc::new(RefCell::new((0u64, 0u64))); // (audits, ones that found the total wrong)
        let all: Vec<_> = (0..1000usize)
            .map(|i| {
                let (accounts, audits) = (accounts.clone(), audits.clone());
                thread::spawn_local(move || {
                    for k in 0..20usize {
                        {
                            let mut a = accounts.borrow_mut();
                            let (from, to) = ((i * 7 + k) % 100, (i * 13 + k * 3 + 1) % 100);
                            a[from] -= 5;
                            let mut x = 0u64;
                            for j in 0..20_000u64 {
                                x = std::hint::black_box(x.wrapping_add(j)); // a slow transfer
                            }
                            a[to] += 5;
                        }
                        thread::checkpoint(); // the only place it may switch
                        if k % 5 == 0 {
                            let total: i64 = accounts.borrow().iter().sum();
                            let mut au = audits.borrow_mut();
                            au.0 += 1;
                            au.1 += u64::from(total != 100_000);
                        }
                    }
                })
            })
            .collect();
        for a in all {
            a.join().unwrap();
        }
        let total: i64 = accounts.borrow().iter().sum();
        let au = *audits.borrow();
        (total, au)
    });
    let (total, (audits, wrong)) = root.expect("root activity").join().expect("activities");
    println!(
        "  {:.1} ms; total after 20,000 transfers: {total} (100000 expected); {audits} audits in between, {wrong} saw a transfer half done",
        t.elapsed().as_secs_f64() * 1e3
    );
}

fn main() {
    event_count();
    activities();
}
