//! Process-wide configuration: builder plus environment variables.
//!
//! The configuration is frozen the first time the runtime starts (first launch),
//! because the signal number and handler are process-wide.

use std::sync::OnceLock;
use std::time::Duration;

use crate::base::parse::{parse_duration_in, parse_flag, parse_signal, parse_size};
use crate::Error;

/// Default usable stack size of a preemptible function. Large enough for a
/// ~12 KiB AVX-512 signal frame plus ordinary Rust/C code; memory is committed
/// lazily so only touched pages count.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;
/// Smallest accepted stack: the signal frame alone can take ~12 KiB here.
pub const MIN_STACK_SIZE: usize = 64 * 1024;

/// Runtime configuration. Build one with [`Config::from_env`] (defaults plus
/// `LINGER_*` variables), adjust it, and [`Config::install`] it before the first
/// launch. Without an explicit install the environment is read at first launch.
///
/// The variables it reads (`LINGER_SIGNAL`, `LINGER_STACK_SIZE`,
/// `LINGER_RETRY_US`, `LINGER_PREEMPTIBLE_LIBS`, `LINGER_DEFER_SYMBOLS`,
/// `LINGER_RETURN_TRAP`, `LINGER_TIMEKEEPING`, `LINGER_FD_MODES`), what each
/// accepts and its default: the project's `docs/configuration.md`, the one
/// reference of every variable. A bad value is an [`Error::Config`] naming
/// it, at the first launch.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) signal: i32,
    pub(crate) stack_size: usize,
    pub(crate) retry: Duration,
    pub(crate) preemptible_libs: Vec<String>,
    pub(crate) defer_symbols: Vec<String>,
    pub(crate) return_traps: bool,
    pub(crate) timekeeping: Timekeeping,
}

/// How deadlines reach the threads that run preemptible functions (see
/// "How a deadline is delivered" in `docs/safety.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timekeeping {
    /// Each thread owns a one-shot POSIX timer armed for its earliest
    /// pending deadline and disarmed lazily: a thread that launches
    /// continuously receives about one signal per slice, even when no
    /// function ever runs long.
    #[default]
    Timer,
    /// One monitor thread per process watches the deadline each thread
    /// publishes at every launch and resume, and signals only threads whose
    /// running function is overdue (like Go's `sysmon`). Threads keep their
    /// timer for retries of deferred deadlines only.
    Monitor,
}

impl Timekeeping {
    /// Parses `timer` or `monitor` (the values of `LINGER_TIMEKEEPING`).
    pub fn parse(s: &str) -> Result<Timekeeping, Error> {
        match s.trim() {
            "timer" => Ok(Timekeeping::Timer),
            "monitor" => Ok(Timekeeping::Monitor),
            v => Err(Error::Config(format!("LINGER_TIMEKEEPING: {v:?} is neither \"timer\" nor \"monitor\""))),
        }
    }
}

static CONFIG: OnceLock<Result<Config, String>> = OnceLock::new();

impl Default for Config {
    fn default() -> Self {
        Config {
            signal: libc::SIGRTMAX() - 3,
            stack_size: DEFAULT_STACK_SIZE,
            retry: Duration::from_micros(10),
            preemptible_libs: Vec::new(),
            defer_symbols: Vec::new(),
            return_traps: true,
            timekeeping: Timekeeping::Timer,
        }
    }
}

fn list(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect()
}

impl Config {
    /// Defaults overridden by the `LINGER_*` environment variables.
    pub fn from_env() -> Result<Config, Error> {
        let mut c = Config::default();
        let bad = |name: &str, e: String| Error::Config(format!("{name}: {e}"));
        if let Some(v) = crate::base::glibc::var("LINGER_SIGNAL") {
            c = c.signal(parse_signal(&v).map_err(|e| bad("LINGER_SIGNAL", e))?)?;
        }
        if let Some(v) = crate::base::glibc::var("LINGER_STACK_SIZE") {
            c = c.stack_size(parse_size(&v).map_err(|e| bad("LINGER_STACK_SIZE", e))?)?;
        }
        if let Some(v) = crate::base::glibc::var("LINGER_RETRY_US") {
            let d = parse_duration_in(&v, Some(Duration::from_micros(1)), false).map_err(|e| bad("LINGER_RETRY_US", e))?;
            c = c.retry(d);
        }
        if let Some(v) = crate::base::glibc::var("LINGER_PREEMPTIBLE_LIBS") {
            c.preemptible_libs = list(&v);
        }
        if let Some(v) = crate::base::glibc::var("LINGER_DEFER_SYMBOLS") {
            c.defer_symbols = list(&v);
        }
        if let Some(v) = crate::base::glibc::var("LINGER_RETURN_TRAP") {
            c.return_traps = parse_flag(&v).map_err(|e| bad("LINGER_RETURN_TRAP", e))?;
        }
        // Read on its own where it is used (`interpose/fd_modes.rs`), at
        // the first park; a bad value is refused here, at the first launch.
        if let Some(v) = crate::base::glibc::var("LINGER_FD_MODES") {
            parse_flag(&v).map_err(|e| bad("LINGER_FD_MODES", e))?;
        }
        if let Some(v) = crate::base::glibc::var("LINGER_TIMEKEEPING") {
            c.timekeeping = Timekeeping::parse(&v)?;
        }
        Ok(c)
    }

    /// Whether deferred deadlines may be taken by return traps (see
    /// `docs/safety.md`); with `false`, only by timer retries.
    pub fn return_traps(mut self, yes: bool) -> Self {
        self.return_traps = yes;
        self
    }

    /// How deadlines reach threads: per-thread timers (the default) or one
    /// monitor thread per process.
    pub fn timekeeping(mut self, how: Timekeeping) -> Self {
        self.timekeeping = how;
        self
    }

    /// Sets the preemption signal. It must be a real-time signal not reserved by glibc.
    pub fn signal(mut self, signo: i32) -> Result<Self, Error> {
        if signo < libc::SIGRTMIN() || signo > libc::SIGRTMAX() {
            return Err(Error::Config(format!(
                "signal {signo} is not a real-time signal in {}..={}",
                libc::SIGRTMIN(),
                libc::SIGRTMAX()
            )));
        }
        self.signal = signo;
        Ok(self)
    }

    /// Sets the default stack size (rounded up to whole pages, at least 64 KiB).
    pub fn stack_size(mut self, bytes: usize) -> Result<Self, Error> {
        self.stack_size = checked_stack_size(bytes)?;
        Ok(self)
    }

    /// Sets the first retry delay used when a deadline falls inside code that
    /// must not be preempted and no cheaper deferral mechanism applies.
    pub fn retry(mut self, delay: Duration) -> Self {
        self.retry = delay.clamp(Duration::from_micros(1), Duration::from_millis(100));
        self
    }

    /// Marks shared objects whose file name contains `part` as safe to preempt
    /// (by default all shared libraries are deferred).
    pub fn preemptible_library(mut self, part: &str) -> Self {
        self.preemptible_libs.push(part.to_owned());
        self
    }

    /// Marks functions of the executable whose demangled name contains `part`
    /// as unsafe to preempt (for example a custom global allocator).
    pub fn defer_symbol(mut self, part: &str) -> Self {
        self.defer_symbols.push(part.to_owned());
        self
    }

    /// Makes this the process configuration. Fails once the runtime has started.
    pub fn install(self) -> Result<(), Error> {
        CONFIG
            .set(Ok(self))
            .map_err(|_| Error::Config("the runtime already started; install the Config before the first launch".into()))
    }

    /// Usable stack size used when a launch does not ask for one.
    pub fn default_stack_size(&self) -> usize {
        self.stack_size
    }

    /// Signal number used for preemption.
    pub fn signal_number(&self) -> i32 {
        self.signal
    }

    /// How deadlines reach threads.
    pub fn timekeeping_mode(&self) -> Timekeeping {
        self.timekeeping
    }
}

pub(crate) fn checked_stack_size(bytes: usize) -> Result<usize, Error> {
    if bytes > (1 << 36) {
        return Err(Error::Config(format!("stack size {bytes} is larger than 64 GiB")));
    }
    let page = page_size();
    Ok(bytes.max(MIN_STACK_SIZE).div_ceil(page) * page)
}

/// The preemption signal of the frozen configuration, or, while it is not
/// frozen yet, the one `LINGER_SIGNAL` names (the default if unset or not a
/// number; a bad value fails at start). Never freezes it (libc calls made by
/// start-up code must not fix the configuration before the program installs
/// its own). Only the signal linger will really use may be reserved: with
/// `LINGER_SIGNAL` moved, the default one is the program's from the start.
/// Reads the environment with `getenv`, which takes no lock and allocates
/// nothing (it may be called from a signal handler).
pub(crate) fn signal_if_known() -> i32 {
    match CONFIG.get() {
        Some(Ok(c)) => c.signal,
        Some(Err(_)) => 0,
        None => env_signal().unwrap_or(libc::SIGRTMAX() - 3),
    }
}

/// `LINGER_SIGNAL` as [`parse_signal`] reads it, without allocating.
fn env_signal() -> Option<i32> {
    crate::base::parse::signal_number(crate::base::glibc::env_bytes(b"LINGER_SIGNAL")?)
}

/// The frozen process configuration (read from the environment on first use).
pub fn current() -> Result<&'static Config, Error> {
    CONFIG
        .get_or_init(|| {
            Config::from_env().map_err(|e| match e {
                Error::Config(msg) => msg,
                e => e.to_string(),
            })
        })
        .as_ref()
        .map_err(|e| Error::Config(e.clone()))
}

/// The system's page size (read once). A system fact, here at the bottom
/// with the configuration that checks sizes against it.
#[inline]
pub(crate) fn page_size() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    PAGE.store(p, Ordering::Relaxed);
    p
}
