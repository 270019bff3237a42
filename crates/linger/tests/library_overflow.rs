//! A stack overflow inside library code (here: under `std`'s stdout lock,
//! in a `Display` impl that `write!` calls back) must not leave the
//! library's lock held: the call finishes on the stack's emergency reserve,
//! and the function is abandoned as overflowed when it returns to its own
//! code. Before, the function was abandoned in the middle of the call: the
//! stdout `RefCell` stayed borrowed (this thread's next write panicked) and
//! its lock owned (other threads' writes hung for good).
//!
//! Run in a child process, so that a regression cannot take the harness down.

use std::fmt;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linger::{Builder, Error};

/// The running function's stack bottom, from the interposed
/// `pthread_getattr_np` (it describes the function's own stack).
fn stack_floor() -> usize {
    // SAFETY: a zeroed attribute object filled by pthread_getattr_np and
    // destroyed after use; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let mut lo: *mut libc::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut lo, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        lo as usize
    }
}

/// Formats by descending with 512-byte frames until `left` bytes or fewer
/// remain above `floor`, then formatting a float (core's float formatting
/// takes a few KiB) into a local buffer. With `left` small, the stack runs
/// out somewhere in that work, with the stdout lock held by the `print!`
/// below it. Writes nothing to stdout itself.
struct Deep {
    floor: usize,
    left: usize,
}

#[inline(never)]
fn descend(limit: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let buf = [3u64; 64];
    let here = std::hint::black_box(&buf) as *const _ as usize;
    if here > limit {
        descend(limit, f)?;
    }
    let mut local = [0u8; 64];
    let _ = write!(&mut local[..], "{:e}", std::hint::black_box(1.234_567_890_123e300f64) * buf[5] as f64);
    std::hint::black_box(&local);
    f.write_str("")
}

impl fmt::Display for Deep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        descend(self.floor + self.left, f)
    }
}

/// Writes to stdout from another thread, within a generous time: a lock
/// left held by an abandoned function would make this hang.
fn stdout_usable_from_another_thread() -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"");
        let _ = out.flush();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20)).is_ok()
}

fn child() {
    let mut overflows = 0;
    let mut completions = 0;
    // From "plenty left" down to "none left": every depth at which the stack
    // runs out inside the formatting, 16 bytes apart, a few times each.
    for round in 0..3 {
        for left in (0..=12 * 1024usize).rev().step_by(16) {
            let r = Builder::new().stack_size(64 * 1024).launch(
                move || {
                    let floor = stack_floor();
                    // std takes the stdout lock inside `print!` and
                    // releases it when the call returns.
                    print!("{}", Deep { floor, left });
                    left
                },
                Duration::MAX,
            );
            match r {
                Ok(l) => {
                    assert_eq!(l.completion(), Some(left));
                    completions += 1;
                }
                Err(Error::StackOverflow { .. }) => overflows += 1,
                Err(e) => panic!("left {left}, round {round}: {e:?}"),
            }
            // This thread's own stdout works (the RefCell is not borrowed),
            // and so does another thread's (the lock is free).
            let mut out = std::io::stdout().lock();
            out.write_all(b"").unwrap();
            drop(out);
            if left % 1024 == 0 {
                assert!(stdout_usable_from_another_thread(), "left {left}, round {round}: stdout lock held");
            }
        }
    }
    let s = linger::stats();
    println!("overflows {overflows} completions {completions} library_overflows {}", s.library_overflows);
    assert!(overflows > 0 && completions > 0, "the sweep missed the bottom of the stack");
    assert!(s.library_overflows > 0, "no overflow was finished on the reserve");
    assert!(stdout_usable_from_another_thread(), "stdout lock held");
    // The runtime still works afterwards.
    let l = linger::launch(|| 5, Duration::from_millis(10)).unwrap();
    assert_eq!(l.completion(), Some(5));
    println!("child survived");
}

#[test]
fn overflow_under_the_stdout_lock_releases_it() {
    if std::env::var_os("LINGER_LIBRARY_OVERFLOW_CHILD").is_some() {
        child();
        return;
    }
    // Bounded: with a lock left held, the harness itself hangs as it
    // prints the child's result (its stdout lock is owned by a dead frame).
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "overflow_under_the_stdout_lock_releases_it", "--nocapture"])
        .env("LINGER_LIBRARY_OVERFLOW_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || { let mut b = Vec::new(); let _ = so.read_to_end(&mut b); b }),
        std::thread::spawn(move || { let mut b = Vec::new(); let _ = se.read_to_end(&mut b); b }),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out_bytes = readers.0.join().unwrap();
    let err_bytes = readers.1.join().unwrap();
    let out = (status, out_bytes, err_bytes);
    let stderr = String::from_utf8_lossy(&out.2);
    let stdout = String::from_utf8_lossy(&out.1);
    assert!(
        out.0.is_some_and(|s| s.success()) && stdout.contains("child survived"),
        "child failed or hung (None: killed after 120 s): {:?}\nstdout: {stdout}\nstderr (tail): {}",
        out.0,
        &stderr[stderr.len().saturating_sub(3000)..]
    );
    eprintln!("child: {}", stdout.lines().find(|l| l.starts_with("overflows")).unwrap_or("?"));
    // Returned and counted (the child checks both), printed nowhere.
    assert!(!stderr.contains("stack overflow"), "linger printed on the program's stderr: {}", &stderr[stderr.len().saturating_sub(2000)..]);
}
