//! The web servers of seed 002's benchmark, each answering the requests of
//! `http.rs` with the same work:
//!
//! - `green`: a green thread (`turquoise::thread`) per connection, blocking
//!   `std::net` code, one worker;
//! - `pthread`: an OS thread per connection, the same blocking code;
//! - `epoll`: one thread, an event loop over mio (epoll, edge-triggered;
//!   a short read is taken to have emptied the socket, as tokio does);
//! - `tokio`: tokio's current-thread runtime, a task per connection;
//! - `go`: a goroutine per connection, `GOMAXPROCS=1` (`go/main.go`, run
//!   by `main.rs`, not here).

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpListener;
use std::os::fd::FromRawFd;
use std::time::Duration;

use crate::http::{serve_blocking, Handler, Next, RequestBuf};

/// A server of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Green,
    /// Green threads with whole slices: no granularity, each run is
    /// stopped at its slice only (the default before the runtime looked
    /// for waiting work, `turquoise::Builder::granularity`).
    GreenWhole,
    /// Green threads with [`FINE_SLICE_US`] slices: what a server that
    /// cares for latency more than throughput would choose (before the
    /// granularity).
    GreenFine,
    Pthread,
    Epoll,
    Tokio,
    Go,
}

impl Kind {
    pub const ALL: [Kind; 7] = [Kind::Green, Kind::GreenWhole, Kind::GreenFine, Kind::Epoll, Kind::Tokio, Kind::Go, Kind::Pthread];
    /// The servers written in Rust (run by [`run`]).
    pub const RUST: [Kind; 6] = [Kind::Green, Kind::GreenWhole, Kind::GreenFine, Kind::Pthread, Kind::Epoll, Kind::Tokio];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Green => "green",
            Kind::GreenWhole => "green-whole",
            Kind::GreenFine => "green-fine",
            Kind::Pthread => "pthread",
            Kind::Epoll => "epoll",
            Kind::Tokio => "tokio",
            Kind::Go => "go",
        }
    }

    /// The name in tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Green => "green threads",
            Kind::GreenWhole => "green threads, whole 2 ms slices",
            Kind::GreenFine => "green threads, 0.2 ms slices",
            Kind::Pthread => "pthreads",
            Kind::Epoll => "epoll loop",
            Kind::Tokio => "tokio",
            Kind::Go => "Go",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// The slice of [`Kind::GreenFine`], in microseconds. Head-of-line blocking
/// needs short slices: a short request that arrives while a long one runs
/// waits for the slice in progress. Each slice of busy time costs a timer
/// signal, about 20 us of this VM's time (arming a timer 150 us ahead costs
/// 8 us here, 1 ms ahead 2.6 us, 3 ms ahead 0.7 us), so 0.2 ms slices cost
/// about a tenth of the server's throughput where 2 ms cost a hundredth.
pub const FINE_SLICE_US: u64 = 200;

/// How the servers are set up.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The green threads' slice.
    pub slice: Duration,
    /// The work of a request.
    pub handler: Handler,
}

/// Stack of a pthread per connection (its frames need a few KiB).
pub const PTHREAD_STACK: usize = 64 << 10;

/// A listening socket on 127.0.0.1:`port` (0: any) with room for 10,000
/// connections arriving at once (std's `bind` listens with a backlog of
/// 128; the kernel caps ours at `net.core.somaxconn`).
pub fn listener(port: u16) -> io::Result<TcpListener> {
    // SAFETY: plain system calls on a descriptor we create and own; the
    // sockaddr_in is fully initialised and its size passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let l = TcpListener::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&one as *const libc::c_int).cast(), 4);
        let mut a: libc::sockaddr_in = std::mem::zeroed();
        a.sin_family = libc::AF_INET as libc::sa_family_t;
        a.sin_port = port.to_be();
        a.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        if libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), std::mem::size_of::<libc::sockaddr_in>() as u32) != 0
            || libc::listen(fd, 65535) != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(l)
    }
}

/// Serves on `l` until the process ends (or the listener fails).
pub fn run(kind: Kind, l: TcpListener, o: &Options) -> io::Result<()> {
    match kind {
        Kind::Green | Kind::GreenFine => green(l, o, None),
        Kind::GreenWhole => green(l, o, Some(Duration::ZERO)),
        Kind::Pthread => pthread(l, o),
        Kind::Epoll => epoll(l, o),
        Kind::Tokio => tokio(l, o),
        Kind::Go => Err(io::Error::new(ErrorKind::InvalidInput, "the Go server is go/main.go")),
    }
}

/// An accept that failed: out of descriptors (or the like) is waited out,
/// as a real server would, rather than spun on.
fn accept_failed(e: &io::Error) {
    eprintln!("green-bench server: accept: {e}");
    std::thread::sleep(Duration::from_millis(10));
}

/// `granularity`: the runtime's default if `None`.
fn green(l: TcpListener, o: &Options, granularity: Option<Duration>) -> io::Result<()> {
    let mut b = turquoise::Builder::new();
    b.worker_threads(1).slice(o.slice).enable_all();
    if let Some(g) = granularity {
        b.granularity(g);
    }
    let rt = b.build()?;
    let h = o.handler;
    let acceptor = turquoise::thread::Builder::new().name("acceptor").spawn_on(rt.handle(), move || {
        for c in l.incoming() {
            match c {
                Ok(c) => {
                    let _ = c.set_nodelay(true);
                    if let Err(e) = turquoise::thread::Builder::new().spawn(move || serve_blocking(c, &h)) {
                        eprintln!("green-bench server: spawn: {e}");
                    }
                }
                // Parks the acceptor (a green thread), not the worker.
                Err(e) => accept_failed(&e),
            }
        }
    })?;
    // Says when blocking calls blocked the worker instead of parking (the
    // park hook could not register: out of descriptors, say).
    turquoise::thread::Builder::new().name("blocked").spawn_on(rt.handle(), || {
        let mut seen = 0;
        loop {
            turquoise::thread::sleep(Duration::from_millis(200));
            let blocked = linger::park::counters().blocked;
            if blocked > seen {
                eprintln!("{BLOCKED}{}", blocked - seen);
                seen = blocked;
            }
        }
    })?;
    acceptor.join().map_err(|e| io::Error::other(format!("acceptor: {e:?}")))
}

/// What the green server prints (then a count) when calls that should
/// have parked blocked its worker.
pub const BLOCKED: &str = "green-bench server: calls that blocked the worker: ";

fn pthread(l: TcpListener, o: &Options) -> io::Result<()> {
    let h = o.handler;
    for c in l.incoming() {
        match c {
            Ok(c) => {
                let _ = c.set_nodelay(true);
                if let Err(e) = std::thread::Builder::new().stack_size(PTHREAD_STACK).spawn(move || serve_blocking(c, &h)) {
                    eprintln!("green-bench server: spawn: {e}");
                }
            }
            Err(e) => accept_failed(&e),
        }
    }
    Ok(())
}

async fn tokio_connection(mut s: tokio::net::TcpStream, h: Handler) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = s.set_nodelay(true);
    let mut rb = RequestBuf::default();
    let mut out = Vec::with_capacity(256);
    loop {
        let next = rb.answer(&h, &mut out);
        if !out.is_empty() && s.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
        if next == Next::Close {
            return;
        }
        match s.read(rb.spare()).await {
            Ok(0) | Err(_) => return,
            Ok(n) => rb.filled(n),
        }
    }
}

fn tokio(l: TcpListener, o: &Options) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let h = o.handler;
    rt.block_on(async move {
        l.set_nonblocking(true)?;
        let l = tokio::net::TcpListener::from_std(l)?;
        loop {
            match l.accept().await {
                Ok((s, _)) => drop(tokio::spawn(tokio_connection(s, h))),
                Err(e) => {
                    eprintln!("green-bench server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    })
}

/// A connection of the event loop.
struct Conn {
    s: mio::net::TcpStream,
    rb: RequestBuf,
    /// Answers not sent yet (the socket's buffer was full).
    out: Vec<u8>,
    /// Close once `out` is sent.
    closing: bool,
}

/// Unsent answers beyond which the loop stops reading a connection.
const OUT_CAP: usize = 64 << 10;

impl Conn {
    /// Sends what is pending; false if the connection is dead.
    fn flush(&mut self) -> bool {
        let mut sent = 0;
        while sent < self.out.len() {
            match self.s.write(&self.out[sent..]) {
                Ok(0) => return false,
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.out.drain(..sent);
        true
    }

    /// Reads, answers and sends until the socket would block; false when
    /// the connection is over.
    fn drive(&mut self, h: &Handler) -> bool {
        if !self.flush() {
            return false;
        }
        while !self.closing && self.out.len() < OUT_CAP {
            let room = self.rb.spare().len();
            match self.s.read(self.rb.spare()) {
                Ok(0) => return false,
                Ok(n) => {
                    self.rb.filled(n);
                    self.closing = self.rb.answer(h, &mut self.out) == Next::Close;
                    if !self.flush() {
                        return false;
                    }
                    // A short read emptied the socket: more data will come
                    // with an event of its own (as tokio does, this saves
                    // the read that would fail with EAGAIN).
                    if n < room {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        !(self.closing && self.out.is_empty())
    }
}

fn epoll(l: TcpListener, o: &Options) -> io::Result<()> {
    use mio::{Events, Interest, Poll, Token};
    const LISTENER: Token = Token(usize::MAX);
    let h = o.handler;
    l.set_nonblocking(true)?;
    let mut l = mio::net::TcpListener::from_std(l);
    let mut poll = Poll::new()?;
    poll.registry().register(&mut l, LISTENER, Interest::READABLE)?;
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut events = Events::with_capacity(1024);
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            let _ = s.set_nodelay(true);
                            let i = free.pop().unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            poll.registry().register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)?;
                            conns[i] = Some(Conn { s, rb: RequestBuf::default(), out: Vec::new(), closing: false });
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => {
                            accept_failed(&e);
                            break;
                        }
                    }
                }
                continue;
            }
            let i = ev.token().0;
            let Some(c) = conns.get_mut(i).and_then(Option::as_mut) else { continue };
            if !c.drive(&h) {
                if let Some(mut c) = conns[i].take() {
                    let _ = poll.registry().deregister(&mut c.s);
                }
                free.push(i);
            }
        }
    }
}
