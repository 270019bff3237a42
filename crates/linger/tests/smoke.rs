use std::time::{Duration, Instant};
use linger::*;

#[test]
fn smoke() {
    let l = launch(|| 42, Duration::from_millis(10)).unwrap();
    assert_eq!(l.completion(), Some(42));

    let t0 = Instant::now();
    let mut l = launch(|| { let mut x = 0u64; for i in 0..300_000_000u64 { x = x.wrapping_add(i * i); std::hint::black_box(x); } x }, Duration::from_millis(5)).unwrap();
    println!("first slice {:?} {:?}", t0.elapsed(), l);
    assert!(l.is_continuation());
    let mut n = 0;
    while !l.is_completion() { resume(&mut l, Duration::from_millis(5)).unwrap(); n += 1; }
    println!("resumes {n} stats {:?}", stats());

    let mut l = launch(|| { pause(); 7 }, Duration::MAX).unwrap();
    assert!(l.yielded());
    resume(&mut l, Duration::MAX).unwrap();
    assert_eq!(l.completion(), Some(7));
}
