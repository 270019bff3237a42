//! The program's own code running inside `std` generics is preempted like
//! any other: a closure under `catch_unwind` (tokio wraps every task poll in
//! one), `thread::scope` or `LocalKey::with`, and a loop over a `HashMap`.
//! These used to run their full length, because std's frames below them
//! deferred every deadline.
//!
//! Release builds often inline a generic of std into its caller, and then no
//! std frame is left to defer anything. The tests call the generics through
//! opaque function pointers so that their frames stay on the stack, as in
//! debug builds and in larger programs.

use std::cell::{Cell, RefCell};
use std::collections::hash_map::Iter;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::thread::LocalKey;
use std::time::Duration;

use linger::{launch, resume, Linger};

const ROUNDS: usize = 20;
const SLICE: Duration = Duration::from_micros(100);

/// Arithmetic only, no calls: tens of milliseconds on these machines.
fn spin(seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..20_000_000u64 {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}

/// Runs `f` in 100 us slices: it must be stopped (a few times at least:
/// its work is hundreds of slices long) and must finish with `expected`.
fn preempted<T: Send + PartialEq + std::fmt::Debug + 'static>(
    what: &str,
    expected: T,
    f: impl FnOnce() -> T + Send + Clone + 'static,
) {
    for _ in 0..ROUNDS {
        let mut l = launch(f.clone(), SLICE).unwrap();
        let mut stops = 0;
        while l.is_continuation() {
            stops += 1;
            resume(&mut l, SLICE).unwrap();
        }
        assert!(stops >= 3, "{what}: ran through its slices ({stops} stops)");
        match l {
            Linger::Completion(v) => assert_eq!(v, expected, "{what}: wrong result"),
            _ => panic!("{what}: poisoned"),
        }
    }
}

fn spin_from_1() -> u64 {
    spin(1)
}

#[test]
fn closure_under_catch_unwind_is_preempted() {
    let expected = Ok(spin(1));
    preempted("catch_unwind", expected, || {
        let catch: fn(fn() -> u64) -> std::thread::Result<u64> = black_box(std::panic::catch_unwind::<fn() -> u64, u64>);
        catch(spin_from_1).map_err(|_| ())
    });
}

#[test]
fn closure_under_thread_scope_is_preempted() {
    let expected = spin(2) ^ 5;
    preempted("thread::scope", expected, || {
        std::thread::scope(|s| {
            let other = s.spawn(|| 5u64);
            // The scope's body runs on the function's own thread and stack.
            let mine = spin(2);
            mine ^ other.join().unwrap()
        })
    });
}

thread_local! {
    static LAZY: RefCell<Vec<u64>> = RefCell::new(vec![3]);
    static EAGER: Cell<u64> = const { Cell::new(4) };
}

fn spin_lazy(v: &Vec<u64>) -> u64 {
    spin(v[0])
}

fn spin_eager(c: &Cell<u64>) -> u64 {
    spin(c.get())
}

#[test]
fn closure_under_local_key_with_is_preempted() {
    type Lazy = RefCell<Vec<u64>>;
    type Eager = Cell<u64>;
    // `with_borrow` (over `with`) holds a borrow across the call: no tail
    // call can take its frame away.
    preempted("LocalKey::with_borrow", spin(3), || {
        let with: fn(&'static LocalKey<Lazy>, fn(&Vec<u64>) -> u64) -> u64 =
            black_box(LocalKey::<Lazy>::with_borrow::<fn(&Vec<u64>) -> u64, u64>);
        with(&LAZY, spin_lazy)
    });
    preempted("LocalKey::with", spin(4), || {
        let with: fn(&'static LocalKey<Eager>, fn(&Eager) -> u64) -> u64 =
            black_box(LocalKey::<Eager>::with::<fn(&Eager) -> u64, u64>);
        with(&EAGER, spin_eager)
    });
}

fn mix(acc: (u64, u64), (k, v): (&u64, &u64)) -> (u64, u64) {
    (black_box(acc.0.wrapping_add(k ^ v ^ acc.1)), acc.1)
}

type Body = fn((u64, u64), (&u64, &u64)) -> (u64, u64);

/// Sums over `m` 400 times; `fold` calls the loop body from std's iterator
/// (and hashbrown's below it).
fn work<'m>(m: &'m HashMap<u64, u64>) -> u64 {
    let fold: fn(Iter<'m, u64, u64>, (u64, u64), Body) -> (u64, u64) =
        black_box(<Iter<'m, u64, u64> as Iterator>::fold::<(u64, u64), Body>);
    (0..400u64).fold(0u64, |acc, round| fold(m.iter(), (acc, round), mix).0)
}

#[test]
fn loop_over_a_hashmap_is_preempted() {
    let map: Arc<HashMap<u64, u64>> = Arc::new((0..50_000u64).map(|i| (i, i.wrapping_mul(2654435761))).collect());
    let expected = work(&map);
    preempted("HashMap iteration", expected, move || work(&map));
}
