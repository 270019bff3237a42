//! Locks and channels: turquoise::sync against std, parking_lot, crossbeam
//! and tokio (Go's in `go/main.go`, the same names and output), ns per
//! operation per batch.

use std::hint::black_box;
use std::sync::Arc;

use crate::{per_op, Row, Sizes};

/// A lock of one of the kinds measured, around a counter.
trait Lock: Send + Sync + 'static {
    fn bump(&self);
}

impl Lock for turquoise::sync::Mutex<u64> {
    fn bump(&self) {
        *self.lock().unwrap() += 1;
    }
}

impl Lock for std::sync::Mutex<u64> {
    fn bump(&self) {
        *self.lock().unwrap() += 1;
    }
}

impl Lock for parking_lot::Mutex<u64> {
    fn bump(&self) {
        *self.lock() += 1;
    }
}

/// `blocking_lock`, outside any runtime.
impl Lock for tokio::sync::Mutex<u64> {
    fn bump(&self) {
        *self.blocking_lock() += 1;
    }
}

fn locks() -> Vec<(&'static str, Arc<dyn Lock>)> {
    vec![
        ("turquoise::sync::Mutex", Arc::new(turquoise::sync::Mutex::new(0u64))),
        ("std::sync::Mutex", Arc::new(std::sync::Mutex::new(0u64))),
        ("parking_lot::Mutex", Arc::new(parking_lot::Mutex::new(0u64))),
        ("tokio::sync::Mutex (blocking_lock)", Arc::new(tokio::sync::Mutex::new(0u64))),
    ]
}

/// Lock+unlock, one OS thread (`lock_uncontended`), and two OS threads on
/// CPUs 0 and 1 hammering one lock (`lock_contended`: elapsed time per
/// lock+unlock of either).
pub fn lock_unlock(s: Sizes) -> Vec<Row> {
    let mut rows = Vec::new();
    bench_util::pin(0);
    for (name, l) in locks() {
        rows.push(Row::new("lock_uncontended", name, per_op(s.batches, s.n / 4, |n| (0..n).for_each(|_| l.bump())).0));
    }
    for (name, l) in locks() {
        let ns = per_op(s.batches, s.n / 4, |n| {
            let l2 = l.clone();
            let other = std::thread::spawn(move || {
                bench_util::pin(1);
                (0..n / 2).for_each(|_| l2.bump());
            });
            (0..n - n / 2).for_each(|_| l.bump());
            other.join().expect("locker");
        });
        rows.push(Row::new("lock_contended", name, ns.0));
    }
    rows
}

/// A round trip between two OS threads: `ping` sends a number, `pong`
/// sends it back, through a pair of channels.
fn os_pingpong<S: Send + 'static, R: Send + 'static>(n: usize, chan: impl Fn() -> (S, R), send: fn(&S, usize), recv: fn(&mut R) -> Option<usize>) {
    let (ping_tx, mut ping_rx) = chan();
    let (pong_tx, mut pong_rx) = chan();
    let echo = std::thread::spawn(move || {
        while let Some(v) = recv(&mut ping_rx) {
            send(&pong_tx, v);
        }
    });
    for i in 0..n {
        send(&ping_tx, i);
        black_box(recv(&mut pong_rx));
    }
    drop(ping_tx);
    echo.join().expect("echo");
}

/// Channel round trips between two OS threads (not pinned), and between
/// two tokio tasks on a current-thread runtime.
pub fn pingpong_os(s: Sizes) -> Vec<Row> {
    use turquoise::sync::mpsc as tq;
    let n = s.n / 40;
    let mut rows = Vec::new();
    let mut push = |name: &str, f: &dyn Fn(usize)| rows.push(Row::new("pingpong_os", name, per_op(s.batches, n, f).0));
    push("turquoise::sync::mpsc::channel(1)", &|n| os_pingpong(n, || tq::channel::<usize>(1), |t, v| { let _ = t.send(v); }, |r| r.recv()));
    push("std::sync::mpsc::sync_channel(1)", &|n| os_pingpong(n, || std::sync::mpsc::sync_channel::<usize>(1), |t, v| { let _ = t.send(v); }, |r| r.recv().ok()));
    push("crossbeam_channel::bounded(1)", &|n| os_pingpong(n, || crossbeam_channel::bounded::<usize>(1), |t, v| { let _ = t.send(v); }, |r| r.recv().ok()));
    push("tokio::sync::mpsc::channel(1), two tasks, current-thread runtime", &|n| {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        rt.block_on(async {
            let (ping_tx, mut ping_rx) = tokio::sync::mpsc::channel::<usize>(1);
            let (pong_tx, mut pong_rx) = tokio::sync::mpsc::channel::<usize>(1);
            let echo = tokio::spawn(async move {
                while let Some(v) = ping_rx.recv().await {
                    let _ = pong_tx.send(v).await;
                }
            });
            for i in 0..n {
                let _ = ping_tx.send(i).await;
                black_box(pong_rx.recv().await);
            }
            drop(ping_tx);
            let _ = echo.await;
        });
    });
    rows
}

/// Round trips between two green threads of a one-worker runtime: through
/// `turquoise::sync::mpsc::channel(1)`, and taking turns with a
/// `turquoise::sync::Mutex` and `Condvar` (the park/unpark cost).
pub fn pingpong_green(s: Sizes) -> Vec<Row> {
    let n = s.n / 40;
    let batches = s.batches;
    crate::on_one_worker(true, move || {
        use turquoise::sync::{mpsc, Condvar, Mutex};
        let chan = per_op(batches, n, |n| {
            let (ping_tx, mut ping_rx) = mpsc::channel::<usize>(1);
            let (pong_tx, mut pong_rx) = mpsc::channel::<usize>(1);
            let echo = turquoise::thread::spawn(move || {
                while let Some(v) = ping_rx.recv() {
                    let _ = pong_tx.send(v);
                }
            });
            for i in 0..n {
                let _ = ping_tx.send(i);
                black_box(pong_rx.recv());
            }
            drop(ping_tx);
            let _ = echo.join();
        });
        let condvar = per_op(batches, n, |n| {
            // Whose turn it is: even the first thread's, odd the other's.
            let turn = Arc::new((Mutex::new(0usize), Condvar::new()));
            let t = turn.clone();
            let take_turns = move |t: &(Mutex<usize>, Condvar), mine: usize| {
                for _ in 0..n {
                    let mut g = t.1.wait_while(t.0.lock().unwrap(), |v| *v % 2 != mine).unwrap();
                    *g += 1;
                    t.1.notify_one();
                }
            };
            let other = turquoise::thread::spawn(move || take_turns(&t, 1));
            take_turns(&turn, 0);
            let _ = other.join();
        });
        vec![
            Row::new("pingpong_green", "turquoise::sync::mpsc::channel(1)", chan.0),
            Row::new("pingpong_green", "turquoise::sync::Mutex + Condvar", condvar.0),
        ]
    })
}
