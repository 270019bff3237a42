//! Timeout accuracy: how late the caller gets control back after a deadline,
//! next to a raw one-shot POSIX timer with an empty handler.

use std::sync::atomic::Ordering;
use std::time::Duration;

use linger::launch;

use crate::latency::spin_forever;
use crate::progress::Progress;
use crate::sig::{now_ns, spin_until_hits, Signals, ThreadTimer, TIMER_HITS};
use crate::stats::{summarize, Summary};
use crate::Scale;

pub const TIMEOUTS_US: [u64; 8] = [50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000];

pub struct Point {
    pub timeout_ns: u64,
    /// now - (launch_start + timeout) when `launch` returns, ns.
    pub linger: Summary,
    /// now - deadline when a spinning loop sees the raw timer's handler ran, ns.
    pub raw: Summary,
    pub counters: linger::Stats,
}

fn samples(sc: Scale, timeout_ns: u64) -> usize {
    let budget = if sc.quick { 100_000_000 } else { 1_000_000_000 };
    let (lo, hi) = if sc.quick { (50, 1000) } else { (200, 5000) };
    (budget / timeout_ns).clamp(lo, hi) as usize
}

pub fn run(sc: Scale, sigs: &Signals, p: &mut Progress) -> Vec<Point> {
    let timer = ThreadTimer::new(sigs).expect("timer_create");
    let mut out = Vec::new();
    for us in TIMEOUTS_US {
        p.step(&format!("accuracy: {us} us timeout"));
        let t = Duration::from_micros(us);
        let tn = t.as_nanos() as u64;
        let n = samples(sc, tn);
        let warm = 5;
        let mut lv = Vec::with_capacity(n);
        let mut rv = Vec::with_capacity(n);
        linger::reset_stats();
        // Alternate the two so both see the same background load.
        for i in 0..n + warm {
            let t0 = now_ns();
            let l = launch(spin_forever, t).expect("launch");
            let t1 = now_ns();
            assert!(l.is_continuation() && !l.yielded(), "a spinning function must be preempted");
            drop(l);

            let h = TIMER_HITS.load(Ordering::Relaxed);
            let r0 = now_ns();
            timer.arm_at(r0 + tn);
            spin_until_hits(h);
            let r1 = now_ns();
            if i >= warm {
                lv.push(t1 as f64 - (t0 + tn) as f64);
                rv.push(r1 as f64 - (r0 + tn) as f64);
            }
        }
        out.push(Point { timeout_ns: tn, linger: summarize(lv), raw: summarize(rv), counters: linger::stats() });
    }
    out
}
