//! turquoise: preemptive scheduling for async Rust, on stock executors.
//!
//! An async task that computes for 50 ms in one poll holds its worker for
//! 50 ms: every task queued behind it waits (head-of-line blocking), and
//! tokio's cooperative budget cannot help, since it only counts operations
//! on tokio's own resources. [`preemptible`] runs a future's polls inside a
//! `linger` preemptible function, in slices: a poll that runs past its
//! slice is stopped where it is, its task goes behind the other runnable
//! tasks, and the next poll resumes it exactly there.
//!
//! ```
//! use std::time::Duration;
//! use turquoise::PreemptibleExt;
//!
//! let long = async {
//!     let mut x = 0u64;
//!     for i in 0..50_000_000u64 {
//!         x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
//!     }
//!     x
//! };
//! // Each poll of `task` computes for at most 2 ms.
//! let task = long.preemptible(Duration::from_millis(2));
//! let x = futures::executor::block_on(task);
//! # let _ = x;
//! ```
//!
//! Or a whole runtime whose tasks are preemptible:
//!
//! ```
//! #[turquoise::main(worker_threads = 1)]
//! async fn main() {
//!     let long = turquoise::spawn(async { (0..u64::MAX).fold(0, |a, i| std::hint::black_box(a ^ i)) });
//!     // Runs at once, although `long` never awaits: its polls are cut every 2 ms.
//!     turquoise::spawn(async { println!("still responsive") }).await.unwrap();
//!     long.abort();
//! }
//! ```
//!
//! Layers: `future.rs` is the wrapper, on top of `linger`'s public API only
//! (`Builder::launch`, `resume`, `pause`).

// The one architecture: a clear error elsewhere, not a build that fails
// deep inside an `asm!` block.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!("turquoise runs on x86-64 Linux only, as linger, which it is built on");

// The layers, bottom to top; each imports only from those below it
// (`crates/layout-check/layers.txt`, `docs/layers.md`). The API is this
// file, `thread/`, `sync/` and `ffi.rs`.
mod base;
mod preemptible;
mod green;
mod sched;

pub mod ffi;
pub mod sync;
pub mod thread;

pub use base::counters::PollStats;
pub use preemptible::future::{preemptible, Preemptible, PreemptibleExt};
pub use base::pace::DEFAULT_GRANULARITY;
pub use sched::runtime::{spawn, spawn_cooperative, Builder, Handle, Runtime, WorkerMetrics, DEFAULT_SLICE};
pub use sched::join::{AbortHandle, JoinHandle};
pub use thread::JoinSet;
pub use preemptible::task::JoinError;
pub use turquoise_macros::{main, test};
