//! Exercises every way a preemptible function can end (completion, panic,
//! cancellation after pause, cancellation after preemption, stack overflow)
//! so that `valgrind --leak-check=full` can show the runtime leaks nothing.
//! Run by `make test` under valgrind.

use std::time::Duration;

use linger::{launch, pause, resume, Builder};

fn spin(n: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = x.wrapping_mul(31).wrapping_add(i);
        std::hint::black_box(x);
    }
    x
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    for i in 0..rounds {
        // Completion after preemptions.
        let mut l = launch(
            move || {
                let v = vec![i; 100];
                spin(200_000);
                v.iter().sum::<usize>()
            },
            Duration::from_micros(50),
        )
        .unwrap();
        while !l.is_completion() {
            resume(&mut l, Duration::from_micros(50)).unwrap();
        }
        // Cancelled after pause: owned heap data is freed by unwinding.
        let l = launch(
            || {
                let v = vec![0u8; 4096];
                let s = String::from("owned");
                pause();
                (v, s)
            },
            Duration::MAX,
        )
        .unwrap();
        drop(l);
        // Panic.
        let _ = std::panic::catch_unwind(|| launch(|| -> () { panic!("expected") }, Duration::MAX));
        // Cancelled after preemption (no heap data owned by the function).
        let mut l = launch(|| spin(u64::MAX), Duration::from_micros(30)).unwrap();
        let _ = resume(&mut l, Duration::from_micros(30));
        drop(l);
    }
    // Stack overflow, once.
    #[inline(never)]
    #[allow(unconditional_recursion)]
    fn recurse(n: u64) -> u64 {
        let b = [n; 32];
        std::hint::black_box(&b);
        recurse(n + 1) + b[1]
    }
    let r = Builder::new().stack_size(64 * 1024).launch(|| recurse(0), Duration::MAX);
    assert!(r.is_err());
    std::panic::set_hook(Box::new(|_| {}));
    println!("leakcheck: {rounds} rounds done, stats {:?}", linger::stats());
}
