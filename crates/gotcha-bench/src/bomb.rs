//! Figure 5 analogue: decoding a benign PNG and a decompression bomb with a
//! 10 ms budget, five ways: a direct call; a thread joined with a timeout
//! and then cancelled; a forked child killed at the deadline; a linger
//! launch without isolation; a linger launch with isolation (its own copy
//! of libpng and zlib), cancelled off the critical path by a reaper thread.

use std::ffi::c_void;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linger::{Builder, Exhausted, Linger};

use crate::png::{self, Png};
use crate::progress::Phase;

/// The budget of every way, as in the paper.
pub const TIMEOUT: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Way {
    Direct,
    Thread,
    Fork,
    Linger,
    Isolated,
}

pub const WAYS: [Way; 5] = [Way::Direct, Way::Thread, Way::Fork, Way::Linger, Way::Isolated];

impl Way {
    pub fn label(self) -> &'static str {
        match self {
            Way::Direct => "direct call",
            Way::Thread => "pthread + timed join + cancel",
            Way::Fork => "fork + sigtimedwait + kill",
            Way::Linger => "linger launch, not isolated",
            Way::Isolated => "linger launch, isolated + reaper",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Thread => "thread",
            Way::Fork => "fork",
            Way::Linger => "linger",
            Way::Isolated => "isolated",
        }
    }
}

/// How one call ended, as the caller saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The decode finished (and succeeded) before control came back.
    Completed,
    /// The decode failed (a libpng error).
    Failed,
    /// A linger function was stopped: at the deadline in its own code or a
    /// copy (`deferred: false`), or later, once deferred code returned.
    Stopped { deferred: bool, overrun_ns: u64 },
    /// The child was killed at the deadline.
    Killed,
    /// The timed join ran out and the thread was cancelled: `honoured`
    /// tells whether it ended cancelled or ran to its own end first.
    CancelRequested { honoured: bool },
}

#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub way: Way,
    /// From the start of the call to the caller having control back (for
    /// the linger ways: `launch` returned).
    pub ns: f64,
    pub outcome: Outcome,
    /// After that, the hand-over of the continuation to the reaper
    /// (isolated way only, else 0).
    pub handoff_ns: f64,
}

/// An output buffer, as handed to the code that decodes into it.
#[derive(Clone, Copy)]
struct Out(*mut u8, usize);
// SAFETY: the buffer outlives every decode into it (each way waits for the
// decode to end, or for the function to be stopped for good, before the
// buffer is used again or freed).
unsafe impl Send for Out {}

impl Out {
    fn of(buf: &mut [u8]) -> Out {
        Out(buf.as_mut_ptr(), buf.len())
    }

    /// # Safety
    /// The buffer must be valid for the whole decode.
    unsafe fn decode(self, png: Png) -> bool {
        // SAFETY: the caller's promise.
        unsafe { png::decode(png.data, self.0, self.1) }.is_ok()
    }
}

/// What the reaper measured per cancel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reaped {
    /// Dropping the continuation: the cancel, libset reset included.
    pub drop_ns: f64,
    /// gotcha's own timing of the reset inside it.
    pub reset_ns: f64,
    pub reset_bytes: usize,
}

/// Cancels continuations off the critical path, as the paper's reaper did.
struct Reaper {
    tx: Option<mpsc::Sender<Linger<bool>>>,
    thread: Option<JoinHandle<Vec<Reaped>>>,
}

impl Reaper {
    fn new() -> Reaper {
        let (tx, rx) = mpsc::channel::<Linger<bool>>();
        let thread = std::thread::Builder::new()
            .name("reaper".into())
            .spawn(move || {
                let mut out = Vec::new();
                for l in rx {
                    let t = Instant::now();
                    drop(l);
                    let drop_ns = t.elapsed().as_nanos() as f64;
                    let g = gotcha::stats();
                    out.push(Reaped { drop_ns, reset_ns: g.last_reset_ns as f64, reset_bytes: g.last_reset_bytes });
                }
                out
            })
            .expect("spawn the reaper");
        Reaper { tx: Some(tx), thread: Some(thread) }
    }

    fn send(&self, l: Linger<bool>) {
        self.tx.as_ref().expect("open").send(l).expect("the reaper is alive");
    }

    /// Waits for every cancel sent so far and returns what was measured.
    fn finish(mut self) -> Vec<Reaped> {
        drop(self.tx.take());
        self.thread.take().expect("once").join().expect("the reaper panicked")
    }
}

/// Runs one decode a given way; owns the reaper.
pub struct Runner {
    pub timeout: Duration,
    reaper: Reaper,
    chld: libc::sigset_t,
}

/// Blocks SIGCHLD on the calling thread (and so on threads it starts from
/// now on), so that the fork way can wait for it with `sigtimedwait`.
/// Call it before other threads exist.
pub fn block_sigchld() -> libc::sigset_t {
    // SAFETY: a set we own, initialised by sigemptyset; masks this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

struct Job {
    png: Png,
    out: Out,
}

extern "C" fn decode_thread(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the Job on the creator's stack, which waits in
    // pthread_join until this thread has ended.
    let job = unsafe { &*(arg as *const Job) };
    // SAFETY: the buffer outlives the thread (joined before reuse).
    let ok = unsafe { job.out.decode(job.png) };
    ok as usize as *mut c_void
}

impl Runner {
    /// Starts the reaper. SIGCHLD must already be blocked (see
    /// [`block_sigchld`]) for the fork way to see its children exit.
    pub fn new(timeout: Duration) -> Runner {
        let chld = block_sigchld();
        Runner { timeout, reaper: Reaper::new(), chld }
    }

    /// Decodes `png` into `buf` the given way.
    pub fn run(&self, way: Way, png: Png, buf: &mut [u8]) -> Result<Sample, String> {
        let out = Out::of(buf);
        let mut handoff = Duration::ZERO;
        let (ns, outcome) = match way {
            Way::Direct => {
                let t = Instant::now();
                // SAFETY: `buf` is borrowed for the call.
                let ok = unsafe { out.decode(png) };
                (t.elapsed(), if ok { Outcome::Completed } else { Outcome::Failed })
            }
            Way::Thread => self.thread(png, out)?,
            Way::Fork => self.fork(png, out)?,
            Way::Linger | Way::Isolated => self.launch(way == Way::Isolated, png, out, &mut handoff)?,
        };
        Ok(Sample { way, ns: ns.as_nanos() as f64, outcome, handoff_ns: handoff.as_nanos() as f64 })
    }

    fn thread(&self, png: Png, out: Out) -> Result<(Duration, Outcome), String> {
        let job = Job { png, out };
        let t = Instant::now();
        // SAFETY: plain pthread calls on a thread we create and always join;
        // `job` outlives it (see decode_thread).
        unsafe {
            let mut deadline: libc::timespec = std::mem::zeroed();
            libc::clock_gettime(libc::CLOCK_REALTIME, &mut deadline);
            let ns = deadline.tv_nsec as u64 + self.timeout.as_nanos() as u64;
            deadline.tv_sec += (ns / 1_000_000_000) as libc::time_t;
            deadline.tv_nsec = (ns % 1_000_000_000) as libc::c_long;
            let mut th: libc::pthread_t = 0;
            let r = libc::pthread_create(&mut th, std::ptr::null(), decode_thread, &job as *const Job as *mut c_void);
            if r != 0 {
                return Err(format!("pthread_create: {}", std::io::Error::from_raw_os_error(r)));
            }
            let mut ret: *mut c_void = std::ptr::null_mut();
            let r = libc::pthread_timedjoin_np(th, &mut ret, &deadline);
            let outcome = if r == libc::ETIMEDOUT {
                libc::pthread_cancel(th);
                libc::pthread_join(th, &mut ret);
                // PTHREAD_CANCELED is (void *) -1.
                Outcome::CancelRequested { honoured: ret as usize == usize::MAX }
            } else if r != 0 {
                return Err(format!("pthread_timedjoin_np: {}", std::io::Error::from_raw_os_error(r)));
            } else if ret as usize == 1 {
                Outcome::Completed
            } else {
                Outcome::Failed
            };
            Ok((t.elapsed(), outcome))
        }
    }

    fn fork(&self, png: Png, out: Out) -> Result<(Duration, Outcome), String> {
        let t = Instant::now();
        // SAFETY: the child only decodes into its copy of the buffer and
        // leaves with _exit (no atexit handlers, no stdio flush).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: the child's copy of the buffer is valid until _exit.
            let ok = unsafe { out.decode(png) };
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let until = t + self.timeout;
        let mut status = 0;
        let outcome = loop {
            let left = until.saturating_duration_since(Instant::now());
            let ts = libc::timespec { tv_sec: left.as_secs() as libc::time_t, tv_nsec: left.subsec_nanos() as libc::c_long };
            // SAFETY: waits for a signal of our own blocked set.
            let r = unsafe { libc::sigtimedwait(&self.chld, std::ptr::null_mut(), &ts) };
            if r == libc::SIGCHLD {
                // SAFETY: reaps our own child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
                break if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 { Outcome::Completed } else { Outcome::Failed };
            }
            if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) && !left.is_zero() {
                continue;
            }
            // Out of time. A child that exited but whose SIGCHLD went to a
            // thread that does not block it (a test harness's) counts as done.
            // SAFETY: as above, without blocking.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                break if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 { Outcome::Completed } else { Outcome::Failed };
            }
            // SAFETY: our own child, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            break Outcome::Killed;
        };
        let ns = t.elapsed();
        // A SIGCHLD left pending by a killed child would end the next wait early.
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: as above; returns at once.
        while unsafe { libc::sigtimedwait(&self.chld, std::ptr::null_mut(), &zero) } == libc::SIGCHLD {}
        Ok((ns, outcome))
    }

    fn launch(&self, isolated: bool, png: Png, out: Out, handoff: &mut Duration) -> Result<(Duration, Outcome), String> {
        let f = move || {
            let out = out;
            // SAFETY: the buffer outlives the function: it completes, or is
            // stopped and never resumed before being cancelled.
            unsafe { out.decode(png) }
        };
        // SAFETY (of `isolated` and `reuse_stack_on_cancel`): the decode
        // uses what libpng makes only inside itself, writes plain pixels
        // into the caller's buffer, pins nothing and registers no stack
        // address anywhere.
        let b = unsafe { Builder::new().reuse_stack_on_cancel(true) };
        let b = if isolated { unsafe { b.isolated(true) }.when_no_libset(Exhausted::Wait(Duration::from_secs(10))) } else { b };
        let t = Instant::now();
        let mut l = b.launch(f, self.timeout).map_err(|e| format!("launch: {e}"))?;
        let returned = Instant::now();
        let outcome = match &l {
            Linger::Completion(true) => Outcome::Completed,
            Linger::Completion(false) | Linger::Poison => Outcome::Failed,
            Linger::Continuation(_) => {
                let p = linger::last_preemption().unwrap_or_default();
                Outcome::Stopped { deferred: p.deferred, overrun_ns: p.overrun_ns }
            }
        };
        if isolated {
            if l.is_continuation() {
                self.reaper.send(l);
            }
            *handoff = returned.elapsed();
            return Ok((returned - t, outcome));
        }
        let ns = t.elapsed();
        // Not isolated: the decode is (nearly) over once it could be
        // stopped; let it finish rather than abandon it.
        while l.is_continuation() {
            linger::resume(&mut l, Duration::MAX).map_err(|e| format!("resume: {e}"))?;
        }
        Ok((ns, outcome))
    }

    /// Waits for the reaper's pending cancels; returns what it measured.
    pub fn finish(self) -> Vec<Reaped> {
        self.reaper.finish()
    }
}

/// Resident set size of this process, in KiB.
pub fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64 / 1024
}

/// One reading of the process's memory during the bomb loop.
#[derive(Clone, Copy, Debug)]
pub struct RssPoint {
    /// Isolated bomb decodes (each cancelled) so far.
    pub iteration: usize,
    pub rss_kib: u64,
    /// Bytes of stacks linger abandoned (cancelled where unwinding is not
    /// defined: their live part stays mapped), as linger counts them.
    pub abandoned_kib: u64,
    /// Memory mappings of the process.
    pub maps: usize,
    /// The 1-minute load average then (the machine is shared).
    pub load1: f64,
}

fn rss_point(iteration: usize) -> RssPoint {
    let maps = std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count()).unwrap_or(0);
    let load1 = crate::machine::loadavg().split_whitespace().next().and_then(|l| l.parse().ok()).unwrap_or(f64::NAN);
    RssPoint { iteration, rss_kib: rss_kib(), abandoned_kib: linger::stack::abandoned_stacks().1 as u64 / 1024, maps, load1 }
}

/// How many iterations, and how much else to do.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Benign decodes per way (all five ways, in rotation).
    pub benign: usize,
    /// Bomb decodes for the isolated and fork ways (alternating).
    pub bomb: usize,
    /// Bomb decodes for the ways that run it to its end.
    pub bomb_slow: usize,
    /// RSS is read every this many isolated bomb decodes.
    pub rss_every: usize,
    /// Unrecorded calls per way first.
    pub warmup: usize,
    pub quiet: bool,
}

/// Everything the decompression benchmark measured.
pub struct Results {
    pub plan: Plan,
    pub benign: Png,
    pub bomb: Png,
    pub benign_samples: Vec<Sample>,
    pub bomb_samples: Vec<Sample>,
    pub rss: Vec<RssPoint>,
    pub reaped: Vec<Reaped>,
    /// Pixels of each in-process way against the direct decode.
    pub identical: Vec<(Way, bool)>,
    /// gotcha's counters over the bomb loop (resets, blocks freed).
    pub resets: u64,
    pub blocks_freed: u64,
    /// Libsets in use by the end.
    pub libsets: usize,
    pub rss_before_slow_kib: u64,
}

/// Decodes `png` once directly and once each other in-process way with no
/// time limit that matters; true where the pixels match the direct decode.
pub fn check_pixels(runner: &Runner, png: Png) -> Result<Vec<(Way, bool)>, String> {
    let mut want = vec![0u8; png.rgb_bytes()];
    runner.run(Way::Direct, png, &mut want)?;
    let mut out = Vec::new();
    for way in [Way::Thread, Way::Linger, Way::Isolated] {
        let mut got = vec![0x55u8; png.rgb_bytes()];
        let s = runner.run(way, png, &mut got)?;
        out.push((way, s.outcome == Outcome::Completed && got == want));
    }
    Ok(out)
}

/// Runs the whole benchmark (the images are made by the caller).
pub fn run(plan: Plan, benign: Png, bomb: Png) -> Result<Results, String> {
    let generous = Runner::new(Duration::from_secs(60));
    let identical = check_pixels(&generous, benign)?;
    generous.finish();

    let runner = Runner::new(TIMEOUT);
    // Benign: every way in rotation, each with its own buffer.
    let mut bufs: Vec<Vec<u8>> = WAYS.iter().map(|_| vec![0u8; benign.rgb_bytes()]).collect();
    let mut benign_samples = Vec::with_capacity(plan.benign * WAYS.len());
    {
        let mut ph = Phase::new("benign image, 5 ways", (plan.benign + plan.warmup) as u64, plan.quiet);
        for i in 0..plan.benign + plan.warmup {
            for k in 0..WAYS.len() {
                let w = (i + k) % WAYS.len();
                let s = runner.run(WAYS[w], benign, &mut bufs[w])?;
                if i >= plan.warmup {
                    benign_samples.push(s);
                }
            }
            ph.inc(1);
        }
    }
    drop(bufs);

    // Bomb, part 1: the isolated and fork ways alternate; RSS is read as
    // the cancels accumulate.
    let mut iso = vec![0u8; bomb.rgb_bytes()];
    let mut frk = vec![0u8; bomb.rgb_bytes()];
    let mut bomb_samples = Vec::new();
    for i in 0..plan.warmup {
        runner.run(Way::Isolated, bomb, &mut iso)?;
        if i < 3 {
            runner.run(Way::Fork, bomb, &mut frk)?;
        }
    }
    let g0 = gotcha::stats();
    let mut rss = vec![rss_point(0)];
    {
        let mut ph = Phase::new("bomb: isolated and fork", plan.bomb as u64, plan.quiet);
        for i in 0..plan.bomb {
            let order = if i % 2 == 0 { [Way::Isolated, Way::Fork] } else { [Way::Fork, Way::Isolated] };
            for way in order {
                let buf = if way == Way::Isolated { &mut iso } else { &mut frk };
                bomb_samples.push(runner.run(way, bomb, buf)?);
            }
            if (i + 1) % plan.rss_every == 0 {
                rss.push(rss_point(i + 1));
            }
            ph.inc(1);
        }
    }
    let reaped = runner.finish();
    let g1 = gotcha::stats();
    let rss_before_slow_kib = rss_kib();
    drop((iso, frk));

    // Bomb, part 2: the ways that run it to its end, in rotation (after
    // part 1, so that their large resident buffers do not slow fork down).
    let runner = Runner::new(TIMEOUT);
    let slow = [Way::Direct, Way::Thread, Way::Linger];
    let mut bufs: Vec<Vec<u8>> = slow.iter().map(|_| vec![0u8; bomb.rgb_bytes()]).collect();
    {
        let mut ph = Phase::new("bomb: direct, thread, linger", plan.bomb_slow as u64 + 1, plan.quiet);
        for i in 0..=plan.bomb_slow {
            for k in 0..slow.len() {
                let w = (i + k) % slow.len();
                let s = runner.run(slow[w], bomb, &mut bufs[w])?;
                if i > 0 {
                    bomb_samples.push(s); // the first round warms up
                }
            }
            ph.inc(1);
        }
    }
    runner.finish();
    Ok(Results {
        plan,
        benign,
        bomb,
        benign_samples,
        bomb_samples,
        rss,
        reaped,
        identical,
        resets: g1.resets - g0.resets,
        blocks_freed: g1.blocks_reclaimed - g0.blocks_reclaimed,
        libsets: g1.libsets,
        rss_before_slow_kib,
    })
}
