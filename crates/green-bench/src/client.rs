//! The load generator: one thread, an epoll loop (mio) over N keep-alive
//! connections, so that it can hold 10,000 of them on one core and stay
//! cheaper per request than the servers it loads (a write and a read per
//! request, nothing else).
//!
//! - Closed loop (the seed's set-up, as wrk): every connection sends its
//!   next request when the previous one is answered.
//! - Open loop: request i is due at `start + i / rate` on connection
//!   `i mod N`; a connection still waiting for an answer queues it, and its
//!   latency counts from when it was due (no coordinated omission).
//!
//! Long requests (`GET /long`) are mixed in by `bench_util::table`. The run
//! connects every connection first (not timed), then runs a warm-up, then
//! the measured window; requests sent (or due) in the window are recorded,
//! and after it the loop waits for their answers for at most the timeout.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::http;

/// How requests are sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    Closed,
    Open { rate: f64 },
}

/// One run of the load generator.
#[derive(Clone, Debug)]
pub struct Plan {
    pub conns: usize,
    pub load: Load,
    /// Long requests per 1000.
    pub permille: u32,
    pub warmup: Duration,
    pub measure: Duration,
    /// A request answered later than this (or not at all) is a timeout.
    pub timeout: Duration,
    /// The server's process, to read its CPU time, memory and threads.
    pub server_pid: Option<u32>,
    /// Stop after this many answers in the window (tests).
    pub max_answers: Option<u64>,
}

/// What one run measured.
pub struct Outcome {
    /// Latency of short requests recorded, microseconds.
    pub short: Histogram<u64>,
    /// Latency of long requests recorded, microseconds.
    pub long: Histogram<u64>,
    /// Answers received in the window.
    pub answered: u64,
    /// Answers per second in the window.
    pub throughput: f64,
    /// Recorded requests slower than the timeout, or never answered.
    pub timeouts: u64,
    /// Failed connects; connections reset, closed, or answering with a
    /// malformed or non-200 answer (each counted once, with the requests it
    /// had in flight); and, in the open loop, recorded requests due on a
    /// connection that had failed.
    pub errors: u64,
    pub connected: usize,
    pub connect_time: Duration,
    /// Share of a CPU this thread used during the window.
    pub client_cpu: f64,
    /// Share of a CPU the server used during the window.
    pub server_cpu: Option<f64>,
    /// Share of each CPU that was busy during the window (user, system,
    /// interrupts and softirqs, whoever ran: the loopback's TCP work is
    /// softirq time, charged to neither process).
    pub cores_busy: Vec<f64>,
    /// The server's resident memory and threads at the window's end.
    pub server_rss_kib: Option<u64>,
    pub server_threads: Option<u64>,
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

const TIMER: Token = Token(usize::MAX);
/// Connects in flight at once while setting up.
const CONNECTING: usize = 256;
/// Longest the set-up may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(60);

/// A request on the wire, or waiting for its connection.
#[derive(Clone, Copy)]
struct Req {
    /// Latency counts from here (sent, or due in the open loop).
    from: Instant,
    long: bool,
    record: bool,
}

struct Conn {
    s: TcpStream,
    connected: bool,
    alive: bool,
    /// Bytes of an answer read so far.
    rbuf: Vec<u8>,
    /// What is left of the request being written.
    wleft: &'static [u8],
    out: Option<Req>,
    queue: VecDeque<Req>,
}

struct Engine {
    poll: Poll,
    conns: Vec<Conn>,
    short: Histogram<u64>,
    long: Histogram<u64>,
    window: (Instant, Instant),
    answered: u64,
    timeouts: u64,
    errors: u64,
    timeout: Duration,
    /// Recorded requests not answered yet.
    outstanding: u64,
    chunk: Box<[u8; 4096]>,
}

impl Engine {
    fn fail(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.alive {
            return;
        }
        c.alive = false;
        self.errors += 1;
        let lost = c.out.take().into_iter().chain(c.queue.drain(..)).filter(|r| r.record).count() as u64;
        self.outstanding -= lost;
        let _ = self.poll.registry().deregister(&mut c.s);
    }

    /// Puts `r` on connection `i` now, or behind its current request.
    fn submit(&mut self, i: usize, r: Req) {
        if r.record {
            self.outstanding += 1;
        }
        let c = &mut self.conns[i];
        if !c.alive {
            return self.lost(r);
        }
        if c.out.is_some() {
            c.queue.push_back(r);
            return;
        }
        self.send(i, r);
    }

    /// A request due on a connection that has failed: an error.
    fn lost(&mut self, r: Req) {
        if r.record {
            self.outstanding -= 1;
            self.errors += 1;
        }
    }

    fn send(&mut self, i: usize, r: Req) {
        let c = &mut self.conns[i];
        c.out = Some(r);
        c.wleft = http::request(r.long);
        self.write(i);
    }

    fn write(&mut self, i: usize) {
        let c = &mut self.conns[i];
        while !c.wleft.is_empty() {
            match c.s.write(c.wleft) {
                Ok(0) => return self.fail(i),
                Ok(n) => c.wleft = &c.wleft[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.fail(i),
            }
        }
    }

    /// Reads what connection `i` has; the request it answered, if one was.
    fn read(&mut self, i: usize) -> Option<Req> {
        loop {
            let c = &mut self.conns[i];
            if !c.alive {
                return None;
            }
            let n = match c.s.read(&mut self.chunk[..]) {
                Ok(0) => {
                    self.fail(i);
                    return None;
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.fail(i);
                    return None;
                }
            };
            // Most answers come whole in one read: parsed where they are.
            let (parsed, have) = if c.rbuf.is_empty() {
                (http::parse_response(&self.chunk[..n]), n)
            } else {
                c.rbuf.extend_from_slice(&self.chunk[..n]);
                (http::parse_response(&c.rbuf), c.rbuf.len())
            };
            match parsed {
                Ok(Some((true, used))) if used == have => {
                    let Some(r) = c.out.take() else {
                        self.fail(i);
                        return None;
                    };
                    c.rbuf.clear();
                    self.complete(r, Instant::now());
                    // Nothing more can come before the next request.
                    return Some(r);
                }
                Ok(None) => {
                    if c.rbuf.is_empty() {
                        c.rbuf.extend_from_slice(&self.chunk[..n]);
                    }
                }
                // Not a 200, malformed, or more than was asked for.
                _ => {
                    self.fail(i);
                    return None;
                }
            }
        }
    }

    fn complete(&mut self, r: Req, now: Instant) {
        if now >= self.window.0 && now < self.window.1 {
            self.answered += 1;
        }
        if r.record {
            self.outstanding -= 1;
            let d = now.saturating_duration_since(r.from);
            if d > self.timeout {
                self.timeouts += 1;
            }
            let us = (d.as_micros() as u64).max(1);
            let h = if r.long { &mut self.long } else { &mut self.short };
            let _ = h.record(us.min(h.high()));
        }
    }
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Per CPU: (busy, total) clock ticks since boot, from /proc/stat.
fn cpu_lines() -> Vec<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
            let total: u64 = v.iter().take(8).sum();
            // idle and iowait are not busy.
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (total - idle, total)
        })
        .collect()
}

/// A process's CPU time (user + system), from /proc.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
}

/// A field of /proc/PID/status (`VmRSS`, `Threads`...), its number.
pub fn status_field(pid: &str, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok())
}

fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: a new descriptor, ours alone.
    let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms `t` to fire `d` from now (at least a nanosecond: zero disarms).
fn arm(t: &OwnedFd, d: Duration) {
    let d = d.max(Duration::from_nanos(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: d.as_secs() as i64, tv_nsec: d.subsec_nanos() as i64 },
    };
    // SAFETY: `t` is our timerfd; `spec` is valid.
    unsafe { libc::timerfd_settime(t.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
}

/// Resets instead of the FIN handshake, so that no connection of a run is
/// left in TIME_WAIT.
fn close_with_reset(s: &TcpStream) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt reads the linger struct of the given size.
    unsafe { libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, (&l as *const libc::linger).cast(), std::mem::size_of::<libc::linger>() as u32) };
}

/// Opens `n` connections to `addr`; the ones that failed are not alive.
fn connect_all(poll: &mut Poll, addr: SocketAddr, n: usize) -> Vec<Conn> {
    let mut conns: Vec<Conn> = Vec::with_capacity(n);
    let mut events = Events::with_capacity(1024);
    let (mut pending, mut done) = (0usize, 0usize);
    let start = Instant::now();
    while done < n && start.elapsed() < CONNECT_LIMIT {
        while pending < CONNECTING && conns.len() < n {
            let i = conns.len();
            match TcpStream::connect(addr) {
                Ok(mut s) => {
                    let ok = poll.registry().register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE).is_ok();
                    conns.push(Conn { s, connected: false, alive: ok, rbuf: Vec::new(), wleft: &[], out: None, queue: VecDeque::new() });
                    if ok {
                        pending += 1;
                    } else {
                        done += 1;
                    }
                }
                Err(e) => {
                    eprintln!("green-bench client: connect: {e}");
                    return conns;
                }
            }
        }
        if poll.poll(&mut events, Some(Duration::from_millis(100))).is_err() {
            continue;
        }
        for ev in events.iter() {
            let c = &mut conns[ev.token().0];
            if c.connected || !c.alive {
                continue;
            }
            match (c.s.take_error(), c.s.peer_addr()) {
                (Ok(None), Ok(_)) => c.connected = true,
                (Ok(None), Err(e)) if e.kind() == ErrorKind::NotConnected => continue,
                _ => c.alive = false,
            }
            let _ = c.s.set_nodelay(true);
            pending -= 1;
            done += 1;
        }
    }
    for c in &mut conns {
        if !c.connected && c.alive {
            c.alive = false;
            let _ = poll.registry().deregister(&mut c.s);
        }
    }
    conns
}

/// Runs `plan` against the server at `addr`.
pub fn run(addr: SocketAddr, plan: &Plan) -> io::Result<Outcome> {
    let mut poll = Poll::new()?;
    let t_connect = Instant::now();
    let conns = connect_all(&mut poll, addr, plan.conns);
    let connect_time = t_connect.elapsed();
    let alive: Vec<usize> = (0..conns.len()).filter(|&i| conns[i].alive).collect();
    let connected = alive.len();
    let failed_connects = (plan.conns - connected) as u64;
    let timer = timerfd()?;
    poll.registry().register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)?;
    let t0 = Instant::now();
    let w0 = t0 + plan.warmup;
    let w1 = w0 + plan.measure;
    let mut e = Engine {
        poll,
        conns,
        short: histogram(),
        long: histogram(),
        window: (w0, w1),
        answered: 0,
        timeouts: 0,
        errors: failed_connects,
        timeout: plan.timeout,
        outstanding: 0,
        chunk: Box::new([0; 4096]),
    };
    let table = bench_util::table(plan.permille);
    let long_at = |slot: u64| table[(slot % 1000) as usize];
    let closed = plan.load == Load::Closed;
    // The closed loop's requests take the table's slots in turn.
    let mut slot = 0u64;
    if closed {
        for &i in &alive {
            slot += 1;
            e.submit(i, Req { from: t0, long: long_at(slot), record: t0 >= w0 });
        }
    }
    let rate = match plan.load {
        Load::Open { rate } => rate,
        Load::Closed => 0.0,
    };
    let due = |i: u64| t0 + Duration::from_secs_f64(i as f64 / rate);
    let mut due_i: u64 = 0;
    let mut events = Events::with_capacity(4096);
    let (mut cpu0, mut cpu1) = (None, None);
    let (mut cores0, mut cores1) = (Vec::new(), Vec::new());
    let (mut srv0, mut srv1) = (None, None);
    let (mut rss, mut threads) = (None, None);
    let pid = plan.server_pid.map(|p| p.to_string());
    let drain_end = w1 + plan.timeout;
    let mut sending = true;
    loop {
        let now = Instant::now();
        if cpu0.is_none() && now >= w0 {
            cpu0 = Some(thread_cpu());
            srv0 = plan.server_pid.and_then(process_cpu);
            cores0 = cpu_lines();
        }
        if sending && (now >= w1 || plan.max_answers.is_some_and(|m| e.answered >= m)) {
            sending = false;
            e.window.1 = now;
            cpu1 = Some(thread_cpu());
            srv1 = plan.server_pid.and_then(process_cpu);
            cores1 = cpu_lines();
            rss = pid.as_deref().and_then(|p| status_field(p, "VmRSS"));
            threads = pid.as_deref().and_then(|p| status_field(p, "Threads"));
        }
        if !sending && (e.outstanding == 0 || now >= drain_end) {
            break;
        }
        if sending && !closed && !alive.is_empty() {
            while due(due_i) <= now {
                let d = due(due_i);
                e.submit(alive[(due_i % alive.len() as u64) as usize], Req { from: d, long: long_at(due_i), record: d >= w0 });
                due_i += 1;
            }
            arm(&timer, due(due_i).saturating_duration_since(Instant::now()));
        }
        let boundary = [w0, w1, drain_end].into_iter().filter(|&b| b > now).min().unwrap_or(now);
        e.poll.poll(&mut events, Some(boundary.saturating_duration_since(now) + Duration::from_millis(1)))?;
        for ev in events.iter() {
            if ev.token() == TIMER {
                let mut b = [0u8; 8];
                // SAFETY: reads at most 8 bytes into `b` from our timerfd.
                unsafe { libc::read(timer.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
                continue;
            }
            let i = ev.token().0;
            if ev.is_writable() && !e.conns[i].wleft.is_empty() {
                e.write(i);
            }
            if !(ev.is_readable() || ev.is_read_closed() || ev.is_error()) || e.read(i).is_none() {
                continue;
            }
            // Answered: the connection's next request.
            if let Some(r) = e.conns[i].queue.pop_front() {
                e.send(i, r);
            } else if closed && sending {
                slot += 1;
                let now = Instant::now();
                e.submit(i, Req { from: now, long: long_at(slot), record: now >= w0 });
            }
        }
    }
    // Recorded requests never answered.
    e.timeouts += e.outstanding;
    for c in &e.conns {
        close_with_reset(&c.s);
    }
    let window = e.window.1.saturating_duration_since(w0).max(Duration::from_millis(1));
    let share = |a: Option<Duration>, b: Option<Duration>| Some((b? - a?).as_secs_f64() / window.as_secs_f64());
    Ok(Outcome {
        throughput: e.answered as f64 / window.as_secs_f64(),
        short: e.short,
        long: e.long,
        answered: e.answered,
        timeouts: e.timeouts,
        errors: e.errors,
        connected,
        connect_time,
        client_cpu: share(cpu0, cpu1).unwrap_or(f64::NAN),
        server_cpu: share(srv0, srv1),
        cores_busy: cores0.iter().zip(&cores1).map(|(a, b)| (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64).collect(),
        server_rss_kib: rss,
        server_threads: threads,
    })
}
