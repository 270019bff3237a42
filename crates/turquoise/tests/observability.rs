//! Counters per task and per worker (polls, preemptions, deferred
//! preemptions, worst overrun); `tests/tracing.rs` has the events.

mod common;
use common::spin;

use std::time::Duration;

use turquoise::Builder;

/// A task that never awaits, and one whose deadlines mostly land in a
/// critical scope (code that must not be interrupted): both are preempted,
/// the second mostly late; task and worker counters agree.
#[test]
fn task_and_worker_counters() {
    for round in 0..5 {
        let rt = Builder::new().worker_threads(1).slice(Duration::from_micros(500)).enable_all().build().unwrap();
        let plain = rt.spawn(async {
            for _ in 0..200 {
                spin(20_000);
            }
        });
        let scoped = rt.spawn(async {
            for _ in 0..40 {
                linger::critical(|| spin(200_000));
            }
        });
        let waiting = rt.spawn(async { tokio::time::sleep(Duration::from_millis(1)).await });
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(60), async {
                while !(plain.is_finished() && scoped.is_finished() && waiting.is_finished()) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await
            .expect("tasks stuck")
        });
        let (p, s, w) = (plain.stats(), scoped.stats(), waiting.stats());
        let m = rt.worker_metrics()[0];
        eprintln!("round {round}: plain {p:?}\n  scoped {s:?}\n  waiting {w:?}\n  worker {m:?}");
        assert!(p.preemptions > 0 && s.preemptions > 0, "round {round}: not preempted");
        assert!(p.polls > p.preemptions && s.polls > s.preemptions);
        assert!(s.deferred_preemptions * 2 > s.preemptions, "round {round}: stops at scopes' ends not counted deferred");
        assert!(p.deferred_preemptions * 2 < p.preemptions, "round {round}: stops in own code counted deferred");
        assert!(s.worst_overrun > Duration::ZERO && p.worst_overrun > Duration::ZERO);
        assert_eq!((w.polls, w.preemptions), (2, 0), "round {round}: a sleep is two polls, never preempted");
        assert_eq!(m.polls, p.polls + s.polls + w.polls, "round {round}: worker polls");
        assert_eq!(m.preemptions, p.preemptions + s.preemptions);
        assert_eq!(m.deferred_preemptions, p.deferred_preemptions + s.deferred_preemptions);
        assert_eq!(m.worst_overrun, p.worst_overrun.max(s.worst_overrun));
    }
}
