//! Preemption in the middle of allocation and printing, while the caller
//! allocates and prints too. These broke prototypes that preempted inside
//! non-reentrant code (heap corruption within ~900 preemptions).

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use linger::{launch, resume};

fn churn(rounds: usize) -> u64 {
    let mut keep: Vec<Box<[u64]>> = Vec::new();
    let mut sum = 0u64;
    for i in 0..rounds {
        let n = 1 + (i * 7919) % 300;
        let b: Box<[u64]> = (0..n as u64).collect();
        sum = sum.wrapping_add(b.iter().sum::<u64>());
        keep.push(b);
        if keep.len() > 64 {
            keep.swap_remove((i * 31) % keep.len());
        }
        let mut v = Vec::with_capacity(i % 50);
        v.extend(std::iter::repeat(i as u8).take(i % 50));
        let s = String::from_utf8_lossy(&v).into_owned();
        sum = sum.wrapping_add(s.len() as u64);
        // glibc malloc directly too
        unsafe {
            let p = libc::malloc(16 + i % 4000) as *mut u8;
            assert!(!p.is_null());
            p.write_volatile(i as u8);
            libc::free(p as *mut libc::c_void);
        }
    }
    sum
}

#[test]
fn allocation_under_preemption() {
    let expected = churn(100_000);
    linger::reset_stats();
    // Short slices: a deadline often lands in malloc, and re-arming the timer
    // can take longer than the retry interval (which once let a nested signal
    // preempt inside malloc: a deadlock every ~8 runs).
    for slice in [20, 5, 50, 10, 20, 3] {
        let slice = Duration::from_micros(slice);
        let mut l = launch(|| churn(100_000), slice).unwrap();
        let mut caller: Vec<Vec<u8>> = Vec::new();
        let mut i = 0usize;
        while !l.is_completion() {
            // The caller allocates between slices, touching the same arenas.
            caller.push(vec![i as u8; 1 + i % 700]);
            if caller.len() > 100 {
                caller.drain(..50);
            }
            unsafe { libc::free(libc::malloc(32 + i % 2000)) };
            i += 1;
            resume(&mut l, slice).unwrap();
        }
        assert_eq!(l.completion(), Some(expected));
    }
    let s = linger::stats();
    assert!(s.preemptions >= 1000, "expected thousands of preemptions, got {s:?}");
}

const LINES: usize = 4000;

/// Child mode: prints from inside and outside, checked by the parent.
fn print_child() {
    println!();
    let mut l = launch(
        || {
            for i in 0..LINES {
                println!("inside {i:06} {}", "x".repeat(i % 40));
            }
        },
        Duration::from_micros(30),
    )
    .unwrap();
    let mut j = 0;
    while !l.is_completion() {
        println!("caller {j:06} {}", "y".repeat(j % 40));
        j += 1;
        resume(&mut l, Duration::from_micros(30)).unwrap();
    }
    let s = linger::stats();
    eprintln!("preemptions={} deferrals={} {s:?}", s.preemptions, s.deferrals);
    std::io::stdout().flush().unwrap();
}

#[test]
fn printing_under_preemption() {
    if std::env::var_os("LINGER_PRINT_CHILD").is_some() {
        print_child();
        return;
    }
    for _ in 0..3 {
        // Every run is checked for torn, lost or reordered lines. Under
        // `LINGER_TIMEKEEPING=monitor` a run of the loop (about 10 ms) may
        // pass with no deadline delivered at all when the monitor thread
        // gets no CPU meanwhile on a loaded machine (see docs/safety.md,
        // "Timekeeping"): the run is then repeated until deadlines hit it.
        let mut runs = 0;
        loop {
            let hits = print_child_run();
            runs += 1;
            if hits > 10 {
                break;
            }
            assert!(runs < 20, "deadlines never hit the printing loop in {runs} runs");
        }
    }
}

/// One run of the child; checks its output, returns the deadlines that
/// landed in the printing loop (taken at a safe point or deferred out of
/// std's print path).
fn print_child_run() -> u64 {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "printing_under_preemption", "--nocapture", "--test-threads=1"])
        .env("LINGER_PRINT_CHILD", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut inside = 0;
    for line in stdout.lines().filter(|l| l.starts_with("inside") || l.starts_with("caller")) {
        let mut parts = line.split(' ');
        let who = parts.next().unwrap();
        let n: usize = parts.next().unwrap().parse().unwrap_or_else(|_| panic!("torn line {line:?}"));
        let pad = parts.next().unwrap_or("");
        let c = if who == "inside" { 'x' } else { 'y' };
        assert!(pad.len() == n % 40 && pad.chars().all(|p| p == c), "torn line {line:?}");
        assert!(parts.next().is_none(), "torn line {line:?}");
        if who == "inside" {
            assert_eq!(n, inside, "lines lost or reordered");
            inside += 1;
        }
    }
    assert_eq!(inside, LINES);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let count = |key: &str| -> u64 {
        stderr.split(key).nth(1).and_then(|s| s.split_whitespace().next()).and_then(|s| s.parse().ok()).unwrap_or(0)
    };
    count("preemptions=") + count("deferrals=")
}

#[test]
fn c_printf_under_preemption() {
    // printf/puts from libc inside, fputs outside, to /dev/null: no deadlock.
    let mut l = launch(
        || unsafe {
            let f = libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr());
            for i in 0..200_000 {
                libc::fprintf(f, c"line %d %s\n".as_ptr(), i, c"some text to format".as_ptr());
            }
            libc::fclose(f);
        },
        Duration::from_micros(20),
    )
    .unwrap();
    let f = unsafe { libc::fopen(c"/dev/null".as_ptr(), c"w".as_ptr()) };
    while !l.is_completion() {
        unsafe { libc::fprintf(f, c"caller %d\n".as_ptr(), 1) };
        resume(&mut l, Duration::from_micros(20)).unwrap();
    }
    unsafe { libc::fclose(f) };
}

/// Set while the comparator runs, i.e. while libc's `qsort` is on the stack.
static IN_CALLBACK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn slow_compare(a: *const libc::c_void, b: *const libc::c_void) -> libc::c_int {
    IN_CALLBACK.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: qsort passes pointers into our u32 array.
    let (x, y) = unsafe { (*(a as *const u32), *(b as *const u32)) };
    let mut spin = 0u64;
    for i in 0..200 {
        spin = spin.wrapping_add(std::hint::black_box(i));
    }
    std::hint::black_box(spin);
    IN_CALLBACK.store(false, std::sync::atomic::Ordering::Relaxed);
    x.cmp(&y) as libc::c_int
}

/// User code called back from libc runs with libc's frames below it: the
/// handler must find them (by unwinding the real call chain, or by scanning)
/// and never stop the function inside the callback, while still stopping it
/// between the sorts.
#[test]
fn never_preempted_inside_a_libc_callback() {
    linger::reset_stats();
    let mut f = launch(
        || {
            let mut total = 0u64;
            for round in 0..300u32 {
                let mut v: Vec<u32> = (0..500u32).map(|i| i.wrapping_mul(2_654_435_761).rotate_left(round % 32)).collect();
                // SAFETY: a valid array of u32 and a comparator for u32.
                unsafe { libc::qsort(v.as_mut_ptr() as *mut libc::c_void, v.len(), 4, Some(slow_compare)) };
                assert!(v.windows(2).all(|w| w[0] <= w[1]));
                // Plain code between the sorts, where preemption is allowed.
                for i in 0..20_000u64 {
                    total = total.wrapping_add(std::hint::black_box(i) ^ v[(i % 500) as usize] as u64);
                }
            }
            total
        },
        Duration::from_micros(20),
    )
    .unwrap();
    let mut stops = 0u64;
    while f.is_continuation() {
        assert!(
            !IN_CALLBACK.load(std::sync::atomic::Ordering::Relaxed),
            "preempted inside the qsort comparator after {stops} stops"
        );
        stops += 1;
        resume(&mut f, Duration::from_micros(20)).unwrap();
    }
    let s = linger::stats();
    assert!(s.preemptions > 0, "never preempted between sorts: {s:?}");
    assert!(s.deferrals > 0, "no deadline fell inside qsort: {s:?}");
}
