//! Green threads when the process runs out of address space or descriptors:
//! clear errors, never an abort. Alone in its binary (limits are the
//! process's).

use std::io::{Read, Write};
use std::time::Duration;

use turquoise::thread::{self, Builder};

fn set_limit(resource: libc::__rlimit_resource_t, soft: u64) -> u64 {
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid out pointer; then a limit within the hard one.
    unsafe {
        libc::getrlimit(resource, &mut old);
        let new = libc::rlimit { rlim_cur: soft.min(old.rlim_max), rlim_max: old.rlim_max };
        assert_eq!(libc::setrlimit(resource, &new), 0);
    }
    old.rlim_cur
}

fn vm_size() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmSize:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
        * 1024
}

#[test]
fn running_out_of_address_space_and_descriptors_gives_errors() {
    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().unwrap();
    // Warm everything up (the thread-local set, pools, the reactor).
    Builder::new().spawn_on(rt.handle(), || thread::sleep(Duration::from_millis(1))).unwrap().join().unwrap();

    // Address space: 64 MiB more than now; stacks (256 KiB each, reserved
    // lazily) run out first. Spawning then fails with an error, parked
    // threads stay fine, and after the limit is lifted spawning works again.
    let old = set_limit(libc::RLIMIT_AS, vm_size() + (64 << 20));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let mut parked = Vec::new();
    let err = loop {
        let rx = rx.clone();
        match Builder::new().spawn_on(rt.handle(), move || {
            // Parks on the timer until the channel says go.
            while rx.lock().unwrap().try_recv().is_err() {
                thread::sleep(Duration::from_millis(2));
            }
        }) {
            Ok(h) => parked.push(h),
            Err(e) => break e,
        }
        assert!(parked.len() < 100_000, "the limit never bit");
    };
    set_limit(libc::RLIMIT_AS, old);
    assert!(!parked.is_empty(), "some threads fit: {err}");
    assert!(err.to_string().contains("stack") || err.kind() == std::io::ErrorKind::OutOfMemory, "{err:?}");
    for _ in 0..parked.len() {
        tx.send(()).unwrap();
    }
    for h in parked {
        h.join().unwrap();
    }
    assert_eq!(Builder::new().spawn_on(rt.handle(), || 7).unwrap().join().unwrap(), 7);

    // Descriptors: the program's own calls get EMFILE; a parked read whose
    // hook cannot duplicate the descriptor blocks instead, and still gets
    // its data.
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let old = set_limit(libc::RLIMIT_NOFILE, 0);
    let reader = Builder::new()
        .spawn_on(rt.handle(), move || {
            let mut v = [0u8; 3];
            (&a).read_exact(&mut v).map(|_| v)
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    (&b).write_all(b"abc").unwrap();
    assert_eq!(&reader.join().unwrap().unwrap(), b"abc");
    let fill = Builder::new()
        .spawn_on(rt.handle(), || {
            let mut kept = Vec::new();
            let e = loop {
                match std::net::TcpListener::bind("127.0.0.1:0") {
                    Ok(l) => kept.push(l),
                    Err(e) => break e,
                }
            };
            (e.raw_os_error(), kept.len())
        })
        .unwrap();
    let (e, _) = fill.join().unwrap();
    assert_eq!(e, Some(libc::EMFILE));
    set_limit(libc::RLIMIT_NOFILE, old);
}
