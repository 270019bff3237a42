//! Green threads under valgrind (`make test-valgrind`): echo over loopback
//! with blocking `std::net` calls, sleeps, joins from green and OS threads,
//! std `Thread`s of green threads' own (a `park_timeout`),
//! panics, thread-locals with destructors, cancels of parked threads, and a
//! runtime shut down with threads parked in I/O and sleeping. Nothing may be
//! definitely lost. Exits non-zero when a result is wrong.
//!
//! Usage: green_leakcheck [THREADS] [ROUNDS]

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use turquoise::thread::{self, Builder};

std::thread_local! {
    static OWNED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn main() {
    // The planned panics reach their joins; their messages would only be noise.
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"planned") {
            default(info);
        }
    }));
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    for round in 0..rounds {
        let rt = turquoise::Builder::new().worker_threads(2).slice(Duration::from_micros(500)).enable_all().build().expect("runtime");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        Builder::new()
            .spawn_on(rt.handle(), move || {
                for c in listener.incoming().take(n as usize) {
                    let mut c = c.expect("accept");
                    thread::spawn(move || {
                        let mut b = [0u8; 256];
                        while let Ok(k @ 1..) = c.read(&mut b) {
                            let _ = c.write_all(&b[..k]);
                        }
                    });
                }
            })
            .expect("acceptor");
        let clients: Vec<_> = (0..n)
            .map(|i| {
                Builder::new()
                    .spawn_on(rt.handle(), move || {
                        OWNED.with(|o| o.borrow_mut().extend(0..i)); // dropped at the thread's end
                        // Its own std `Thread`, given back at its end (or
                        // at its cancel, for the ones that panic below).
                        if i % 2 == 0 {
                            std::thread::park_timeout(Duration::from_micros(10));
                        }
                        let mut s = TcpStream::connect(addr).expect("connect");
                        let msg = i.to_le_bytes();
                        s.write_all(&msg).expect("write");
                        let mut back = [0u8; 8];
                        s.read_exact(&mut back).expect("read");
                        thread::sleep(Duration::from_micros(100 * (i % 5)));
                        if i % 10 == 3 {
                            panic!("planned");
                        }
                        u64::from_le_bytes(back)
                    })
                    .expect("client")
            })
            .collect();
        let mut sum = 0;
        for (i, c) in clients.into_iter().enumerate() {
            match c.join() {
                Ok(v) => sum += v,
                Err(e) if e.is_panic() && i % 10 == 3 => {}
                Err(e) => {
                    eprintln!("round {round}: client {i}: {e}");
                    std::process::exit(1);
                }
            }
        }
        let want: u64 = (0..n).filter(|i| i % 10 != 3).sum();
        if sum != want {
            eprintln!("round {round}: sum {sum}, want {want}");
            std::process::exit(1);
        }
        // Cancelled while parked: unwound on their worker.
        let (_keep, far) = std::os::unix::net::UnixStream::pair().expect("pair");
        let far = std::sync::Arc::new(far);
        let parked: Vec<_> = (0..4)
            .map(|_| {
                let far = far.clone();
                Builder::new().spawn_on(rt.handle(), move || {
                    let _ = (&*far).read(&mut [0u8; 1]);
                })
            })
            .collect::<Result<_, _>>()
            .expect("parked");
        std::thread::sleep(Duration::from_millis(20));
        parked.iter().for_each(|p| p.cancel());
        for p in parked {
            let _ = p.join();
        }
        // Left parked at shutdown: ended with the runtime.
        for _ in 0..4 {
            drop(Builder::new().spawn_on(rt.handle(), || thread::sleep(Duration::from_secs(3600))).expect("sleeper"));
        }
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
    }
    println!("green_leakcheck: {rounds} rounds of {n} threads");
}
