//! Model checks of `turquoise::sync`'s lock-free protocols, with loom: see
//! `tests/`. Each test includes a protocol's source file from
//! `crates/turquoise/src/sync` as it is (`ec_word.rs`, the event count's
//! word; `mutex_word.rs`, the mutex's state byte) and runs it on loom's
//! atomics, with the waits around it (a futex, tokio's semaphores)
//! modelled by loom's mutex and condition variable. No code here.
