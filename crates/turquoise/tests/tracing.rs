//! A `tracing` event per preemption. Alone in its binary: tracing caches
//! each call site's interest process-wide, and a test running beside this
//! one with no subscriber could leave it cached as "never".
#![cfg(feature = "tracing")]

mod common;
use common::{spin, Buffer};

use std::time::Duration;

use turquoise::PreemptibleExt;

/// With a subscriber at DEBUG, each preemption gives one `poll preempted`
/// event from target `turquoise`; without one, nothing is recorded.
#[test]
fn an_event_per_preemption() {
    for round in 0..5 {
        let buf = Buffer::default();
        let subscriber = buf.debug_subscriber();
        let stats = tracing::subscriber::with_default(subscriber, || {
            let mut fut = async {
                for _ in 0..100 {
                    spin(20_000);
                }
            }
            .preemptible(Duration::from_micros(200));
            futures::executor::block_on(&mut fut);
            fut.stats()
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let events = out.lines().filter(|l| l.contains("turquoise: poll preempted")).count() as u64;
        assert!(stats.preemptions > 0, "round {round}: never preempted");
        assert_eq!(events, stats.preemptions, "round {round}: {out}");
        assert!(out.contains("overrun_us=") && out.contains("deferred="), "{out}");
    }
}
