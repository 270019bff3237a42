//! What the tests share.
#![allow(dead_code)] // each test binary uses a part

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A turquoise runtime of `workers` workers and `slice`, all drivers on.
pub fn runtime(workers: usize, slice: std::time::Duration) -> turquoise::Runtime {
    turquoise::Builder::new().worker_threads(workers).slice(slice).enable_all().build().unwrap()
}

/// Runs `f` on a thread of its own; panics if it takes over `limit` (a
/// deadlock or a lost wake-up), instead of hanging the test run. A panic
/// inside `f` reaches the caller.
pub fn within<T: Send + 'static>(limit: std::time::Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: not done after {limit:?} (deadlock or lost wake-up)"),
    }
}

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

/// A task to spawn.
pub type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A spawned task, on whatever executor.
pub struct Spawned {
    /// Ends when the task has: true if it finished, false if it was
    /// cancelled; panics if the task did.
    pub join: Pin<Box<dyn Future<Output = bool> + Send>>,
    /// Cancels it.
    pub abort: Box<dyn Fn() + Send + Sync>,
}

/// Spawns a task on the executor under test.
pub type Spawn = fn(Task) -> Spawned;

/// A [`Spawned`] from an executor's join handle (`Err` when cancelled or
/// panicked: `panic` gives the payload, or `None` when cancelled) and
/// abort.
pub fn spawned<E: Send + 'static>(
    join: impl Future<Output = Result<(), E>> + Send + 'static,
    panic: fn(E) -> Option<Box<dyn std::any::Any + Send>>,
    abort: impl Fn() + Send + Sync + 'static,
) -> Spawned {
    Spawned {
        join: Box::pin(async move {
            match join.await {
                Ok(()) => true,
                Err(e) => match panic(e) {
                    None => false,
                    Some(p) => std::panic::resume_unwind(p),
                },
            }
        }),
        abort: Box::new(abort),
    }
}

/// The sum `hazard_round(n)` returns.
pub fn expected(n: u64) -> u64 {
    (0..n).map(|i| i * 3 + 1).sum()
}

/// What the tasks of a round share.
#[derive(Clone)]
struct Round {
    spawn: Spawn,
    addr: SocketAddr,
    lock: Arc<tokio::sync::Mutex<u64>>,
    notify: Arc<tokio::sync::Notify>,
    /// Destructors run of aborted tasks that were waiting.
    unwound: Arc<AtomicUsize>,
    /// Every other aborted task computes instead of waiting.
    abort_spinning: bool,
}

/// How many of `0..n` are of kind `k`.
fn of_kind(n: u64, k: u64) -> u64 {
    (0..n).filter(|i| i % KINDS == k).count() as u64
}

const KINDS: u64 = 6;

/// `n` tasks, each spawned with `spawn`, that mix computation with tokio's
/// timers, oneshot, mpsc and broadcast channels, `Mutex`, `Notify`, TCP
/// loopback I/O (an echo server with a task per connection), and spawning
/// and aborting tasks (waiting ones, whose destructors must run, and
/// spinning ones, stopped in the middle of a poll). Returns the sum of their
/// results, [`expected`]`(n)` when nothing was lost.
pub async fn hazard_round(spawn: Spawn, n: u64) -> u64 {
    hazard_round_with(spawn, n, true).await
}

/// [`hazard_round`]; with `abort_spinning` false, the aborted tasks all
/// wait (none is reclaimed in the middle of a poll, which leaks what its
/// future owned, by design: for leak checkers).
pub async fn hazard_round_with(spawn: Spawn, n: u64, abort_spinning: bool) -> u64 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let round = Round {
        spawn,
        addr: listener.local_addr().unwrap(),
        lock: Arc::new(tokio::sync::Mutex::new(0u64)),
        notify: Arc::new(tokio::sync::Notify::new()),
        unwound: Arc::new(AtomicUsize::new(0)),
        abort_spinning,
    };
    let server = spawn(Box::pin(echo_server(spawn, listener, stopped)));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(16);
    let (btx, _) = tokio::sync::broadcast::channel::<u64>(4);
    let mut tasks = Vec::new();
    for i in 0..n {
        let (tx, round) = (tx.clone(), round.clone());
        // Subscribed before the value is sent: none is missed.
        let brx = (i % KINDS == 4).then(|| btx.subscribe());
        tasks.push(spawn(Box::pin(async move {
            let v = hazard(&round, i, brx).await;
            tx.send(v * 3 + 1).await.unwrap();
        })));
    }
    drop(tx);
    // Broadcast once every receiver exists, from a task of its own.
    let sender = spawn(Box::pin(async move {
        tokio::time::sleep(Duration::from_micros(300)).await;
        let _ = btx.send(0); // no receiver when n < 5
    }));
    let mut total = 0;
    while let Some(v) = rx.recv().await {
        total += v;
    }
    for t in tasks {
        assert!(t.join.await, "a hazard task was cancelled");
    }
    assert!(sender.join.await);
    assert_eq!(*round.lock.lock().await, of_kind(n, 2));
    // Every other aborted task was waiting: its destructors ran, unless the
    // abort found its poll stopped by the slice (reclaimed, by design): a
    // poll of a few instructions, stopped only when the VM stalls it past a
    // whole slice (seen at 20 us: 1 of 25).
    let waiting = if abort_spinning { of_kind(n, 5).div_ceil(2) } else { of_kind(n, 5) };
    let unwound = round.unwound.load(Ordering::SeqCst) as u64;
    assert!(unwound <= waiting && unwound * 10 >= waiting * 8, "{unwound} of {waiting} aborted waiting tasks unwound");
    let _ = stop.send(());
    assert!(server.join.await);
    total
}

async fn hazard(r: &Round, i: u64, brx: Option<tokio::sync::broadcast::Receiver<u64>>) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    match i % KINDS {
        0 => {
            tokio::time::sleep(Duration::from_micros(50 * (i % 7))).await;
            spin(50_000);
            i
        }
        1 => {
            let (otx, orx) = tokio::sync::oneshot::channel();
            drop((r.spawn)(Box::pin(async move {
                spin(30_000);
                let _ = otx.send(1u64);
            })));
            i + orx.await.unwrap() - 1
        }
        2 => {
            let mut g = r.lock.lock().await;
            *g += 1;
            spin(10_000);
            drop(g);
            r.notify.notify_one();
            i
        }
        3 => {
            // A failure says what the server side saw (a rare reset, seen
            // once in CI and not yet explained, is diagnosed from this).
            let fail = |what: &str, e: std::io::Error| -> ! {
                panic!("echo client {i}: {what}: {e}; server saw: {:?}", server_errors())
            };
            let mut s = tokio::net::TcpStream::connect(r.addr).await.unwrap_or_else(|e| fail("connect", e));
            s.write_all(&i.to_le_bytes()).await.unwrap_or_else(|e| fail("write", e));
            let mut buf = [0u8; 8];
            s.read_exact(&mut buf).await.unwrap_or_else(|e| fail("read", e));
            u64::from_le_bytes(buf)
        }
        4 => i + brx.expect("subscribed").recv().await.unwrap(),
        _ => {
            let child = if (i / KINDS) % 2 == 0 || !r.abort_spinning {
                // Waits forever, holding something with a destructor.
                let flag = Flag(r.unwound.clone());
                (r.spawn)(Box::pin(async move {
                    let _flag = flag;
                    std::future::pending::<()>().await;
                }))
            } else {
                // Computes forever: stopped in the middle of a poll.
                (r.spawn)(Box::pin(async {
                    loop {
                        spin(100_000);
                    }
                }))
            };
            tokio::time::sleep(Duration::from_micros(100)).await;
            (child.abort)();
            assert!(!child.join.await, "an aborted task finished");
            i
        }
    }
}

/// What the echo servers' side saw go wrong (accept errors, and reads or
/// writes that failed other than at the client's end of stream).
static SERVER_ERRORS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn server_error(what: String) {
    SERVER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).push(what);
}

fn server_errors() -> Vec<String> {
    SERVER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

async fn echo_server(spawn: Spawn, listener: tokio::net::TcpListener, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let mut s = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    server_error(format!("accept: {e} ({:?})", e.raw_os_error()));
                    panic!("echo server: accept: {e}");
                }
            },
            _ = &mut stopped => return,
        };
        drop(spawn(Box::pin(async move {
            let mut buf = [0u8; 8];
            let mut served = 0u32;
            loop {
                match s.read_exact(&mut buf).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => {
                        server_error(format!("read after {served} echoes: {e} ({:?})", e.raw_os_error()));
                        break;
                    }
                }
                spin(20_000);
                if let Err(e) = s.write_all(&buf).await {
                    server_error(format!("write after {served} echoes: {e} ({:?})", e.raw_os_error()));
                    break;
                }
                served += 1;
            }
        })));
    }
}

/// A `Write` into a shared buffer, for `tracing` subscribers in tests.
#[derive(Clone, Default)]
pub struct Buffer(pub Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    /// A plain-text subscriber at DEBUG that writes into this buffer.
    pub fn debug_subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        self.subscriber(tracing::Level::DEBUG)
    }

    /// A plain-text subscriber at `level` that writes into this buffer.
    pub fn subscriber(&self, level: tracing::Level) -> impl tracing::Subscriber + Send + Sync + 'static {
        let sink = self.clone();
        tracing_subscriber::fmt().with_max_level(level).with_writer(move || sink.clone()).with_ansi(false).finish()
    }
}
