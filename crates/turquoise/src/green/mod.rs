//! Green threads' machinery: the records, their runs, parks and wake-ups
//! (`records.rs`), thread-local images, at-exit lists, the poller, the wait
//! path and the park seam, the dump, per-thread counters and types. Reaches
//! the scheduler only through the `Queues` trait. The API is `crate::thread`.

pub(crate) mod atexit;
pub(crate) mod block;
pub(crate) mod dump;
pub(crate) mod dump_signal;
pub(crate) mod park;
pub(crate) mod poller;
pub(crate) mod records;
pub(crate) mod tls;
pub(crate) mod types;
