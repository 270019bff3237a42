//! Timekeeping by the process's monitor thread (`Timekeeping::Monitor`):
//! functions are stopped when overdue, on many threads at once, in their
//! own code and in libc's; a function that returns just in time is not
//! stopped later by a stale signal; threads come and go; a launcher of
//! short functions receives no signals at all.

use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use linger::{launch, resume, Config, Linger, Timekeeping};

/// Installs the monitor configuration, and runs the tests one at a time:
/// the one with 16 spinning threads would starve the others' wall-clock
/// deadlines.
fn monitor_mode() -> MutexGuard<'static, ()> {
    static ONCE: Once = Once::new();
    static SERIAL: Mutex<()> = Mutex::new(());
    ONCE.call_once(|| {
        Config::from_env().unwrap().timekeeping(Timekeeping::Monitor).install().unwrap();
    });
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn spin_forever() -> u64 {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn spin_loops_are_preempted() {
    let _serial = monitor_mode();
    for _ in 0..200 {
        let t = Instant::now();
        let mut l = launch(spin_forever, Duration::from_micros(300)).unwrap();
        assert!(l.is_continuation());
        // Not before its deadline, by linger's clock: an estimate from the
        // TSC, which may differ from `Instant`'s by microseconds on some
        // hosts (`clock.rs`'s test allows 50 us; 297 us seen here).
        assert!(t.elapsed() >= Duration::from_micros(250), "stopped after {:?}", t.elapsed());
        resume(&mut l, Duration::from_micros(100)).unwrap();
        assert!(l.is_continuation());
    }
    let (wakeups, sent) = linger::monitor_counters();
    assert!(sent >= 400, "the monitor sent {sent} signals (woke {wakeups} times)");
}

#[test]
fn code_in_libc_is_preempted_after_it_returns() {
    let _serial = monitor_mode();
    std::thread::spawn(in_libc).join().unwrap();
}

fn in_libc() {
    for round in 0..100 {
        // Mostly inside libc (deferred: the return trap or a retry of the
        // thread's own timer takes it when the call returns).
        let mut l = launch(
            move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut n = 0u64;
                loop {
                    for (i, b) in buf.iter_mut().enumerate() {
                        *b = (i as u64 ^ n) as u8;
                    }
                    let v: Vec<u8> = buf.iter().rev().copied().collect();
                    // SAFETY: both buffers hold 64 KiB.
                    unsafe { libc::memcpy(buf.as_mut_ptr().cast(), v.as_ptr().cast(), v.len()) };
                    let s = format!("{n}-{}", buf[round % 1000]);
                    n = n.wrapping_add(s.len() as u64);
                    std::hint::black_box(&s);
                }
            },
            Duration::from_micros(200),
        )
        .unwrap();
        assert!(l.is_continuation(), "round {round}");
        resume(&mut l, Duration::from_micros(200)).unwrap();
        assert!(l.is_continuation(), "round {round}");
    }
    let s = linger::stats();
    assert!(s.deferrals > 0 && s.preemptions >= 200, "{s:?}");
}

#[test]
fn many_threads_at_once() {
    let _serial = monitor_mode();
    // 16 threads on 2 cores: even ones run functions that never end, odd
    // ones functions that end well before their deadline.
    let threads: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                linger::reset_stats();
                let mut early = 0;
                for _ in 0..30 {
                    let t = Instant::now();
                    if i % 2 == 0 {
                        let mut l = launch(spin_forever, Duration::from_millis(1)).unwrap();
                        early += u32::from(t.elapsed() < Duration::from_millis(1));
                        resume(&mut l, Duration::from_micros(200)).unwrap();
                        assert!(l.is_continuation());
                    } else {
                        let l = launch(|| spin_for(Duration::from_micros(50)), Duration::from_millis(100)).unwrap();
                        // Stopped only if the thread lost its CPU for 100 ms.
                        assert!(l.is_completion() || t.elapsed() >= Duration::from_millis(100));
                    }
                }
                (i, early, linger::stats().preemptions)
            })
        })
        .collect();
    for t in threads {
        let (i, early, preemptions) = t.join().unwrap();
        assert_eq!(early, 0, "thread {i}: stopped before its deadline");
        if i % 2 == 0 {
            assert!(preemptions >= 60, "thread {i}: preempted each time: {preemptions}");
        }
    }
}

#[test]
fn finishing_just_in_time_is_not_stopped_later() {
    let _serial = monitor_mode();
    let mut rng = 0x9E3779B97F4A7C15u64;
    for _ in 0..2000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Finishes from 40 us before its deadline to just after it: the
        // monitor may already be on its way when it returns.
        let work = Duration::from_micros(160 + rng % 45);
        let l = launch(move || spin_for(work), Duration::from_micros(200)).unwrap();
        drop(l);
        // The next function has a long deadline: a stale signal for the
        // previous one must not stop it.
        let t = Instant::now();
        let l = launch(|| spin_for(Duration::from_micros(300)), Duration::from_millis(50)).unwrap();
        // (Stopped after 50 ms is fine: the machine is shared.)
        assert!(
            matches!(l, Linger::Completion(())) || t.elapsed() >= Duration::from_millis(50),
            "a function was stopped {:?} before its deadline",
            Duration::from_millis(50) - t.elapsed()
        );
    }
}

#[test]
fn short_functions_receive_no_signals() {
    let _serial = monitor_mode();
    std::thread::spawn(|| {
        linger::reset_stats();
        let t = Instant::now();
        let mut n = 0u64;
        let mut late = 0;
        while t.elapsed() < Duration::from_millis(300) {
            let t = Instant::now();
            let l = launch(|| spin_for(Duration::from_micros(100)), Duration::from_millis(20)).unwrap();
            if !matches!(l, Linger::Completion(())) {
                // Only if the thread lost its CPU for 20 ms (a shared machine).
                assert!(t.elapsed() >= Duration::from_millis(20), "stopped early");
                late += 1;
            }
            n += 1;
        }
        let s = linger::stats();
        assert!(n > 100);
        // The only other signals possible are stale ones, in the few
        // instructions between the monitor's last check and its system call.
        assert!(s.spurious_signals + s.preemptions <= 2 + 2 * late, "{s:?} in {n} launches, {late} late");
    })
    .join()
    .unwrap();
}

#[test]
fn thread_churn() {
    let _serial = monitor_mode();
    for round in 0..40 {
        let threads: Vec<_> = (0..6)
            .map(|i| {
                std::thread::spawn(move || {
                    if i % 2 == 0 {
                        let l = launch(spin_forever, Duration::from_micros(200)).unwrap();
                        assert!(l.is_continuation(), "round {round}");
                    } else {
                        let l = launch(|| 7, Duration::from_millis(5)).unwrap();
                        assert!(matches!(l, Linger::Completion(7)));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
    // Slots were reused, and a new thread still gets preempted.
    std::thread::spawn(|| {
        let l = launch(spin_forever, Duration::from_micros(200)).unwrap();
        assert!(l.is_continuation());
    })
    .join()
    .unwrap();
}

#[test]
fn forked_child_gets_its_own_monitor() {
    let _serial = monitor_mode();
    for _ in 0..10 {
        let l = launch(spin_forever, Duration::from_micros(200)).unwrap();
        assert!(l.is_continuation());
        // SAFETY: the child only launches, resumes and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            in_child();
        }
        let st = wait(pid);
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "child status {st:#x}");
    }
}

#[test]
fn fork_while_other_threads_are_preempted() {
    let _serial = monitor_mode();
    // Started before the threads: a fork while another thread is still in
    // the runtime's first initialisation (before it registered its fork
    // handlers) leaves the child waiting for it.
    linger::init().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut l = launch(spin_forever, Duration::from_micros(100)).unwrap();
                    resume(&mut l, Duration::from_micros(100)).unwrap();
                }
            })
        })
        .collect();
    for i in 0..30 {
        // SAFETY: the child only launches, resumes and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            in_child();
        }
        let st = wait(pid);
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "fork {i}: child status {st:#x}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

/// In a forked child: two slices of a spinning function must end by
/// preemption, through signals of the child's own monitor. Exits with 0
/// if so, or a code saying what failed.
fn in_child() -> ! {
    // The counters were copied from the parent.
    let (_, before) = linger::monitor_counters();
    let code = match launch(spin_forever, Duration::from_millis(1)) {
        Ok(mut l) if l.is_continuation() => match resume(&mut l, Duration::from_millis(1)) {
            Ok(l) if l.is_continuation() => 0,
            Ok(_) => 3,
            Err(_) => 4,
        },
        Ok(_) => 5,
        Err(_) => 6,
    };
    let (_, after) = linger::monitor_counters();
    let code = if code == 0 && after < before + 2 { 7 } else { code };
    // SAFETY: leaving the child without running the test harness's code.
    unsafe { libc::_exit(code) }
}

fn wait(pid: libc::pid_t) -> i32 {
    let mut st = 0;
    // SAFETY: waiting for our child with a valid status pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    st
}
