//! Errors returned by the runtime. Nothing in linger aborts the process on bad
//! input: every failure a caller can cause or suffer comes back as an [`Error`].

use std::fmt;
use std::io;

/// Why a launch, resume or configuration call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No stack could be mapped for a new preemptible function (out of memory,
    /// or `vm.max_map_count` reached).
    StackAllocation(io::Error),
    /// The per-thread POSIX timer could not be created or armed (for example
    /// the process hit its `RLIMIT_SIGPENDING` limit of timers), or, with
    /// [`crate::Timekeeping::Monitor`], the monitor thread could not be
    /// started or this thread's slot allocated.
    Timer(io::Error),
    /// Installing the preemption or stack-overflow signal handler failed.
    Signal(io::Error),
    /// The continuation was launched on another thread and is not migratable.
    /// It is untouched and can still be resumed on its home thread.
    WrongThread,
    /// The function panicked or overflowed its stack earlier; it cannot run again.
    Poisoned,
    /// The function overflowed its stack and was abandoned (its destructors did
    /// not run). The continuation is now poisoned.
    StackOverflow {
        /// Usable stack size the function had, in bytes.
        stack_size: usize,
    },
    /// The continuation is running right now (a function tried to resume itself).
    Busy,
    /// Memory for the runtime's own bookkeeping ran out (a thread's unwind
    /// context, the C API's handle table). Nothing was launched.
    OutOfMemory,
    /// A configuration value (builder or environment variable) is invalid, or the
    /// configuration was changed after the runtime started.
    Config(String),
    /// The call is not allowed where it was made (see "What stays the
    /// user's job" in `docs/safety.md`): a launch or resume while the thread
    /// unwinds a panic, or any call but `pause` and the queries from inside
    /// a signal handler of the program's. Nothing was done.
    NotHere(&'static str),
    /// An isolated launch could not get a libset of its own: the libraries
    /// cannot be isolated, or every libset is in use (see
    /// `Builder::isolated` and `Builder::when_no_libset`).
    Isolation(gotcha::Error),
}

// Messages say what failed and why, once: a wrapping variant's cause (an
// OS error, an isolation error) is in its message and is not also its
// `source()`, so that a plain `{}` says it all and error-chain printers
// (`anyhow`'s `{:#}`) do not repeat it. The cause stays reachable by
// matching the variant. No "linger:" prefix: the caller knows whose error
// it is.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::StackAllocation(e) => write!(f, "cannot allocate a stack for a preemptible function: {e}"),
            Error::Timer(e) => write!(f, "cannot set up the preemption timer or monitor: {e}"),
            Error::Signal(e) => write!(f, "cannot install linger's signal handler: {e}"),
            Error::WrongThread => {
                f.write_str("the continuation belongs to another thread (launch it with Builder::migratable to move it)")
            }
            Error::Poisoned => f.write_str("the function panicked or overflowed its stack; it cannot be resumed"),
            Error::StackOverflow { stack_size } => write!(
                f,
                "stack overflow in a preemptible function ({} KiB stack; the function was abandoned without running \
                 its destructors: raise LINGER_STACK_SIZE or Builder::stack_size)",
                stack_size / 1024
            ),
            Error::Busy => f.write_str("the continuation is already running"),
            Error::OutOfMemory => f.write_str("out of memory for linger's bookkeeping"),
            Error::Config(msg) => write!(f, "bad configuration: {msg}"),
            Error::NotHere(why) => write!(f, "not allowed {why}"),
            Error::Isolation(e) => write!(f, "cannot isolate the function's libraries: {e}"),
        }
    }
}

/// For code that speaks `io::Result`: the kind from [`Error::kind`], and
/// the linger error itself inside (`get_ref`, `into_inner`, `downcast`).
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

impl From<gotcha::Error> for Error {
    fn from(e: gotcha::Error) -> Error {
        Error::Isolation(e)
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The `io::ErrorKind` that says what kind of failure this is (the kind
    /// an `io::Error` made from it has).
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Error::StackAllocation(_) | Error::OutOfMemory => io::ErrorKind::OutOfMemory,
            Error::Timer(e) | Error::Signal(e) => e.kind(),
            Error::WrongThread | Error::NotHere(_) => io::ErrorKind::PermissionDenied,
            Error::Poisoned | Error::StackOverflow { .. } => io::ErrorKind::Other,
            Error::Busy | Error::Isolation(gotcha::Error::NoLibset { .. }) => io::ErrorKind::ResourceBusy,
            Error::Config(_) => io::ErrorKind::InvalidInput,
            Error::Isolation(gotcha::Error::NotLoaded(_)) => io::ErrorKind::NotFound,
            Error::Isolation(_) => io::ErrorKind::Unsupported,
        }
    }

    /// The `errno` value the C API reports for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::StackAllocation(_) => libc::ENOMEM,
            Error::Timer(_) => libc::EAGAIN,
            Error::Signal(_) => libc::ENOSYS,
            Error::WrongThread => libc::EXDEV,
            Error::Poisoned => libc::ECANCELED,
            Error::StackOverflow { .. } => libc::EFAULT,
            Error::Busy => libc::EBUSY,
            Error::OutOfMemory => libc::ENOMEM,
            Error::Config(_) => libc::EINVAL,
            Error::NotHere(_) => libc::EDEADLK,
            Error::Isolation(gotcha::Error::NoLibset { .. }) => libc::EAGAIN,
            Error::Isolation(_) => libc::ENOTSUP,
        }
    }
}
