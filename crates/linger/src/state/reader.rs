//! A thread's mark for reading the code table (its behaviour is
//! `ranges`'): a type of the per-thread state, defined below it.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64};

/// One thread's mark that it is reading the table or what it describes
/// (code bytes, unwind tables): `seq` is odd while it is. Only its thread
/// writes `seq`, and a section nested in another (a handler interrupting
/// one) leaves it alone, so `ranges::wait_for_readers` can tell a section that
/// went on from a new one by the number. Owned by one live thread at a
/// time; reused after that thread exits.
pub(crate) struct Reader {
    pub(crate) seq: AtomicU64,
    pub(crate) taken: AtomicBool,
    pub(crate) next: AtomicPtr<Reader>,
}
