//! The dump of live green threads (`turquoise::thread::dump`, `turq_dump`,
//! the dump signal): read from the records' registry, above the records.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::records::{GreenShared, REGISTRY};
use crate::base::thread_stats::{monotonic, Cause, State, ThreadInfo, IN_WAIT, OFFLOADED};
use crate::base::clock::{ticks, ticks_to_duration};


/// A thread that has run this long without a switch is shown as holding its
/// worker: far past any slice, it waits where it cannot be stopped (a
/// `Once` initialiser another thread runs, stdout's lock: "Waits in Rust's
/// std" in `docs/safety.md`) or runs code linger defers.
const HOLDING: Duration = Duration::from_millis(10);

/// The green threads alive now, in the process (every runtime), by id.
pub fn dump() -> Vec<ThreadInfo> {
    // In `critical`: a green thread stopped holding the lock would block
    // the worker's next spawn or exit.
    let live: Vec<Arc<GreenShared>> = linger::critical(|| REGISTRY.live());
    let mut out: Vec<ThreadInfo> = live
        .iter()
        .map(|g| {
            let s = &g.status;
            let state = s.state();
            let d = s.detail.load(Ordering::Relaxed);
            let waiting_on = match state {
                State::Parked(Cause::Io) if d == OFFLOADED => Some("a file call on the blocking pool".to_string()),
                State::Parked(Cause::Io) => Some(format!("fd {}", d as i64)),
                State::Parked(Cause::Timer) => {
                    let left = Duration::from_nanos(d).saturating_sub(monotonic());
                    Some(format!("timer, {:.3} ms left", left.as_secs_f64() * 1e3))
                }
                State::Parked(Cause::Join) => Some(format!("thread {d}")),
                State::Parked(_) => None,
                State::Runnable if d == IN_WAIT => {
                    Some("a futex wait (a lock, std's park or channel, a join), stopped at its slice".to_string())
                }
                State::Running => {
                    let ran = ticks_to_duration(ticks().saturating_sub(d));
                    (ran >= HOLDING).then(|| {
                        format!("nothing it can be stopped in: holding its worker for {:.1} ms", ran.as_secs_f64() * 1e3)
                    })
                }
                _ => None,
            };
            let w = s.worker.load(Ordering::Relaxed);
            ThreadInfo {
                id: g.thread.id().0,
                name: g.thread.name().map(str::to_string),
                state,
                waiting_on,
                worker: (w != 0).then(|| w - 1),
                stats: s.counters.get(),
            }
        })
        .collect();
    out.sort_by_key(|t| t.id);
    out
}

/// [`dump`] as text, one line a thread (what `turq_dump` and the dump
/// signal write).
pub fn dump_text() -> String {
    let threads = dump();
    let mut s = format!("turquoise: {} green threads\n", threads.len());
    for t in &threads {
        let _ = write!(s, "thread {}", t.id);
        if let Some(n) = &t.name {
            let _ = write!(s, " \"{n}\"");
        }
        let _ = write!(s, " [{}]", match t.state {
            State::Unstarted => "unstarted".to_string(),
            State::Running => "running".to_string(),
            State::Runnable => "runnable".to_string(),
            State::Parked(c) => format!("parked: {c}"),
            State::Finished => "finished".to_string(),
        });
        if let Some(w) = &t.waiting_on {
            let _ = write!(s, " on {w}");
        }
        if let Some(w) = t.worker {
            let _ = write!(s, ", worker {w}");
        }
        let st = &t.stats;
        let _ = writeln!(
            s,
            ", {} switches, {} preemptions, {} parks, {:.3} ms runnable-waiting",
            st.switches,
            st.preemptions,
            st.parks(),
            st.runnable_wait.as_secs_f64() * 1e3
        );
    }
    s
}
