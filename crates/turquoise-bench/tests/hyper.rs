//! hyper inside preemptible tasks: the benchmark's server under
//! `turquoise::Runtime` (one worker, 2 ms slices) answers short requests
//! while a request that computes for seconds is preempted again and again,
//! then answers that one too. Under tokio the short ones would wait for it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sends `GET /{iters}` on `s` and reads the answer's head.
fn get(s: &mut TcpStream, iters: u64) -> String {
    // One write (`write!` makes several: Nagle and the peer's delayed ack
    // would add 40 ms to each request).
    s.write_all(format!("GET /{iters} HTTP/1.1\r\nhost: test\r\n\r\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "the server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the benchmark's server on a port that was free a moment ago
/// (another process may take it in between: then another port).
fn start_server() -> (Server, u16) {
    for _ in 0..20 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_turquoise-bench"))
            .args(["server", "turquoise", "2000", &port.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 6];
        let ok = child.stdout.take().unwrap().read_exact(&mut ready).is_ok();
        let server = Server(child);
        if ok {
            assert_eq!(&ready, b"ready\n");
            return (server, port);
        }
    }
    panic!("no port the server could listen on");
}

#[test]
fn hyper_serves_short_requests_while_a_long_one_is_preempted() {
    for round in 0..2 {
        let (_server, port) = start_server();
        let addr = ("127.0.0.1", port);
        // About 1.5 s of computation in one request handler.
        let long = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            get(&mut s, 1_500_000_000)
        });
        std::thread::sleep(Duration::from_millis(100));
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let t = Instant::now();
        for i in 0..50 {
            let head = get(&mut s, 1000);
            assert!(head.starts_with("HTTP/1.1 200"), "round {round}, short request {i}: {head}");
        }
        let shorts = t.elapsed();
        assert!(!long.is_finished(), "round {round}: the long request ended before the short ones (too short to tell)");
        let head = long.join().unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "round {round}, long request: {head}");
        eprintln!("round {round}: 50 short requests in {shorts:?} while the long one ran");
    }
}
