//! A stack overflow inside a preemptible function is reported clearly and
//! returned as an error; the process survives. Run in a child process so a
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
            Err(Error::StackOverflow { stack_size }) => assert_eq!(stack_size, 64 * 1024),
            other => panic!("expected a stack overflow error, got {other:?}"),
        }
    }
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
    assert_eq!(stderr.matches("stack overflow in a preemptible function").count(), 3, "stderr: {stderr}");
    assert!(out.status.success(), "child died: {:?}\n{stderr}", out.status);
    assert!(stdout.contains("child survived"));
}
