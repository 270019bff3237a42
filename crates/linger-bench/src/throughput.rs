//! Throughput of CPU-bound work run directly, in linger slices, and under a
//! raw periodic timer signal (the limit any signal-based preemption has).

use std::hint::black_box;
use std::time::Duration;

use linger::{launch, resume};

use crate::progress::Progress;
use crate::sig::{now_ns, Signals, ThreadTimer, TIMER_HITS};
use crate::stats::median;
use crate::Scale;

pub const SLICES_US: [u64; 3] = [20, 100, 1000];

/// The work: a serial chain of integer hashing steps, in our own code so that
/// linger may preempt it anywhere (it defers inside std and libc).
#[inline(never)]
pub fn work(n: u64, seed: u64) -> u64 {
    let mut h = seed;
    let mut i = 0;
    while i < n {
        h ^= i;
        h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
        i += 1;
    }
    h
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Direct,
    Linger(u64),
    Signals(u64),
}

pub struct Config {
    pub mode: Mode,
    /// Wall time of each run, ns.
    pub times: Vec<f64>,
    /// Preemptions (linger) or delivered signals (raw) per run.
    pub events: Vec<f64>,
}

pub struct Throughput {
    pub iterations: u64,
    pub runs: usize,
    pub configs: Vec<Config>,
}

impl Throughput {
    pub fn direct(&self) -> &Config {
        &self.configs[0]
    }
    /// Median direct time / median time of `c`.
    pub fn ratio(&self, c: &Config) -> f64 {
        median(&self.direct().times) / median(&c.times)
    }
    /// Extra wall time per preemption or signal, ns.
    pub fn cost_per_event(&self, c: &Config) -> f64 {
        (median(&c.times) - median(&self.direct().times)) / median(&c.events)
    }
    pub fn find(&self, m: Mode) -> Option<&Config> {
        self.configs.iter().find(|c| c.mode == m)
    }
}

pub fn run(sc: Scale, sigs: &Signals, p: &mut Progress) -> Throughput {
    p.step("throughput: calibrating");
    let probe = 1u64 << 22;
    black_box(work(probe, 1));
    let per_iter = (0..5)
        .map(|_| {
            let t0 = now_ns();
            black_box(work(black_box(probe), 1));
            (now_ns() - t0) as f64 / probe as f64
        })
        .fold(f64::INFINITY, f64::min);
    let target_ns = if sc.quick { 150e6 } else { 600e6 };
    let iterations = (target_ns / per_iter) as u64;
    let runs = sc.n(5, 2);
    let expect = work(iterations, 42);

    let mut modes = vec![Mode::Direct];
    modes.extend(SLICES_US.iter().map(|&s| Mode::Linger(s)));
    modes.extend(SLICES_US.iter().map(|&s| Mode::Signals(s)));
    let mut configs: Vec<Config> =
        modes.iter().map(|&mode| Config { mode, times: Vec::new(), events: Vec::new() }).collect();
    let timer = ThreadTimer::new(sigs).expect("timer_create");
    for r in 0..runs {
        // Rotate the order each round so slow phases of the machine do not
        // always land on the same configuration.
        for k in 0..configs.len() {
            let c = &mut configs[(k + r) % modes.len()];
            p.step(&format!("throughput: round {}/{runs}, {}", r + 1, label(c.mode)));
            let (t, ev) = match c.mode {
                Mode::Direct => {
                    let t0 = now_ns();
                    let v = black_box(work(black_box(iterations), 42));
                    let t = now_ns() - t0;
                    assert_eq!(v, expect);
                    (t, 0)
                }
                Mode::Linger(us) => {
                    let slice = Duration::from_micros(us);
                    linger::reset_stats();
                    let t0 = now_ns();
                    let mut l = launch(move || work(iterations, 42), slice).expect("launch");
                    while !l.is_completion() {
                        resume(&mut l, slice).expect("resume");
                    }
                    let t = now_ns() - t0;
                    assert_eq!(l.completion(), Some(expect), "preempted work must give the same result");
                    let s = linger::stats();
                    (t, s.preemptions)
                }
                Mode::Signals(us) => {
                    let h = TIMER_HITS.load(std::sync::atomic::Ordering::Relaxed);
                    let t0 = now_ns();
                    timer.periodic(us * 1000);
                    let v = black_box(work(black_box(iterations), 42));
                    timer.disarm();
                    let t = now_ns() - t0;
                    assert_eq!(v, expect);
                    (t, TIMER_HITS.load(std::sync::atomic::Ordering::Relaxed) - h)
                }
            };
            c.times.push(t as f64);
            c.events.push(ev as f64);
        }
    }
    Throughput { iterations, runs, configs }
}

pub fn label(m: Mode) -> String {
    match m {
        Mode::Direct => "direct call".into(),
        Mode::Linger(us) => format!("linger, {} slices", crate::stats::fmt_us(us)),
        Mode::Signals(us) => format!("raw periodic timer signal every {}", crate::stats::fmt_us(us)),
    }
}

/// Number of progress steps `run` takes.
pub fn steps(sc: Scale) -> u64 {
    1 + (sc.n(5, 2) * (1 + 2 * SLICES_US.len())) as u64
}
