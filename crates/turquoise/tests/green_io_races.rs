//! Races around parked calls. Alone in its binary: it closes a descriptor a
//! green thread waits on, and another test's new descriptor must not take
//! that number meanwhile (the waiter's retry would read that file, as a
//! pthread's next `read` on a reused number would).

use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::thread::Builder;

mod common;
use common::runtime;

/// Two readers of one socket, a timeout expiring as data arrives, the
/// program's own non-blocking descriptor, a close while a thread waits, and
/// `poll`'s timeout: 100 rounds.
#[test]
fn parked_calls_under_races() {
    let rt = runtime(2, Duration::from_micros(200));
    for round in 0..100 {
        // Two threads reading one socket: each byte reaches exactly one.
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let a = Arc::new(a);
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let a = a.clone();
                Builder::new()
                    .spawn_on(rt.handle(), move || {
                        let mut x = [0u8; 1];
                        (&*a).read_exact(&mut x).map(|_| x[0])
                    })
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_micros(200));
        (&b).write_all(&[1, 2]).unwrap();
        let mut got: Vec<u8> = readers.into_iter().map(|r| r.join().unwrap().unwrap()).collect();
        got.sort();
        assert_eq!(got, vec![1, 2], "round {round}");

        // A receive timeout expiring as the data arrives: data or
        // WouldBlock, never EINTR or a hang; the data is never lost.
        let (x, y) = std::os::unix::net::UnixStream::pair().unwrap();
        x.set_read_timeout(Some(Duration::from_micros(500 + (round % 5) * 200))).unwrap();
        let reader = Builder::new()
            .spawn_on(rt.handle(), move || {
                let mut v = [0u8; 1];
                let t = Instant::now();
                let first = (&x).read(&mut v);
                match first {
                    Ok(1) => (v[0], true, t.elapsed()),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        x.set_read_timeout(None).unwrap();
                        (&x).read_exact(&mut v).unwrap();
                        (v[0], false, t.elapsed())
                    }
                    other => panic!("round {round}: {other:?}"),
                }
            })
            .unwrap();
        std::thread::sleep(Duration::from_micros(700));
        (&y).write_all(&[9]).unwrap();
        let (v, _in_time, _) = reader.join().unwrap();
        assert_eq!(v, 9);

        // The program's own non-blocking descriptor: WouldBlock, no park.
        let (p, _q) = std::os::unix::net::UnixStream::pair().unwrap();
        p.set_nonblocking(true).unwrap();
        let e = Builder::new().spawn_on(rt.handle(), move || (&p).read(&mut [0u8; 1]).unwrap_err().kind()).unwrap();
        assert_eq!(e.join().unwrap(), ErrorKind::WouldBlock);

        // Closed by another thread while one waits (close, dup2 over the
        // number, or fclose of a stream on it): the waiter is woken and its
        // retry fails with EBADF,
        // with nothing written to the peer (the kernel dropped the waiter's
        // epoll registration with the file; linger's close wrappers tell
        // turquoise). A waiter that had not started yet gets EBADF at once.
        for how in ["close", "dup2", "fclose"] {
            let (m, n) = std::os::unix::net::UnixStream::pair().unwrap();
            let fd = m.as_raw_fd();
            let m = std::mem::ManuallyDrop::new(m);
            let waiter = Builder::new()
                .spawn_on(rt.handle(), move || {
                    let mut v = [0u8; 1];
                    // SAFETY: a read into our buffer on a number that may be
                    // closed meanwhile (then EBADF).
                    let r = unsafe { libc::read(fd, v.as_mut_ptr().cast(), 1) };
                    (r, std::io::Error::last_os_error().raw_os_error())
                })
                .unwrap();
            std::thread::sleep(Duration::from_micros(300));
            if how == "close" {
                // SAFETY: closes the number the waiter reads (the race under test).
                unsafe { libc::close(fd) };
            } else if how == "fclose" {
                // SAFETY: a stream on the number the waiter reads, closed
                // with it (libc closes the descriptor by a direct system call).
                unsafe {
                    let f = libc::fdopen(fd, c"r".as_ptr());
                    assert!(!f.is_null());
                    libc::fclose(f);
                }
            } else {
                // dup2 of a fresh, never-readable pipe end over the number,
                // then that number closed too: the waiter's retry reads the
                // new file (empty, would block) or EBADF.
                let (o, _keep) = std::os::unix::net::UnixStream::pair().unwrap();
                // SAFETY: replaces the number the waiter reads (the race under test).
                assert_eq!(unsafe { libc::dup2(o.as_raw_fd(), fd) }, fd);
                // SAFETY: as above.
                unsafe { libc::close(fd) };
            }
            let _ = m; // the number is closed above: never dropped (closed twice)
            let (r, e) = waiter.join().unwrap();
            assert!(r == -1 && e == Some(libc::EBADF), "round {round}, {how}: read gave {r}, errno {e:?}");
            drop(n);
        }

        // poll with a timeout and no data: returns 0 after the timeout.
        let (s1, _s2) = std::os::unix::net::UnixStream::pair().unwrap();
        let polled = Builder::new()
            .spawn_on(rt.handle(), move || {
                let mut p = libc::pollfd { fd: s1.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                let t = Instant::now();
                // SAFETY: one valid pollfd.
                let r = unsafe { libc::poll(&mut p, 1, 3) };
                (r, t.elapsed())
            })
            .unwrap();
        let (r, took) = polled.join().unwrap();
        assert!(r == 0 && took >= Duration::from_millis(3), "round {round}: poll {r} after {took:?}");
    }
}

