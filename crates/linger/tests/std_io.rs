//! Functions blocked in `std`'s own I/O calls (not libc's) are stopped at
//! their deadline, and resumed they finish with the right data and no
//! `Interrupted` error. Until std was judged module by module, every std
//! frame deferred every deadline: a 1 ms launch of `TcpStream::read_exact`
//! came back only when the peer wrote, 2 s later.
//!
//! The peer never writes before the test has seen the function stopped (or
//! after a 20 s watchdog, so that a function that cannot be stopped fails
//! the test instead of hanging it). No timing is asserted.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use linger::{launch, resume, Linger};

const ROUNDS: usize = 30;
const MSG: &[u8] = b"linger-std-io-16";

/// Runs `act` on its own thread once told to, or after 20 s at the latest.
struct Peer {
    go: mpsc::Sender<()>,
    done: JoinHandle<()>,
}

impl Peer {
    fn new(act: impl FnOnce() + Send + 'static) -> Peer {
        let (go, rx) = mpsc::channel::<()>();
        let done = std::thread::spawn(move || {
            let _ = rx.recv_timeout(Duration::from_secs(20));
            act();
        });
        Peer { go, done }
    }

    fn release(self) -> JoinHandle<()> {
        let _ = self.go.send(());
        self.done
    }
}

/// Launches `f` with a 1 ms slice while the peer holds back, checks that
/// it was stopped and stays stopped over a few more slices, lets the peer
/// act, and resumes `f` to its end.
fn stopped_then_completed<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static, peer: Peer, what: &str) -> T {
    let mut l = launch(f, Duration::from_millis(1)).unwrap();
    assert!(l.is_continuation(), "{what}: not stopped while it waited (it returned only when the peer acted)");
    for _ in 0..3 {
        resume(&mut l, Duration::from_micros(300)).unwrap();
        assert!(l.is_continuation(), "{what}: returned before the peer acted");
    }
    let done = peer.release();
    while l.is_continuation() {
        resume(&mut l, Duration::from_millis(50)).unwrap();
    }
    done.join().unwrap();
    match l {
        Linger::Completion(v) => v,
        _ => panic!("{what}: poisoned"),
    }
}

/// One `read` of `reader` while the peer holds back, then writes `MSG`
/// whole into `writer`: the read returns part or all of it, never an error.
fn read_is_stopped_and_resumed(mut reader: impl Read + Send + 'static, mut writer: impl Write + Send + 'static, what: &str) {
    let peer = Peer::new(move || writer.write_all(MSG).unwrap());
    let r = stopped_then_completed(
        move || {
            let mut buf = [0u8; 64];
            reader.read(&mut buf).map(|n| buf[..n].to_vec())
        },
        peer,
        what,
    );
    let got = r.unwrap_or_else(|e| panic!("{what} failed (an EINTR of preemption leaked?): {e}"));
    assert!(!got.is_empty() && MSG.starts_with(&got), "{what} returned {got:?}");
}

fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

#[test]
fn tcp_stream_read_is_stopped_and_resumed() {
    for _ in 0..ROUNDS {
        let (client, server) = tcp_pair();
        read_is_stopped_and_resumed(client, server, "TcpStream::read");
    }
}

#[test]
fn tcp_stream_read_exact_is_stopped_and_resumed() {
    for _ in 0..ROUNDS {
        let (mut client, mut server) = tcp_pair();
        // In three pieces: read_exact waits again after each.
        let peer = Peer::new(move || {
            for part in MSG.chunks(6) {
                server.write_all(part).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let r = stopped_then_completed(
            move || {
                let mut buf = [0u8; MSG.len()];
                client.read_exact(&mut buf).map(|()| buf)
            },
            peer,
            "TcpStream::read_exact",
        );
        assert_eq!(&r.unwrap()[..], MSG);
    }
}

#[test]
fn tcp_listener_accept_is_stopped_and_resumed() {
    for _ in 0..ROUNDS {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = Peer::new(move || TcpStream::connect(addr).unwrap().write_all(MSG).unwrap());
        let r = stopped_then_completed(
            move || {
                let (mut s, _) = listener.accept()?;
                let mut v = Vec::new();
                s.read_to_end(&mut v).map(|_| v)
            },
            peer,
            "TcpListener::accept",
        );
        assert_eq!(r.unwrap(), MSG);
    }
}

#[test]
fn std_pipe_read_is_stopped_and_resumed() {
    for _ in 0..ROUNDS {
        let (reader, writer) = std::io::pipe().unwrap();
        read_is_stopped_and_resumed(reader, writer, "PipeReader::read");
    }
}

#[test]
fn file_on_a_raw_pipe_read_is_stopped_and_resumed() {
    for _ in 0..ROUNDS {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors, each owned by one File from here on.
        let (reader, writer) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
        read_is_stopped_and_resumed(reader, writer, "File::read");
    }
}

#[test]
fn unix_stream_read_is_stopped_and_resumed() {
    for _ in 0..ROUNDS {
        let (a, b) = UnixStream::pair().unwrap();
        read_is_stopped_and_resumed(a, b, "UnixStream::read");
    }
}

/// A child that waits for a line on a pipe the test holds, then exits 7.
fn child_waiting_for_a_line() -> (std::process::Child, std::io::PipeWriter) {
    let (reader, writer) = std::io::pipe().unwrap();
    let child = Command::new("sh")
        .args(["-c", "read x; exit 7"])
        .stdin(Stdio::from(reader))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    (child, writer)
}

#[test]
fn child_wait_is_stopped_and_resumed() {
    for _ in 0..ROUNDS / 2 {
        let (mut child, mut writer) = child_waiting_for_a_line();
        let peer = Peer::new(move || writer.write_all(b"go\n").unwrap());
        let status = stopped_then_completed(move || child.wait(), peer, "Child::wait");
        assert_eq!(status.expect("wait failed").code(), Some(7));
    }
}

#[test]
fn command_output_is_stopped_and_resumed() {
    for _ in 0..ROUNDS / 3 {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let peer = Peer::new(move || writer.write_all(b"go\n").unwrap());
        let out = stopped_then_completed(
            move || Command::new("sh").args(["-c", "read x; echo got $x; exit 3"]).stdin(Stdio::from(reader)).output(),
            peer,
            "Command::output",
        )
        .expect("output failed");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"got go\n");
    }
}

#[test]
fn waitpid_reports_the_programs_own_eintr_only() {
    // A program handler without SA_RESTART still ends waitpid with EINTR
    // inside a function, between preemptions, which alone never do. The
    // function holds the program's signals while stopped, so each one is
    // handled on its own stack.
    extern "C" fn on_usr1(_: libc::c_int) {}
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    for _ in 0..5 {
        let (child, mut writer) = child_waiting_for_a_line();
        let pid = child.id() as libc::pid_t;
        let tid = unsafe { libc::gettid() };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        // Signals every few ms until the function has returned; after 20 s
        // the child is let go instead (the test then fails, not hangs).
        let killer = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(3));
                if t.elapsed() > Duration::from_secs(20) {
                    writer.write_all(b"go\n").unwrap();
                    return None;
                }
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) };
            }
            Some(writer)
        });
        let slice = Duration::from_micros(200);
        let mut l = linger::Builder::new()
            .hold_signals(true)
            .launch(
                move || {
                    let mut status = 0;
                    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
                    (r, std::io::Error::last_os_error().raw_os_error())
                },
                slice,
            )
            .unwrap();
        while l.is_continuation() {
            resume(&mut l, slice).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (r, e) = l.completion().unwrap();
        assert_eq!((r, e), (-1, Some(libc::EINTR)), "the program's own signal must interrupt waitpid");
        let mut writer = killer.join().unwrap().expect("waitpid never saw the program's signal");
        writer.write_all(b"go\n").unwrap();
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }
}
