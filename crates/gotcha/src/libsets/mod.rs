//! Making libsets: relinking a copy's GOT (`relink.rs`), what stays the
//! program's when libc is copied (`libc_policy.rs`), and making, leasing and
//! resetting libsets (`libset.rs`).

pub(crate) mod libc_policy;
pub(crate) mod libset;
pub(crate) mod relink;
