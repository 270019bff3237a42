//! A `tracing` event per park of a green thread. Alone in its binary: the
//! subscriber is the process's global default (green threads run on the
//! runtime's workers, where a scoped one would not reach).
#![cfg(feature = "tracing")]

use std::io::Write;
use std::time::Duration;

mod common;
use common::Buffer;

use turquoise::thread::Builder;

#[test]
fn an_event_per_park() {
    let buf = Buffer::default();
    let subscriber = buf.debug_subscriber();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().unwrap();
    let h = Builder::new()
        .name("traced")
        .spawn_on(rt.handle(), || {
            for _ in 0..10 {
                turquoise::thread::sleep(Duration::from_micros(200));
            }
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            let reader = turquoise::thread::spawn(move || {
                use std::io::Read;
                let mut v = [0u8; 1];
                (&a).read_exact(&mut v).unwrap();
            });
            turquoise::thread::sleep(Duration::from_millis(2));
            (&b).write_all(&[1]).unwrap();
            reader.join().unwrap();
        })
        .unwrap();
    h.join().unwrap();
    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let parks: Vec<&str> = out.lines().filter(|l| l.contains("turquoise::thread: park")).collect();
    let ours = parks.iter().filter(|l| l.contains("name=\"traced\"")).count() as u64;
    assert!(ours >= 11, "{ours} events for the named thread: {out}");
    assert!(parks.iter().any(|l| l.contains("cause=timer")), "{out}");
    assert!(parks.iter().any(|l| l.contains("cause=io")), "{out}");
    assert!(parks.iter().any(|l| l.contains("cause=join")), "{out}");
}
