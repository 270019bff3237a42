//! Routing at run time: the stubs that send a call to the thread's current
//! libset (`dispatch.rs`), trap-and-redirect of a variable's accesses
//! (`trap.rs`), and what the copies allocate (`heap.rs`).

pub(crate) mod dispatch;
pub(crate) mod heap;
pub(crate) mod trap;
