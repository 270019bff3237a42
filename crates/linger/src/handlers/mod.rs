//! Handlers: the preemption signal's handler (where preemption happens:
//! `preempt.rs`), stack overflows, the program's own signals and libas-safe's
//! hold mode. Act on what judgement decides.

pub(crate) mod hold;
pub(crate) mod overflow;
pub(crate) mod preempt;
pub(crate) mod program_signals;
