//! What the tests share.
#![allow(dead_code)] // each test binary uses a part

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Computation with no await point and no library call.
pub fn spin(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    acc
}

/// Counts its drops: a dropped future's destructors ran.
pub struct Flag(pub Arc<AtomicUsize>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

/// A task to spawn, and what awaits its end.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Spawns a task on the executor under test; the returned future ends when
/// the task has, and panics if the task did.
pub type Spawn = fn(Task) -> Task;

/// The sum `hazard_round(n)` returns.
pub fn expected(n: u64) -> u64 {
    (0..n).map(|i| i * 3 + 1).sum()
}

/// `n` tasks that mix computation with tokio's timers, oneshot and mpsc
/// channels, `Mutex`, `Notify` and TCP loopback I/O (an echo server with a
/// task per connection), each spawned with `spawn`. Returns the sum of
/// their results, [`expected`]`(n)` when nothing was lost.
pub async fn hazard_round(spawn: Spawn, n: u64) -> u64 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = spawn(Box::pin(echo_server(spawn, listener, stopped)));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(16);
    let lock = Arc::new(tokio::sync::Mutex::new(0u64));
    let notify = Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::new();
    for i in 0..n {
        let (tx, lock, notify) = (tx.clone(), lock.clone(), notify.clone());
        tasks.push(spawn(Box::pin(async move {
            let v = hazard(spawn, i, addr, lock, notify).await;
            tx.send(v * 3 + 1).await.unwrap();
        })));
    }
    drop(tx);
    let mut total = 0;
    while let Some(v) = rx.recv().await {
        total += v;
    }
    for t in tasks {
        t.await;
    }
    assert_eq!(*lock.lock().await, n / 4 + (n % 4 > 2) as u64);
    let _ = stop.send(());
    server.await;
    total
}

async fn hazard(
    spawn: Spawn,
    i: u64,
    addr: SocketAddr,
    lock: Arc<tokio::sync::Mutex<u64>>,
    notify: Arc<tokio::sync::Notify>,
) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    match i % 4 {
        0 => {
            tokio::time::sleep(Duration::from_micros(50 * (i % 7))).await;
            spin(50_000);
            i
        }
        1 => {
            let (otx, orx) = tokio::sync::oneshot::channel();
            drop(spawn(Box::pin(async move {
                spin(30_000);
                let _ = otx.send(1u64);
            })));
            i + orx.await.unwrap() - 1
        }
        2 => {
            let mut g = lock.lock().await;
            *g += 1;
            spin(10_000);
            drop(g);
            notify.notify_one();
            i
        }
        _ => {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(&i.to_le_bytes()).await.unwrap();
            let mut buf = [0u8; 8];
            s.read_exact(&mut buf).await.unwrap();
            u64::from_le_bytes(buf)
        }
    }
}

async fn echo_server(spawn: Spawn, listener: tokio::net::TcpListener, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let mut s = tokio::select! {
            r = listener.accept() => r.unwrap().0,
            _ = &mut stopped => return,
        };
        drop(spawn(Box::pin(async move {
            let mut buf = [0u8; 8];
            while s.read_exact(&mut buf).await.is_ok() {
                spin(20_000);
                if s.write_all(&buf).await.is_err() {
                    break;
                }
            }
        })));
    }
}
