//! A stack overflow inside a preemptible function is returned as an error
//! that says what to do, and printed nowhere (the program's stderr is its
//! own); the process survives. Run in a child process so a
//! regression cannot take the test harness down.

use std::process::Command;
use std::time::Duration;

use linger::{Builder, Error};

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    let buf = [n; 64];
    std::hint::black_box(&buf);
    recurse(n + 1) + std::hint::black_box(buf[3])
}

fn child() {
    for _ in 0..3 {
        let r = Builder::new().stack_size(64 * 1024).launch(|| recurse(0), Duration::MAX);
        match r {
            Err(e @ Error::StackOverflow { stack_size }) => {
                assert_eq!(stack_size, 64 * 1024);
                assert!(e.to_string().contains("raise LINGER_STACK_SIZE or Builder::stack_size"), "{e}");
            }
            other => panic!("expected a stack overflow error, got {other:?}"),
        }
    }
    assert_eq!(linger::stats().stack_overflows, 3);
    // The runtime still works afterwards.
    let l = linger::launch(|| 5, Duration::from_millis(10)).unwrap();
    assert_eq!(l.completion(), Some(5));
    println!("child survived");
}

#[test]
fn stack_overflow_is_reported_and_survived() {
    if std::env::var_os("LINGER_OVERFLOW_CHILD").is_some() {
        child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "stack_overflow_is_reported_and_survived", "--nocapture"])
        .env("LINGER_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stderr.contains("stack overflow"), "linger printed on the program's stderr: {stderr}");
    assert!(out.status.success(), "child died: {:?}\n{stderr}", out.status);
    assert!(stdout.contains("child survived"));
}

/// The lowest usable address of the running function's stack, as
/// `pthread_getattr_np` reports it (linger's wrapper describes the
/// function's own stack; the guarded range lies below it).
fn stack_floor(addr: usize) -> usize {
    // SAFETY: a zeroed attribute object filled by pthread_getattr_np and
    // destroyed after use; the out-pointers are valid locals.
    let (lo, size) = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let mut lo: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut lo, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        (lo as usize, size)
    };
    assert!((lo..lo + size).contains(&addr), "{addr:#x} is not on the reported stack {lo:#x}+{size:#x}");
    lo
}

/// Descends with 256-byte frames until fewer than `room` bytes are left
/// above `floor`, then computes there for a while (no calls, so no stack
/// use) before climbing back.
#[inline(never)]
fn descend(floor: usize, room: usize, spins: u64) -> u64 {
    let buf = [7u64; 32];
    let here = std::hint::black_box(&buf) as *const _ as usize;
    if here > floor + room {
        return descend(floor, room, spins) + std::hint::black_box(buf[1]);
    }
    let mut acc = 0u64;
    for i in 0..spins {
        acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    acc
}

static PROGRAM_SEGV: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn program_segv(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    PROGRAM_SEGV.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(3) };
}

fn deep_child() {
    if std::env::var_os("LINGER_DEEP_PROGRAM_HANDLER").is_some() {
        // A program that catches its own stack overflows (libsigsegv's way):
        // our timer's troubles must never reach its handler.
        // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler; an
        // alternate stack we leak on purpose.
        unsafe {
            let alt = libc::mmap(std::ptr::null_mut(), 65536, libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            assert_ne!(alt, libc::MAP_FAILED);
            let ss = libc::stack_t { ss_sp: alt, ss_flags: 0, ss_size: 65536 };
            assert_eq!(libc::sigaltstack(&ss, std::ptr::null_mut()), 0);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = program_segv as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
        }
    }
    // Every depth from where the kernel has no room for the timer's signal
    // frame, through where the frame fits but the handler's first calls or
    // its decision would run into the guard page, to where all fits: 64-byte
    // steps, each held for about 100 deadlines.
    let mut deferrals = 0;
    for room in (256usize..=20 * 1024).step_by(64) {
        // Near the bottom, the function is run again until a deadline came
        // while it was there: under `LINGER_TIMEKEEPING=monitor` a run of a
        // few ms can see none when the monitor thread gets no CPU meanwhile
        // (see docs/safety.md, "Timekeeping").
        let mut runs = 0;
        loop {
            let s0 = linger::stats();
            let mut l = Builder::new()
                .stack_size(64 * 1024)
                .launch(
                    move || {
                        let probe = 0u8;
                        let floor = stack_floor(std::hint::black_box(&probe) as *const u8 as usize);
                        descend(floor, room, 2_000_000)
                    },
                    Duration::from_micros(20),
                )
                .unwrap_or_else(|e| panic!("room {room}: {e:?}"));
            while l.is_continuation() {
                linger::resume(&mut l, Duration::from_micros(20)).unwrap_or_else(|e| panic!("room {room}: {e:?}"));
            }
            let s1 = linger::stats();
            assert!(l.is_completion(), "room {room}: {l:?}");
            deferrals += s1.deferrals - s0.deferrals;
            runs += 1;
            if room > 8 * 1024 || s1.deferrals > s0.deferrals {
                break;
            }
            assert!(runs < 20, "room {room}: no deadline was deferred at the bottom of the stack in {runs} runs");
        }
    }
    println!("{deferrals} deadlines deferred near the bottom of the stack");
    println!("child survived");
}

/// A deadline that comes while the function is near the bottom of its
/// stack is taken later, when it has climbed back: never a false stack
/// overflow, with or without a program SIGSEGV handler.
#[test]
fn deadline_near_stack_bottom_is_deferred_not_fatal() {
    if std::env::var_os("LINGER_DEEP_CHILD").is_some() {
        deep_child();
        return;
    }
    for with_handler in [false, true] {
        for round in 0..1 {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.args(["--exact", "deadline_near_stack_bottom_is_deferred_not_fatal", "--nocapture"])
                .env("LINGER_DEEP_CHILD", "1");
            if with_handler {
                cmd.env("LINGER_DEEP_PROGRAM_HANDLER", "1");
            }
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("child survived"),
                "handler {with_handler}, round {round}: child failed: {:?}\nstdout: {stdout}\nstderr: {stderr}",
                out.status
            );
        }
    }
}
