//! Model checks of `turquoise::sync`'s lock-free protocols, with loom: see
//! `tests/`. Each test includes a protocol's source file from
//! `crates/turquoise/src/sync` as it is and runs it on loom's atomics, with
//! the futex modelled by loom's mutex and condition variable. No code here.
