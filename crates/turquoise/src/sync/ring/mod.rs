//! Bounded rings on event counts: [`channel`], single producer and single
//! consumer; [`spmc`], single producer and many consumers.
//!
//! ```
//! let (mut tx, mut rx) = turquoise::sync::ring::channel(4);
//! let t = std::thread::spawn(move || (0..100).map(|_| rx.recv().unwrap()).sum::<u32>());
//! for i in 0..100 {
//!     tx.send(i).unwrap();
//! }
//! assert_eq!(t.join().unwrap(), 4950);
//! ```
//!
//! A full ring makes the sender wait, an empty one the receiver: a green
//! thread parks, an OS thread sleeps ([`super::Versions::wait`]).
//!
//! The rings' code (`slots.rs`, `spsc.rs`, `spmc.rs`) names its atomics,
//! slots and event counts only through `prims.rs`, so that a model checker
//! can run those very files on its own primitives (`crates/sync-models`,
//! loom).

mod prims;
mod slots;
mod spsc;
pub mod spmc;

pub use spsc::{channel, Receiver, Sender};
