//! Smoke test of the web-server harness: every Rust server answers
//! requests split across writes, pipelined, with `Connection: close`, and
//! malformed ones, and the load generator's closed and open loops get
//! every answer from each. No speed is asserted.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use green_bench::client::{self, Load, Plan};
use green_bench::http::{self, Handler, BAD_REQUEST, BODY, RESPONSE};
use green_bench::servers::{self, Kind, Options};

/// Starts a server of `kind` on a thread of this process (left running).
fn start(kind: Kind) -> SocketAddr {
    let l = servers::listener(0).expect("listener");
    let addr = l.local_addr().expect("address");
    // Long requests spin ~0.2 ms here: only their path is checked.
    let o = Options { slice: Duration::from_millis(2), handler: Handler::calibrated(0.2) };
    std::thread::spawn(move || servers::run(kind, l, &o));
    addr
}

fn read_to_end(mut s: TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut v = Vec::new();
    s.read_to_end(&mut v).expect("read to the end");
    v
}

fn by_hand(kind: Kind, addr: SocketAddr) {
    // Split across two writes, then two pipelined in one, then a close.
    let mut s = TcpStream::connect(addr).unwrap();
    let req = http::request(false);
    s.write_all(&req[..7]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    s.write_all(&req[7..]).unwrap();
    let mut one = vec![0u8; RESPONSE.len()];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.read_exact(&mut one).unwrap();
    assert_eq!(one, RESPONSE, "{kind:?}");
    assert!(one.ends_with(BODY));
    s.write_all(&[http::request(true), http::request(false), b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"].concat()).unwrap();
    assert_eq!(read_to_end(s), RESPONSE.repeat(3), "{kind:?}: two pipelined, then one that closes");
    // Malformed: a 400, then the server closes.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"not http\r\n\r\n").unwrap();
    assert_eq!(read_to_end(s), BAD_REQUEST, "{kind:?}");
}

fn load(kind: Kind, addr: SocketAddr, load: Load, answers: u64) {
    let plan = Plan {
        conns: 16,
        load,
        permille: 100,
        warmup: Duration::ZERO,
        measure: Duration::from_secs(5),
        timeout: Duration::from_secs(2),
        server_pid: None,
        max_answers: Some(answers),
    };
    let out = client::run(addr, &plan).expect("load generator");
    assert_eq!(out.connected, 16, "{kind:?}");
    assert_eq!((out.errors, out.timeouts), (0, 0), "{kind:?} {load:?}");
    assert!(out.answered >= answers, "{kind:?} {load:?}: {} answered", out.answered);
    assert!(!out.long.is_empty() && out.short.len() > out.long.len(), "{kind:?}: long requests answered too");
}

#[test]
fn every_rust_server_answers_the_load_generator() {
    for kind in Kind::RUST {
        let addr = start(kind);
        by_hand(kind, addr);
        load(kind, addr, Load::Closed, 2000);
        load(kind, addr, Load::Open { rate: 4000.0 }, 400);
    }
}
