//! `liblinger.so` and `liblinger.a`: the `linger` crate's C API
//! (`include/linger.h`, from `linger::ffi`) and its libc interposers, for C
//! programs (`make lib`, `make install`). Everything they export is
//! defined in `linger`; this crate only links it into the two libraries
//! (`tests/exports.rs` checks the list). Rust programs depend on `linger`.

// Linked for its exported symbols alone: nothing here names an item of it.
extern crate linger_rs;
