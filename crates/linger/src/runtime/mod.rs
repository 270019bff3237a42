//! The runtime: launching, resuming and cancelling functions (`launch`),
//! fork, the C handle table and libas-safe's face. Uses
//! everything below; the API (`lib.rs`, `ffi.rs`) sits on it.

pub mod deferral;
pub(crate) mod fork;
pub(crate) mod handles;
pub(crate) mod launch;
