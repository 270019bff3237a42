//! `liblinger_run.so`: runs a program's `main()` inside a preemptible function.
//!
//! Loaded with `LD_PRELOAD` (the `linger-run` command sets that up), it
//! interposes glibc's `__libc_start_main`, which every dynamically linked
//! program's `_start` calls with the address of `main`. We hand glibc our own
//! `main` instead; it launches the real one with linger and, when a slice is
//! set, resumes it at once after every preemption, so the program is stopped
//! at arbitrary instructions all through its run and must behave exactly as
//! if it had never been.
//!
//! Everything the program could notice is kept as it was: `main`'s arguments
//! and environment (minus our own variables, see [`options`]), its exit status
//! (returned to glibc, which calls `exit` with it), its signals. The hardening
//! of blocking calls, signal functions and `exec` lives in the linger library
//! itself (`crates/linger/src/interpose`), whose exported wrappers this
//! library re-exports.

mod options;
mod start;
mod stats;
mod threads;

pub use start::__libc_start_main;
pub use stats::{_Exit, _exit};
