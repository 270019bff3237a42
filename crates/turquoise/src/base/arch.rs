//! x86-64 specifics of turquoise, in one place: the single-producer event
//! count's plain add, one instruction whose flags say whether a waiter is
//! owed a wake-up. `lib.rs` refuses to build on any other architecture; a
//! port gives this function its own body (an atomic add is always correct,
//! only slower: `sync/ec_word.rs`'s `add`).

/// Adds `n` (below 2^31) to the word at `word` with one plain (not locked)
/// `add`, and says whether the caller owes a wake-up: the add left the top
/// bit (the "someone sleeps" flag) set, or carried it out of the word. That
/// is `ec_word::owes_wake` read from the flags: with `n` below 2^31 the
/// sign flag is set iff the new word has the flag, and the carry flag iff
/// the old one had it and the add cleared it.
///
/// # Safety
///
/// `word` is valid for reads and writes and aligned for 4 bytes. Other
/// threads may write it with `lock`ed instructions meanwhile (x86-TSO makes
/// that the hardware's business, not a data race the compiler could
/// exploit: the asm is opaque to it); the protocol that copes with the flag
/// a plain add may overwrite is the caller's (`docs/safety.md`, "Event
/// counts and asymmetric fences").
#[inline(always)]
pub(crate) unsafe fn plain_add_owes_wake(word: *mut u32, n: u32) -> bool {
    // SAFETY: the caller's contract for the pointer. The block has no
    // `nomem`: it keeps the caller's earlier memory accesses before it.
    // The branches go to the label block, which returns from this
    // function; the no-waiter path falls through past the block.
    unsafe {
        std::arch::asm!(
            "add dword ptr [{w}], {n:e}",
            "js {owes}",
            "jc {owes}",
            w = in(reg) word,
            n = in(reg) n,
            owes = label { return true; },
            options(nostack),
        );
    }
    false
}
