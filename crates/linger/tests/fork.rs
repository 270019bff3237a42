//! A forked child (which inherits the thread's state but not its POSIX
//! timer) can still preempt, whether it forked outside or inside a
//! preemptible function.

use std::time::Duration;

use linger::{launch, resume};

fn spin() -> u64 {
    let mut x = 0u64;
    loop {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
    }
}

fn wait_child(pid: libc::pid_t) -> i32 {
    let mut st = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st), "child died: status {st:#x}");
    libc::WEXITSTATUS(st)
}

#[test]
fn child_preempts_after_fork_outside() {
    for _ in 0..20 {
        let l = launch(spin, Duration::from_micros(200)).unwrap();
        assert!(l.is_continuation());
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = match launch(spin, Duration::from_millis(1)) {
                Ok(mut l) => l.is_continuation() && resume(&mut l, Duration::from_millis(1)).is_ok() && l.is_continuation(),
                Err(_) => false,
            };
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert_eq!(wait_child(pid), 0, "linger failed in the child");
    }
}

#[test]
fn child_preempts_after_fork_inside() {
    for _ in 0..20 {
        let mut l = launch(
            || {
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    return 0; // child: keep running inside the function
                }
                pid
            },
            Duration::from_secs(10),
        )
        .unwrap();
        let Some(pid) = std::mem::replace(&mut l, linger::Linger::Poison).completion() else { panic!() };
        if pid == 0 {
            // Child: the fork happened inside a function that then returned.
            // A new function must still be preempted on time.
            let ok = launch(spin, Duration::from_millis(1)).map(|l| l.is_continuation()).unwrap_or(false);
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert_eq!(wait_child(pid), 0, "linger failed in the child");
        // And one where the child keeps spinning inside the function: its
        // inherited deadline must still fire.
        let mut l = launch(
            || {
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    unsafe { libc::alarm(10) }; // a regression kills the child, not the test run
                    spin();
                }
                pid
            },
            Duration::from_millis(2),
        )
        .unwrap();
        // The parent's function returns at once; the child's spins and must
        // come back here preempted.
        match std::mem::replace(&mut l, linger::Linger::Poison) {
            linger::Linger::Completion(pid) => assert_eq!(wait_child(pid), 0),
            linger::Linger::Continuation(_) => unsafe { libc::_exit(0) },
            linger::Linger::Poison => unreachable!(),
        }
    }
}
