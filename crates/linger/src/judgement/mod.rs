//! Judgement: may this point be stopped? The table of code ranges, the call-
//! chain walker, return traps, futex waits. Decides; never acts.

pub(crate) mod eh_frame;
pub(crate) mod futex;
pub(crate) mod inlined;
pub(crate) mod ranges;
pub(crate) mod return_trap;
pub(crate) mod unwind;
