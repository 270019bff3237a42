//! The base: x86-64 specifics, errors, ELF reading, and the loaded objects of
//! a namespace.

pub(crate) mod arch;
pub(crate) mod elf;
pub(crate) mod error;
pub(crate) mod objects;
