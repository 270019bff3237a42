//! Model checks of `turquoise::sync`'s lock-free protocols, with loom: see
//! `tests/`. Each test includes a protocol's source files from
//! `crates/turquoise/src/sync` as they are (`ec_word.rs`, the event count's
//! word; `mutex_word.rs`, the mutex's state byte; `ring/{slots,spsc,spmc}.rs`,
//! the rings) and runs them on loom's atomics and cells, with the waits
//! around them (a futex, tokio's semaphores, event counts) modelled by
//! loom's mutex and condition variable. No code here.
