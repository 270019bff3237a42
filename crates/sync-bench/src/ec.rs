//! Event counts: the cost of an increment nobody waits for, the wake-up
//! latency of a sleeping waiter, and the time until a waiter sleeps for
//! good (the same measurements as `c/ck_bench.c` makes of ck_ec).

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use turquoise::sync::fence::{self, Mechanism};
use turquoise::sync::{EventCount, Producer, Versions};

use crate::{asleep, futex_wait, futex_wake, gettid, now_ns, per_op, timed, Row, Sizes};

/// ns and cycles per increment with no waiter: a plain store, `fetch_add`
/// (lock xadd), our multi-producer `EventCount::increment`, our single
/// producer's `Producer::increment`.
pub fn increments(s: Sizes) -> Vec<Row> {
    bench_util::pin(0);
    let w = AtomicU32::new(0);
    let ec = EventCount::new();
    let (mut p, _versions) = EventCount::single_producer();
    let mut rows = Vec::new();
    let mut push = |name: &str, (ns, cycles): (Vec<f64>, Vec<f64>)| {
        rows.push(Row::new("inc_ns", name, ns));
        rows.push(Row::new("inc_cycles", name, cycles));
    };
    push("plain store", per_op(s.batches, s.n, |n| plain(black_box(&w), n)));
    push("fetch_add", per_op(s.batches, s.n, |n| fetch_add(black_box(&w), n)));
    push("EventCount::increment (MP)", per_op(s.batches, s.n, |n| mp(black_box(&ec), n)));
    push("Producer::increment (SP)", per_op(s.batches, s.n, |n| sp(&mut p, n)));
    rows
}

#[inline(never)]
fn plain(w: &AtomicU32, n: usize) {
    for i in 0..n {
        w.store(i as u32, Ordering::Relaxed);
    }
}

#[inline(never)]
fn fetch_add(w: &AtomicU32, n: usize) {
    let mut acc = 0;
    for _ in 0..n {
        acc += w.fetch_add(1, Ordering::AcqRel);
    }
    black_box(acc);
}

/// `n` multi-producer increments (also the `ec_ab` example's).
#[inline(never)]
pub fn mp(ec: &EventCount, n: usize) {
    for _ in 0..n {
        ec.increment();
    }
}

/// `n` single-producer increments (also the `ec_ab` example's).
#[inline(never)]
pub fn sp(p: &mut Producer, n: usize) {
    for _ in 0..n {
        p.increment();
    }
}

/// What a waiter waits on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// A bare futex word: increment, `FUTEX_WAKE`; wait, `FUTEX_WAIT`.
    Futex,
    Mp,
    Sp,
}

impl Flavour {
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Futex => "futex",
            Flavour::Mp => "EventCount (MP)",
            Flavour::Sp => "Producer (SP)",
        }
    }
}

/// What the producer and the waiter share.
struct Shared {
    ec: EventCount,
    sp: Arc<Versions>,
    word: AtomicU32,
    ack: AtomicU32,
    t_inc: AtomicU64,
    round: AtomicU64,
    tid: AtomicU32,
}

impl Shared {
    fn value(&self, f: Flavour) -> u32 {
        match f {
            Flavour::Futex => self.word.load(Ordering::Acquire),
            Flavour::Mp => self.ec.value(),
            Flavour::Sp => self.sp.value(),
        }
    }

    fn wait(&self, f: Flavour, old: u32) {
        match f {
            Flavour::Futex => {
                while self.word.load(Ordering::Acquire) == old {
                    futex_wait(&self.word, old);
                }
            }
            Flavour::Mp => { self.ec.wait(old); }
            Flavour::Sp => { self.sp.wait(old); }
        }
    }
}

/// Wake-up latency (ns, one per round): the waiter asleep in the kernel
/// (its thread's state is 'S'), the producer on CPU 0 increments; the time
/// from just before the increment until the waiter runs. The waiter is on
/// CPU 0 too (`two_cpus` false) or on CPU 1. The producer then blocks on a
/// futex until the waiter answers, which lets a waiter on its CPU run.
pub fn wake(f: Flavour, two_cpus: bool, rounds: usize) -> Row {
    bench_util::pin(0);
    let (mut producer, sp) = EventCount::single_producer();
    let sh = Arc::new(Shared { ec: EventCount::new(), sp, word: AtomicU32::new(0), ack: AtomicU32::new(0), t_inc: AtomicU64::new(0), round: AtomicU64::new(u64::MAX), tid: AtomicU32::new(0) });
    let w = sh.clone();
    let waiter = std::thread::spawn(move || {
        bench_util::pin(two_cpus as usize);
        w.tid.store(gettid() as u32, Ordering::Release);
        let mut lat = Vec::with_capacity(rounds);
        for i in 0..rounds {
            let v = w.value(f);
            w.round.store(i as u64, Ordering::SeqCst);
            w.wait(f, v);
            lat.push(now_ns().saturating_sub(w.t_inc.load(Ordering::Acquire)) as f64);
            w.ack.fetch_add(1, Ordering::SeqCst);
            futex_wake(&w.ack);
        }
        lat
    });
    for i in 0..rounds {
        while sh.round.load(Ordering::SeqCst) != i as u64 || !asleep(sh.tid.load(Ordering::Acquire) as i32) {
            std::thread::sleep(Duration::from_micros(20));
        }
        let a = sh.ack.load(Ordering::SeqCst);
        sh.t_inc.store(now_ns(), Ordering::Release);
        match f {
            Flavour::Futex => {
                sh.word.fetch_add(1, Ordering::AcqRel);
                futex_wake(&sh.word);
            }
            Flavour::Mp => { sh.ec.increment(); }
            Flavour::Sp => { producer.increment(); }
        }
        while sh.ack.load(Ordering::SeqCst) == a {
            futex_wait(&sh.ack, a);
        }
    }
    let lat = waiter.join().expect("waiter");
    Row::new(if two_cpus { "wake_two" } else { "wake_one" }, f.name(), lat)
}

/// The heavy-fence mechanisms measured, with their names.
pub const MECHANISMS: [(Mechanism, &str); 3] =
    [(Mechanism::MembarrierExpedited, "membarrier expedited"), (Mechanism::MembarrierGlobal, "membarrier global"), (Mechanism::Mprotect, "mprotect")];

/// Time until a waiter sleeps for good (ns per sample), on CPU 1, with the
/// producer's thread on CPU 0 blocked or spinning: `wait_timeout(v, 0)`
/// on a version nobody changes does all a wait does before its futex wait
/// with no deadline (the spin, setting the flag and, for the single
/// producer, its forced barrier `fence::heavy`, then the check). The
/// single producer's is measured with each heavy-fence mechanism.
pub fn until_asleep(s: Sizes) -> Vec<Row> {
    let mut rows = Vec::new();
    crate::beside_other(|spinning| {
        let what = if spinning { "good_spinning" } else { "good_blocked" };
        let ec = EventCount::new();
        let v = ec.value();
        rows.push(Row::new(what, "EventCount (MP)", timed(s.rounds, s.budget, || assert!(ec.wait_timeout(v, Duration::ZERO).is_none()))));
        let (_p, sp) = EventCount::single_producer();
        for (m, name) in MECHANISMS {
            if fence::use_mechanism(m) == m {
                let v = sp.value();
                rows.push(Row::new(what, &format!("Producer (SP), {name}"), timed(s.rounds, s.budget, || assert!(sp.wait_timeout(v, Duration::ZERO).is_none()))));
            }
        }
    });
    rows
}
