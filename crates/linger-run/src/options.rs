//! What the environment asks of us, read once before `main`, and the removal
//! of our variables so that the program (and its children) see the
//! environment they would have had without linger-run.

use std::ffi::{CStr, OsString};
use std::time::Duration;

/// The library's file name: how we find ourselves in `LD_PRELOAD`.
pub(crate) const LIB_NAME: &str = "liblinger_run.so";

/// Variables the `linger-run` command (or the user) sets for us.
pub(crate) const SLICE_VAR: &str = "LINGER_RUN_SLICE";
pub(crate) const STATS_VAR: &str = "LINGER_RUN_STATS";
pub(crate) const CHILDREN_VAR: &str = "LINGER_RUN_CHILDREN";
pub(crate) const STACK_VAR: &str = "LINGER_RUN_STACK";
pub(crate) const PREEMPT_BLOCKED_VAR: &str = "LINGER_RUN_PREEMPT_BLOCKED";
/// The libraries to isolate (`--isolate`), as for any program using linger.
pub(crate) const ISOLATE_VAR: &str = "LINGER_ISOLATE";
/// `GLIBC_TUNABLES` as it was before the command added the namespace
/// tunable for `--isolate` (`-` for unset): given back to the program.
pub(crate) const TUNABLES_VAR: &str = "LINGER_RUN_TUNABLES";

/// Where `--stats` goes.
pub(crate) enum StatsTo {
    Stderr,
    File(OsString),
}

pub(crate) struct Options {
    /// Slice length; `None` runs `main` with no time limit.
    pub slice: Option<Duration>,
    pub stats: Option<StatsTo>,
    /// Give our variables back to every image the program starts, so that
    /// children (and exec'd images) run under linger-run too.
    pub children: bool,
    /// Stop `main` at the end of a slice even while it waits in a system
    /// call (by default the wait is left alone until it returns).
    pub preempt_blocked: bool,
    /// Usable stack of `main`'s preemptible function.
    pub stack_size: usize,
    /// Run `main` (and the threads it starts) in a libset with these
    /// libraries copied.
    pub isolate: Option<linger::Selection>,
}

/// Read with glibc's meaning, not through a `getenv` the program may define
/// (see `linger::glibc`).
fn var(name: &str) -> Option<String> {
    linger::glibc::var(name)
}

/// The stack `main` would have had: the soft `RLIMIT_STACK` (8 MiB by
/// default), capped at 1 GiB when unlimited or huge. Pages are committed only
/// when touched, so the reservation costs address space, not memory.
fn main_stack_size() -> usize {
    const DEFAULT: usize = 8 << 20;
    const CAP: usize = 1 << 30;
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid out pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) } != 0 {
        return DEFAULT;
    }
    if rl.rlim_cur == libc::RLIM_INFINITY {
        CAP
    } else {
        (rl.rlim_cur as usize).clamp(linger::MIN_STACK_SIZE, CAP)
    }
}

impl Options {
    /// Reads our variables. An invalid value is the user's mistake in
    /// `LD_PRELOAD` use (the command validates its own): reported, not guessed.
    pub(crate) fn from_env() -> Result<Options, String> {
        let slice = match var(SLICE_VAR) {
            None => None,
            Some(v) if v.trim().is_empty() || v.trim() == "unlimited" => None,
            Some(v) => Some(linger::parse_duration(&v).map_err(|e| format!("{SLICE_VAR}: {e}"))?),
        };
        let stats = match var(STATS_VAR).as_deref().map(str::trim) {
            None | Some("") | Some("0") => None,
            Some("1") | Some("stderr") => Some(StatsTo::Stderr),
            Some(_) => Some(StatsTo::File(linger::glibc::var_os(STATS_VAR).unwrap_or_default())),
        };
        let flag = |name: &str| match var(name) {
            None => Ok(false),
            Some(v) if v.trim().is_empty() => Ok(false),
            Some(v) => linger::parse_flag(&v).map_err(|e| format!("{name}: {e}")),
        };
        let children = flag(CHILDREN_VAR)?;
        let preempt_blocked = flag(PREEMPT_BLOCKED_VAR)?;
        let stack_size = match var(STACK_VAR) {
            None => main_stack_size(),
            Some(v) => linger::parse_size(&v).map_err(|e| format!("{STACK_VAR}: {e}"))?,
        };
        let isolate = match var(ISOLATE_VAR) {
            None => None,
            Some(v) if v.trim().is_empty() => None,
            Some(v) => Some(linger::Selection::parse(&v).map_err(|e| format!("{ISOLATE_VAR}: {e}"))?),
        };
        Ok(Options { slice, stats, children, preempt_blocked, stack_size, isolate })
    }
}

/// `LD_PRELOAD` without our library (entries are separated by spaces or
/// colons), or `None` if nothing else was preloaded.
pub(crate) fn preload_without_us(v: &str) -> Option<String> {
    let rest: Vec<&str> = v
        .split([':', ' '])
        .filter(|e| !e.is_empty() && e.rsplit('/').next().is_none_or(|base| base != LIB_NAME))
        .collect();
    (!rest.is_empty()).then(|| rest.join(":"))
}

/// Our library's entries of `LD_PRELOAD` (with `--children`, every child
/// gets them back in front of its own), or `None`.
pub(crate) fn preload_of_us(v: &str) -> Option<String> {
    let ours: Vec<&str> = v
        .split([':', ' '])
        .filter(|e| !e.is_empty() && e.rsplit('/').next() == Some(LIB_NAME))
        .collect();
    (!ours.is_empty()).then(|| ours.join(":"))
}

/// With `--children`: what every image the program starts must get back
/// (see `linger::set_child_env`), read before [`scrub_environment`].
pub(crate) fn hand_to_children() {
    let Some(preload) = var("LD_PRELOAD").and_then(|v| preload_of_us(&v)) else { return };
    let vars: Vec<(String, String)> = [SLICE_VAR, STATS_VAR, CHILDREN_VAR, STACK_VAR, PREEMPT_BLOCKED_VAR, ISOLATE_VAR]
        .iter()
        .filter_map(|n| var(n).map(|v| ((*n).to_owned(), v)))
        .collect();
    linger::set_child_env(&preload, &vars);
}

/// Removes our variables from the environment, before `main` runs and before
/// any thread of the program exists (so editing it is safe here), with
/// glibc's `setenv`/`unsetenv`: a program's own (bash's) may not work
/// before its `main`, and glibc's edit the array in place, which `main`
/// gets as `envp`.
pub(crate) fn scrub_environment() {
    // SAFETY (of set_var): single-threaded, before main.
    if let Some(v) = var("LD_PRELOAD") {
        let rest = preload_without_us(&v);
        unsafe { linger::glibc::set_var("LD_PRELOAD", rest.as_deref().map(std::ffi::OsStr::new)) };
    }
    for v in [SLICE_VAR, STATS_VAR, CHILDREN_VAR, STACK_VAR, PREEMPT_BLOCKED_VAR, ISOLATE_VAR] {
        // SAFETY: as above.
        unsafe { linger::glibc::set_var(v, None) };
    }
    // The tunable the command added for --isolate was read by the loader
    // already: the program gets its own value back.
    if let Some(was) = var(TUNABLES_VAR) {
        let was = (was != "-").then_some(was);
        // SAFETY: as above.
        unsafe {
            linger::glibc::set_var("GLIBC_TUNABLES", was.as_deref().map(std::ffi::OsStr::new));
            linger::glibc::set_var(TUNABLES_VAR, None);
        }
    }
}

/// A line of ours on stderr, "linger-run: " first (one `write`).
pub(crate) fn say(msg: &str) {
    let line = format!("linger-run: {msg}\n");
    // SAFETY: writing a valid buffer to fd 2; a failure leaves nothing to do.
    unsafe { libc::write(2, line.as_ptr() as *const libc::c_void, line.len()) };
}

/// Our own program name for messages: `argv[0]`'s base name.
pub(crate) fn program_name(argv0: *const libc::c_char) -> String {
    if argv0.is_null() {
        return "program".into();
    }
    // SAFETY: argv[0] from the kernel's initial stack is NUL-terminated.
    let s = unsafe { CStr::from_ptr(argv0) }.to_string_lossy();
    s.rsplit('/').next().unwrap_or("program").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_list() {
        assert_eq!(preload_without_us("/a/b/liblinger_run.so"), None);
        assert_eq!(preload_without_us("/x/liblinger_run.so:/y/libfoo.so"), Some("/y/libfoo.so".into()));
        assert_eq!(preload_without_us("libfoo.so /x/liblinger_run.so libbar.so"), Some("libfoo.so:libbar.so".into()));
        assert_eq!(preload_without_us("/x/notliblinger_run.so"), Some("/x/notliblinger_run.so".into()));
        assert_eq!(preload_of_us("/x/liblinger_run.so:/y/libfoo.so"), Some("/x/liblinger_run.so".into()));
        assert_eq!(preload_of_us("/y/libfoo.so"), None);
    }
}
