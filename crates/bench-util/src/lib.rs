//! What the benchmark crates share (turquoise-bench, gotcha-bench,
//! green-bench): pinning to a CPU, the one-line machine description, the
//! calibrated spin that stands for a request's work, the table that mixes
//! long requests among short ones, raising the descriptor limit,
//! replacing one section of `docs/benchmarks.md` while keeping the others,
//! and ([`run`]) building and running the Go and C peers, the commit and
//! tool versions a run records, and the median and spread of samples.

pub mod docs;
pub mod run;

use std::time::Instant;

/// Pins the calling thread (and the threads it starts afterwards) to `cpu`,
/// best effort: a machine with fewer CPUs runs everything where it can.
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // within it for cpu < CPU_SETSIZE; sched_setaffinity only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// CPUs online (not the affinity mask, which [`pin`] narrows).
pub fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// "AMD EPYC, 2 CPUs, Linux 6.18.44": what the numbers were measured on.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned()))
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {} CPUs, Linux {}", cpus(), kernel.trim())
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// One opaque step: the compiler must compute `x` and cannot see what
/// becomes of it, so the loop in [`work`] is neither folded nor vectorised.
///
/// Kept in a register, with no call: the state of a benchmark loop must not
/// pass through memory. A call per step (as the original's `black_box()` in
/// C, or `std::hint::black_box`, which stores and reloads its value) puts a
/// store and a load of the stack on every iteration's dependency chain, and
/// whether the CPU renames that memory decides between about one and five
/// cycles a step. Any interrupt can flip it, and the slow mode lasts
/// hundreds of microseconds: here a thread sent an empty signal every 500 us
/// ran such a loop 45% slower, the same loop without the call 4% slower. A
/// preempted server's long requests would then take half as long again as
/// the calibration says, while those of servers that are never interrupted
/// would not.
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    // SAFETY: an empty instruction sequence that claims to read and write
    // `x` in a register; it touches no memory, stack or flags.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags)) };
    x
}

/// A request's work: `iters` opaque steps (CPU only, no memory traffic).
pub fn work(iters: u64) -> u64 {
    let mut acc = 0;
    for i in 0..iters {
        acc = opaque(acc ^ i);
    }
    acc
}

/// Iterations of [`work`] per microsecond on this thread (median of 5).
pub fn calibrate() -> f64 {
    let mut rates: Vec<f64> = (0..5)
        .map(|_| {
            let n = 2_000_000;
            let t = Instant::now();
            std::hint::black_box(work(n));
            n as f64 / t.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    rates[2]
}

/// A strict 1000-slot table, true for a long request: exactly `permille`
/// long slots, shuffled with a fixed seed (the same mix every run), meant
/// to be cycled (as the original's wrk script).
pub fn table(permille: u32) -> Vec<bool> {
    let mut t: Vec<bool> = (0..1000).map(|i| i < permille as usize).collect();
    // Fisher-Yates with a fixed xorshift seed.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..t.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t.swap(i, (x % (i as u64 + 1)) as usize);
    }
    t
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit, and the
/// hard limit too when `at_least` is more and the process may (root, up to
/// `fs.nr_open`). Returns the soft limit now in force.
pub fn raise_nofile(at_least: u64) -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_max < at_least {
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(at_least);
        let want = libc::rlimit { rlim_cur: at_least.min(nr_open), rlim_max: at_least.min(nr_open) };
        // SAFETY: setrlimit reads the struct; failure (not privileged) leaves the limits as they were.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            return want.rlim_cur;
        }
    }
    let want = libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max };
    // SAFETY: as above; raising the soft limit to the hard one is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
        r.rlim_max
    } else {
        r.rlim_cur
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_has_exactly_permille_long_slots() {
        for p in [0, 2, 7, 10, 20, 1000] {
            assert_eq!(super::table(p).iter().filter(|&&l| l).count(), p as usize);
        }
    }
}
