//! Preemption hazards that only show up when things interleave: nesting under
//! preemption, and continuations preempted on one thread and resumed on
//! others, many times over.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use linger::{launch, resume, Builder, Linger};

fn hash_chain(seed: u64, n: u64) -> u64 {
    let mut x = seed | 1;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    x
}

#[test]
fn nested_functions_under_preemption() {
    for round in 0..20u64 {
        let mut outer = launch(
            move || {
                let mut total = 0u64;
                for k in 0..6u64 {
                    // The inner budget is sometimes longer, sometimes shorter
                    // than what the outer slice has left.
                    let budget = Duration::from_micros(30 + 70 * (k % 3));
                    let mut inner = launch(move || hash_chain(round * 10 + k, 300_000), budget).unwrap();
                    while !inner.is_completion() {
                        resume(&mut inner, budget).unwrap();
                    }
                    total = total.wrapping_add(inner.completion().unwrap());
                }
                total
            },
            Duration::from_micros(150),
        )
        .unwrap();
        let mut slices = 0;
        while !outer.is_completion() {
            resume(&mut outer, Duration::from_micros(150)).unwrap();
            slices += 1;
        }
        let want = (0..6u64).fold(0u64, |t, k| t.wrapping_add(hash_chain(round * 10 + k, 300_000)));
        assert_eq!(outer.completion(), Some(want));
        assert!(slices > 2, "outer function was never preempted");
    }
}

#[test]
fn migratable_continuations_shared_by_a_thread_pool() {
    const FUNCTIONS: u64 = 48;
    const WORK: u64 = 2_000_000;
    type Job = (u64, Linger<u64>);
    let queue: Arc<Mutex<VecDeque<Job>>> = Arc::new(Mutex::new(VecDeque::new()));
    for i in 0..FUNCTIONS {
        // SAFETY: hash_chain uses no thread-local storage.
        let l = unsafe { Builder::new().migratable(true) }.launch(move || hash_chain(i, WORK), Duration::ZERO).unwrap();
        queue.lock().unwrap().push_back((i, l));
    }
    let done: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let queue = queue.clone();
            let done = done.clone();
            std::thread::spawn(move || loop {
                let Some((i, mut l)) = queue.lock().unwrap().pop_front() else { break };
                resume(&mut l, Duration::from_micros(40)).unwrap();
                match l {
                    Linger::Completion(v) => done.lock().unwrap().push((i, v)),
                    l => queue.lock().unwrap().push_back((i, l)),
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut done = Arc::try_unwrap(done).unwrap().into_inner().unwrap();
    done.sort();
    assert_eq!(done.len() as u64, FUNCTIONS);
    for (i, v) in done {
        assert_eq!(v, hash_chain(i, WORK), "function {i} computed a wrong result after migrating");
    }
}

#[test]
fn an_unlimited_outer_function_is_never_preempted_by_its_inner_deadlines() {
    // The inner functions' timer signals reach the thread while the outer one
    // (no deadline) is current: they must count as early, never as the outer
    // function's deadline (a regression once cut the outer short).
    let before = linger::stats();
    for round in 0..300u64 {
        let l = launch(
            move || {
                let mut inner = launch(move || hash_chain(round, 300_000), Duration::from_micros(100)).unwrap();
                while !inner.is_completion() {
                    resume(&mut inner, Duration::from_micros(100)).unwrap();
                }
                inner.completion().unwrap()
            },
            Duration::MAX,
        )
        .unwrap();
        assert_eq!(l.completion(), Some(hash_chain(round, 300_000)), "round {round}: outer function was stopped");
    }
    assert!(linger::stats().preemptions > before.preemptions, "the inner functions were never preempted");
}
