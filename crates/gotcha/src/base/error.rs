//! Errors, each with what the caller can do about it.

use std::fmt;

/// What went wrong while isolating libraries or leasing a libset.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A library asked for cannot be copied into a libset, and why.
    Uncopyable {
        /// The library's name.
        library: String,
        /// Why it cannot be copied.
        reason: String,
    },
    /// A library asked for is not loaded in the process.
    NotLoaded(String),
    /// Isolation was already set up with a different selection.
    AlreadyIsolating(String),
    /// `isolate` has not been called (or found nothing to isolate).
    NotIsolating,
    /// Every libset is leased, and no more can be made.
    NoLibset {
        /// How many libsets exist.
        libsets: usize,
        /// What would give more.
        hint: &'static str,
    },
    /// The loader refused to make another copy (its message).
    Loader(String),
    /// A fixed limit of the dispatcher was reached.
    Exhausted(String),
    /// Something this machine or build does not support.
    Unsupported(String),
    /// A system call failed.
    Os(&'static str, std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Uncopyable { library, reason } => write!(f, "{library} cannot be isolated: {reason}"),
            Error::NotLoaded(l) => write!(f, "{l} is not loaded: link against it, or dlopen it before isolating"),
            Error::AlreadyIsolating(s) => write!(f, "libraries are already isolated ({s}); the selection is fixed per process"),
            Error::NotIsolating => f.write_str("no libraries are isolated: call gotcha::isolate (or set LINGER_ISOLATE) first"),
            Error::NoLibset { libsets, hint } => write!(f, "all {libsets} libsets are in use ({hint})"),
            Error::Loader(m) => write!(f, "the loader could not copy the isolated libraries: {m}"),
            Error::Exhausted(m) => write!(f, "gotcha limit reached: {m}"),
            Error::Unsupported(m) => write!(f, "unsupported: {m}"),
            Error::Os(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {}
