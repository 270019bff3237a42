//! `libturquoise.so` and `libturquoise.a`: green threads for C
//! (`include/turquoise.h`, from `turquoise::ffi`), carrying linger, its C
//! API and its interposers too, so that a program links one library.
//! Everything they export is defined in `turquoise` and `linger`; this
//! crate only links them (`tests/exports.rs` checks the list).

// Linked for its exported symbols alone: nothing here names an item of it.
extern crate turquoise_rs;
