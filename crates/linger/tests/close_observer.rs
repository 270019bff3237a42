//! The park seam's close observer (`linger::park::on_close`): told, after
//! `close`, `dup2`, `dup3` and `close_range`, which numbers no longer name
//! the file they named, and nothing else. Alone in its binary: the observer
//! is one per process.

use std::os::fd::RawFd;
use std::sync::Mutex;

static SEEN: Mutex<Vec<(RawFd, RawFd)>> = Mutex::new(Vec::new());

fn observer(first: RawFd, last: RawFd) {
    // The observer may clobber errno: the wrappers keep the program's.
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = 4321 };
    SEEN.lock().unwrap().push((first, last));
}

fn other(_: RawFd, _: RawFd) {}

/// What the observer saw about numbers in `lo..=hi` since the last call.
fn seen(lo: RawFd, hi: RawFd) -> Vec<(RawFd, RawFd)> {
    let mut s = SEEN.lock().unwrap();
    let mine = s.iter().copied().filter(|&(a, b)| a <= hi && b >= lo).collect();
    s.clear();
    mine
}

fn pipe() -> (RawFd, RawFd) {
    let mut p = [0; 2];
    // SAFETY: a valid array of two.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    (p[0], p[1])
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

fn set_errno(e: i32) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

#[test]
fn closes_and_replacements_are_reported_and_nothing_else() {
    assert!(linger::park::on_close(observer));
    assert!(linger::park::on_close(observer), "the same observer again");
    assert!(!linger::park::on_close(other), "a second observer is refused");
    for round in 0..200 {
        let (r, w) = pipe();
        let (lo, hi) = (r.min(w), r.max(w));

        // close: the number, once; errno as it was.
        set_errno(77);
        // SAFETY: our descriptor.
        assert_eq!(unsafe { libc::close(r) }, 0);
        assert_eq!(errno(), 77, "round {round}: errno kept");
        assert_eq!(seen(lo, hi), vec![(r, r)]);

        // A number that was not open: EBADF, nothing reported.
        // SAFETY: closes nothing (the number was just closed).
        assert_eq!(unsafe { libc::close(r) }, -1);
        assert_eq!(errno(), libc::EBADF);
        assert_eq!(seen(lo, hi), vec![]);

        // dup2 onto an open number replaces its file; onto itself, nothing.
        let (a, b) = pipe();
        // SAFETY: our descriptors.
        assert_eq!(unsafe { libc::dup2(a, b) }, b);
        assert_eq!(seen(a.min(b), a.max(b)), vec![(b, b)]);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::dup2(a, a) }, a);
        assert_eq!(seen(a, a), vec![]);
        // dup3 likewise.
        // SAFETY: as above.
        assert_eq!(unsafe { libc::dup3(w, b, libc::O_CLOEXEC) }, b);
        assert_eq!(seen(b, b), vec![(b, b)]);

        // close_range: the range; with CLOSE_RANGE_CLOEXEC, nothing.
        let (lo2, hi2) = (a.min(b), a.max(b));
        // SAFETY: only marks the numbers close-on-exec (harmless for any
        // of them, and this test execs nothing).
        assert_eq!(unsafe { libc::close_range(lo2 as u32, hi2 as u32, libc::CLOSE_RANGE_CLOEXEC as i32) }, 0);
        assert_eq!(seen(lo2, hi2), vec![]);
        let between_ours = (lo2 + 1..hi2).all(|fd| fd == r || fd == w);
        if between_ours {
            // SAFETY: closes `a`, `b` and numbers of ours in between.
            assert_eq!(unsafe { libc::close_range(lo2 as u32, hi2 as u32, 0) }, 0);
            assert_eq!(seen(lo2, hi2), vec![(lo2, hi2)]);
        } else {
            // SAFETY: our descriptors.
            unsafe { libc::close(a) };
            // SAFETY: as above.
            unsafe { libc::close(b) };
            seen(lo2, hi2);
        }
        // SAFETY: our descriptor (`w` may have been closed by the range).
        unsafe { libc::close(w) };
        seen(0, RawFd::MAX);
    }
}
