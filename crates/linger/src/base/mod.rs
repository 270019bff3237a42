//! The base: errors, configuration, glibc facts, plain libc helpers and
//! hooks. Imports nothing else of the crate.

pub mod glibc;
pub(crate) mod arch;
pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod hook;
pub(crate) mod parse;
pub(crate) mod sys;
