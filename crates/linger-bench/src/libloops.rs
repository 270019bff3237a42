//! Timeout accuracy of functions that spend their time in library code
//! (libc, `std`), where every deadline is deferred: it is taken when the
//! deferred call returns (a return trap) or, failing that, by a timer retry.
//! Next to the spin loop of the same run, which is never deferred.

use std::io::Write;
use std::time::Duration;

use linger::launch;

use crate::latency::spin_forever;
use crate::progress::Progress;
use crate::sig::now_ns;
use crate::stats::{summarize, Summary};
use crate::Scale;

pub const TIMEOUT_US: u64 = 100;

pub struct LoopRow {
    pub name: &'static str,
    /// now - (launch_start + timeout) when `launch` returns, ns.
    pub overrun: Summary,
    pub counters: linger::Stats,
}

fn vec_alloc() {
    loop {
        let v: Vec<u8> = Vec::with_capacity(64);
        std::hint::black_box(v);
    }
}

fn file_write() {
    let mut f = std::fs::OpenOptions::new().write(true).open("/dev/null").expect("/dev/null");
    loop {
        f.write_all(b"hello, world\n").expect("write");
    }
}

fn format_string() {
    let mut i = 0u64;
    loop {
        i += 1;
        std::hint::black_box(format!("{i} {:.3}", i as f64 * 0.5));
    }
}

fn bufwriter_writeln() {
    let f = std::fs::OpenOptions::new().write(true).open("/dev/null").expect("/dev/null");
    let mut w = std::io::BufWriter::new(f);
    let mut i = 0u64;
    loop {
        i += 1;
        writeln!(w, "line {i}").expect("writeln");
    }
}

fn c_malloc_free() {
    loop {
        // SAFETY: a plain allocation freed at once.
        unsafe { libc::free(std::hint::black_box(libc::malloc(64))) };
    }
}

fn c_qsort() {
    extern "C" fn cmp(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
        // SAFETY: qsort passes pointers into the u32 array below.
        let (x, y) = unsafe { (*(a as *const u32), *(b as *const u32)) };
        x.cmp(&y) as libc::c_int
    }
    let mut v = [0u32; 64];
    let mut seed = 1u32;
    loop {
        for x in v.iter_mut() {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            *x = seed;
        }
        // SAFETY: sorting our own array of u32 with a matching comparator.
        unsafe { libc::qsort(v.as_mut_ptr() as *mut libc::c_void, v.len(), 4, Some(cmp)) };
    }
}

/// The loops, the spin reference first.
pub const LOOPS: [(&str, fn()); 7] = [
    ("spin (reference)", spin_forever),
    ("`Vec::with_capacity(64)` + drop", vec_alloc),
    ("`File::write_all` to /dev/null", file_write),
    ("`format!`", format_string),
    ("`BufWriter` + `writeln!`", bufwriter_writeln),
    ("C `malloc`/`free`", c_malloc_free),
    ("C `qsort` with a comparator", c_qsort),
];

pub fn run(sc: Scale, p: &mut Progress) -> Vec<LoopRow> {
    p.step(&format!("accuracy: library loops, {TIMEOUT_US} us timeouts"));
    let n = if sc.quick { 100 } else { 300 };
    let warm = 5;
    let t = Duration::from_micros(TIMEOUT_US);
    let tn = t.as_nanos() as f64;
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(n); LOOPS.len()];
    let mut counters = vec![linger::Stats::default(); LOOPS.len()];
    // Round-robin, so every loop sees the same background load.
    for i in 0..n + warm {
        for (k, (_, f)) in LOOPS.iter().enumerate() {
            let f = *f;
            let before = linger::stats();
            let t0 = now_ns();
            let l = launch(f, t).expect("launch");
            let t1 = now_ns();
            assert!(l.is_continuation(), "an endless loop must be preempted");
            drop(l);
            let after = linger::stats();
            if i >= warm {
                samples[k].push(t1 as f64 - t0 as f64 - tn);
                let c = &mut counters[k];
                c.preemptions += after.preemptions - before.preemptions;
                c.deferrals += after.deferrals - before.deferrals;
                c.return_traps += after.return_traps - before.return_traps;
            }
        }
    }
    LOOPS
        .iter()
        .zip(samples)
        .zip(counters)
        .map(|(((name, _), s), counters)| LoopRow { name, overrun: summarize(s), counters })
        .collect()
}
