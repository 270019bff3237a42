//! What a coroutine returns to the runtime: a type of the per-thread state
//! (a frame's trap handler is typed with it), defined below it.

/// What a coroutine returns to the runtime. The value itself is stored in the
/// continuation (so this type, and the coroutine type, do not depend on it).
pub(crate) enum Outcome {
    Value,
    Panicked(Box<dyn std::any::Any + Send + 'static>),
    Overflowed,
    /// Ended by `pthread_exit` (with this value) or by cancellation: its
    /// frames were unwound by glibc (see `exit.rs`).
    Exited(usize),
}
