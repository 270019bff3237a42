//! green-bench: issue 12's benchmarks of `turquoise::thread`.
//!
//! - Seed 002's web server ("Hanging by a Thread"): a thread per
//!   connection, HTTP/1.1 keep-alive on loopback, green threads against
//!   pthreads, an epoll loop, tokio and Go (`servers.rs`, `go/main.go`),
//!   loaded by `client.rs` with 100 to 10,000 connections; and the same
//!   with 1% of requests spinning 20 ms (head-of-line blocking).
//! - Microbenchmarks of green threads, goroutines and pthreads: spawn+join,
//!   switches through a channel and through parked I/O, memory per idle
//!   thread, most threads alive (`micro.rs`).
//!
//! The binary (`src/main.rs`) runs them and writes section 9 of
//! `docs/benchmarks.md`; the library is what the smoke test uses too.

pub mod client;
pub mod http;
pub mod micro;
pub mod servers;
