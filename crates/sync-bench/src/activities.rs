//! Activities (seed 004's microbenchmarks): spawn+join and switches of
//! activities next to preemptive green threads and OS threads, the cost of
//! a yield check with nothing due, and a 1 MB byte-by-byte comparison with
//! a yield check every 2^k bytes against the same loop without checks and
//! libc's `strcmp`. Memory per idle activity is green-bench's `idle`
//! microbenchmark in a child process (sync-bench's `--micro`); Go's peers
//! come from green-bench's Go program (`main.rs`).

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use turquoise::thread::{checkpoint, spawn_local, yield_now};

use crate::{futex_wait, futex_wake, on_one_worker, per_op, Row, Sizes};

/// The bytes compared by [`strcmp`] (plus a NUL).
pub const STRCMP_BYTES: usize = 1 << 20;

/// The largest k of a yield check every 2^k bytes.
pub const MAX_K: u32 = 14;

/// Names of the rows the targets are read from.
pub const SPAWN_ROW: &str = "activity (spawn_local + join)";
pub const SWITCH_ROW: &str = "activities, yield_now";
pub const CHECK_ROWS: [&str; 2] = ["loop with checkpoint()", "loop without"];
pub const NO_CHECKS: &str = "no checks";
pub const LIBC: &str = "libc strcmp";

/// The strcmp row of a check every 2^k bytes, placed by a counter test in
/// each iteration ([`byte_cmp`]) or after each block of 2^k ([`block_cmp`]).
pub fn check_row(k: u32, blocks: bool) -> String {
    format!("check every 2^{k}, {}", if blocks { "blocks" } else { "counter test" })
}

/// Spawn+join, one at a time, ns each ("act_spawn"): an activity started
/// with `spawn_local` from a root activity, a preemptive green thread
/// (`thread::spawn`) from the same root activity, an OS thread.
pub fn spawn(s: Sizes) -> Vec<Row> {
    let (batches, n) = (s.batches, s.n / 200);
    let mut rows = on_one_worker(false, move || {
        let activity = per_op(batches, n, |n| {
            for i in 0..n {
                black_box(spawn_local(move || i).join().ok());
            }
        });
        let green = per_op(batches, n, |n| {
            for i in 0..n {
                black_box(turquoise::thread::spawn(move || i).join().ok());
            }
        });
        vec![Row::new("act_spawn", SPAWN_ROW, activity.0), Row::new("act_spawn", "preemptive green thread (thread::spawn + join)", green.0)]
    });
    let os = per_op(batches, n / 10, |n| {
        for i in 0..n {
            black_box(std::thread::spawn(move || i).join().ok());
        }
    });
    rows.push(Row::new("act_spawn", "OS thread (std::thread::spawn + join)", os.0));
    rows
}

/// `k` turns of the calling side, `mine` (0 or 1), taking turns on `turn`
/// with the other side, yielding while it is the other's turn.
fn turns(turn: &Cell<usize>, mine: usize, k: usize) {
    for _ in 0..k {
        while turn.get() % 2 != mine {
            yield_now();
        }
        turn.set(turn.get() + 1);
    }
}

/// The calling green thread and another, `k` yields each: 2k switches.
fn yields(k: usize, other: impl FnOnce(Box<dyn FnOnce() + Send>) -> Box<dyn FnOnce()>) {
    let join = other(Box::new(move || (0..k).for_each(|_| yield_now())));
    (0..k).for_each(|_| yield_now());
    join();
}

/// Switches between two threads of a kind, ns each ("act_switch").
/// Activities: yield_now back and forth; taking turns on an `Rc<Cell>`
/// (yielding until it is one's turn); a `turquoise::sync::mpsc` ping-pong
/// (a round trip is two switches). The same yields between preemptive
/// green threads, and two OS threads on CPU 0 taking turns on a futex.
pub fn switch(s: Sizes) -> Vec<Row> {
    let (batches, n) = (s.batches, s.n / 20);
    let mut rows = on_one_worker(false, move || {
        // `m` switches per call of each: m/2 turns of either side.
        let yield_ = per_op(batches, n, |m| {
            yields(m / 2, |f| {
                let h = spawn_local(f);
                Box::new(move || drop(h.join()))
            })
        });
        let cell = per_op(batches, n, |m| {
            let turn = Rc::new(Cell::new(0));
            let t = turn.clone();
            let other = spawn_local(move || turns(&t, 1, m / 2));
            turns(&turn, 0, m / 2);
            let _ = other.join();
        });
        let chan = per_op(batches, n, |m| {
            use turquoise::sync::mpsc::channel;
            let (ping_tx, mut ping_rx) = channel::<usize>(1);
            let (pong_tx, mut pong_rx) = channel::<usize>(1);
            let echo = spawn_local(move || {
                while let Some(v) = ping_rx.recv() {
                    let _ = pong_tx.send(v);
                }
            });
            for i in 0..m / 2 {
                let _ = ping_tx.send(i);
                black_box(pong_rx.recv());
            }
            drop(ping_tx);
            let _ = echo.join();
        });
        vec![
            Row::new("act_switch", SWITCH_ROW, yield_.0),
            Row::new("act_switch", "activities, Rc<Cell> turns + yield_now", cell.0),
            Row::new("act_switch", "activities, turquoise::sync::mpsc::channel(1)", chan.0),
        ]
    });
    rows.push(on_one_worker(true, move || {
        let green = per_op(batches, n, |m| {
            yields(m / 2, |f| {
                let h = turquoise::thread::spawn(f);
                Box::new(move || drop(h.join()))
            })
        });
        Row::new("act_switch", "preemptive green threads, yield_now", green.0)
    }));
    let os = per_op(batches, n / 20, |m| {
        let turn = Arc::new(AtomicU32::new(0));
        let take_turns = move |turn: &AtomicU32, mine: u32| {
            for _ in 0..m / 2 {
                loop {
                    let v = turn.load(Ordering::Acquire);
                    if v % 2 == mine {
                        break;
                    }
                    futex_wait(turn, v);
                }
                turn.fetch_add(1, Ordering::Release);
                futex_wake(turn);
            }
        };
        let t = turn.clone();
        let other = std::thread::spawn(move || {
            bench_util::pin(0);
            take_turns(&t, 1)
        });
        take_turns(&turn, 0);
        let _ = other.join();
    });
    rows.push(Row::new("act_switch", "OS threads on one CPU, futex turns", os.0));
    rows
}

/// The sum of `0..n` through `black_box`, with a yield check per
/// iteration or not.
#[inline(never)]
fn sum_loop(n: usize, check: bool) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = x.wrapping_add(black_box(i as u64));
        if check {
            checkpoint();
        }
    }
    x
}

/// A yield check with nothing due ("act_check", ns per iteration): a loop
/// with `checkpoint()` against the same loop without, in an activity.
pub fn check(s: Sizes) -> Vec<Row> {
    let (batches, n) = (s.batches, s.n * 5);
    on_one_worker(false, move || {
        let with = per_op(batches, n, |n| {
            black_box(sum_loop(n, black_box(true)));
        });
        let without = per_op(batches, n, |n| {
            black_box(sum_loop(n, black_box(false)));
        });
        vec![Row::new("act_check", CHECK_ROWS[0], with.0), Row::new("act_check", CHECK_ROWS[1], without.0)]
    })
}

/// `a` and `b` compared byte by byte up to a difference or a NUL (as
/// `strcmp`), with a yield check every 2^k bytes when `k` is given: a
/// test of the byte's index in each iteration (a check in the loop's body).
#[inline(never)]
pub fn byte_cmp(a: &[u8], b: &[u8], k: Option<u32>) -> i32 {
    let mask = k.map_or(0, |k| (1usize << k) - 1);
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        if x != y || x == 0 {
            return i32::from(x) - i32::from(y);
        }
        if k.is_some() && i & mask == mask {
            checkpoint();
        }
    }
    0
}

/// [`byte_cmp`] with the loop cut into blocks of 2^k bytes, a yield check
/// after each: the inner loop is the loop without checks.
#[inline(never)]
pub fn block_cmp(a: &[u8], b: &[u8], k: u32) -> i32 {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i < n {
        let end = n.min(i + (1 << k));
        for (&x, &y) in a[i..end].iter().zip(&b[i..end]) {
            if x != y || x == 0 {
                return i32::from(x) - i32::from(y);
            }
        }
        checkpoint();
        i = end;
    }
    0
}

/// Two equal strings of [`STRCMP_BYTES`] bytes and their NUL.
pub fn strings() -> (Vec<u8>, Vec<u8>) {
    let mut a: Vec<u8> = (0..STRCMP_BYTES).map(|i| b'a' + (i % 26) as u8).collect();
    a.push(0);
    (a.clone(), a)
}

/// The strcmp of two equal 1 MB strings, ns per comparison
/// ("act_strcmp"), in an activity: with a yield check every 2^k bytes
/// (k = 0..=`max_k`) both ways, without checks, and libc's `strcmp`. Each
/// batch times every variant in turn, so that a change of the machine's
/// speed during the run falls on all of them; three times the usual
/// batches (they are cheap), for medians that a stolen scheduler tick (4 ms
/// here) does not move.
pub fn strcmp(s: Sizes, max_k: u32) -> Vec<Row> {
    let (batches, reps) = (3 * s.batches, (s.n / 400_000).max(1));
    on_one_worker(false, move || {
        let (a, b) = strings();
        let (a, b) = (&a[..], &b[..]);
        let mut variants: Vec<(String, Box<dyn Fn() -> i32 + '_>)> = Vec::new();
        for blocks in [false, true] {
            for k in 0..=max_k {
                let f: Box<dyn Fn() -> i32> = if blocks { Box::new(move || block_cmp(black_box(a), black_box(b), k)) } else { Box::new(move || byte_cmp(black_box(a), black_box(b), Some(k))) };
                variants.push((check_row(k, blocks), f));
            }
        }
        variants.push((NO_CHECKS.into(), Box::new(|| byte_cmp(black_box(a), black_box(b), None))));
        // SAFETY: both are NUL-terminated buffers we own, alive for the call.
        variants.push((LIBC.into(), Box::new(|| unsafe { libc::strcmp(black_box(a.as_ptr()).cast(), black_box(b.as_ptr()).cast()) })));
        let mut samples = vec![Vec::with_capacity(batches); variants.len()];
        for batch in 0..=batches {
            for ((_, f), v) in variants.iter().zip(&mut samples) {
                let t = crate::now_ns();
                for _ in 0..reps {
                    assert_eq!(black_box(f()), 0);
                }
                // Batch 0 is the warm-up.
                if batch > 0 {
                    v.push((crate::now_ns() - t) as f64 / reps as f64);
                }
            }
        }
        variants.into_iter().zip(samples).map(|((name, _), v)| Row::new("act_strcmp", &name, v)).collect()
    })
}

/// Memory per idle thread from green-bench's `idle` line ("idle N RSS0
/// RSS1 PTE0 PTE1", KiB): rows "act_memory" (resident bytes per thread)
/// and "act_pte" (page-table bytes per thread) for `name`.
pub fn idle_rows(name: &str, line: &str) -> Option<[Row; 2]> {
    let v: Vec<f64> = line.strip_prefix("idle ")?.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    match v[..] {
        [n, rss0, rss1, pte0, pte1, ..] if n > 0.0 => Some([Row::new("act_memory", name, vec![(rss1 - rss0) * 1024.0 / n]), Row::new("act_pte", name, vec![(pte1 - pte0) * 1024.0 / n])]),
        _ => None,
    }
}
