//! Isolated functions: a libset leased from gotcha for the function's
//! life, and the preemption handler's table kept aware of the copies.
//!
//! The handler learns which code is a libset's copy (preemptible) from
//! [`gotcha::code`] when it builds its table (`ranges.rs`); a libset made
//! for a launch is new code, so the table is rebuilt before the function
//! first runs, or its first deadlines inside the copies would be deferred.

use crate::base::config::Config;
use crate::Error;

/// Isolates `sel` for the rest of the process: functions launched with
/// [`crate::Builder::isolated`] then get their own copies of those
/// libraries. Optional: the first isolated launch isolates
/// `LINGER_ISOLATE` (or every library that can be copied) by itself.
/// Once per process; the same selection again returns the first report.
///
/// ```no_run
/// use std::time::Duration;
///
/// # fn decode(_: &[u8]) -> usize { 0 }
/// # let png = vec![0u8; 16];
/// // libpng and zlib must be loaded (linked, or dlopen'd) first.
/// linger::isolate(&linger::Selection::parse("libpng16,libz")?)?;
/// // SAFETY: decode() uses what libpng makes only inside itself
/// // (docs/safety.md, "gotcha").
/// let job = unsafe { linger::Builder::new().isolated(true) }
///     .launch(move || decode(&png), Duration::from_millis(10))?;
/// drop(job); // cancelled mid-libpng: its libset is reset
/// # Ok::<(), linger::Error>(())
/// ```
pub fn isolate(sel: &gotcha::Selection) -> Result<gotcha::Report, Error> {
    let _scope = crate::state::guard::Scope::enter();
    install_fault_handler()?;
    let r = gotcha::isolate(sel)?;
    crate::judgement::ranges::note_new_code();
    Ok(r)
}

/// Makes libsets ahead of time, until `n` exist or the loader refuses
/// (about a millisecond each: otherwise the first isolated launches pay
/// it). Returns how many exist. Isolates `LINGER_ISOLATE` (or `all`) first
/// if nothing was isolated yet.
pub fn prepare_libsets(n: usize) -> Result<usize, Error> {
    let _scope = crate::state::guard::Scope::enter();
    ensure_isolating()?;
    let made = gotcha::Lease::prepare(n)?;
    crate::judgement::ranges::note_new_code();
    Ok(made)
}

/// gotcha redirects accesses to the isolated libraries' variables from
/// linger's SIGSEGV handler (`gotcha::trap_redirect`): it must be in
/// place before isolation starts, even if no function was launched yet.
fn install_fault_handler() -> Result<(), Error> {
    crate::handlers::overflow::ensure_installed(crate::base::config::current()?.signal)
}

fn ensure_isolating() -> Result<(), Error> {
    if !gotcha::is_isolating() {
        install_fault_handler()?;
        let sel = match gotcha::Selection::from_env() {
            Some(s) => s?,
            None => gotcha::Selection::All,
        };
        match gotcha::isolate(&sel) {
            Ok(_) | Err(gotcha::Error::AlreadyIsolating(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A libset for a function about to be launched isolated.
pub(crate) fn lease(policy: gotcha::Exhausted, cfg: &Config) -> Result<Option<gotcha::Lease>, Error> {
    ensure_isolating()?;
    // Objects `dlopen`ed since the last launch: their calls into isolated
    // libraries must reach the libset too.
    gotcha::refresh()?;
    let lease = gotcha::Lease::acquire(policy)?;
    if crate::judgement::ranges::built_for_gotcha() != gotcha::generation() {
        crate::judgement::ranges::note_new_code();
        crate::judgement::ranges::ensure(cfg);
    }
    Ok(lease)
}
