//! The Rust snippets of the READMEs (the project's and each published
//! crate's), compiled as a new user's project would compile them (edition
//! 2024) and run by `tests/snippets.rs`. Each is the body of a function
//! `snippet_N`, built by `build.rs` from the READMEs and `preludes.txt`: a
//! README change that breaks a snippet breaks this crate.
#![allow(clippy::all, unused_variables, unused_mut, dead_code)]

include!(concat!(env!("OUT_DIR"), "/snippets.rs"));
