//! `thread::dump` never lies about a parked thread (issue 27): at 20 us
//! slices, 1-3% of green threads parked in `read()` (and sometimes in
//! `sleep`) showed as running, waiting on nothing, for as long as they were
//! parked: the park marked the state before the thread switched out, and a
//! slice that ended in between let the next switch-in mark it running. Here
//! thousands of threads park at 20 us slices, and the dump must show each
//! one parked on exactly what it waits on, again and again.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turquoise::thread::{self, Builder, Cause, State};

mod common;
use common::{runtime, within};

/// What each thread waits on, by id: `Some(fd)` a read, `None` a sleep.
type Waits = HashMap<u64, Option<i32>>;

/// Threads whose dump entry disagrees with `waits`, in words.
fn disagreements(waits: &Waits) -> Vec<String> {
    let dump = thread::dump();
    let by_id: HashMap<u64, _> = dump.iter().map(|t| (t.id, t)).collect();
    let mut bad = Vec::new();
    for (id, wait) in waits {
        let Some(t) = by_id.get(id) else {
            bad.push(format!("thread {id}: not in the dump"));
            continue;
        };
        let ok = match wait {
            Some(fd) => t.state == State::Parked(Cause::Io) && t.waiting_on.as_deref() == Some(&format!("fd {fd}")),
            None => t.state == State::Parked(Cause::Timer),
        };
        if !ok {
            bad.push(format!("thread {id} waits on {wait:?} but shows {:?} on {:?} ({:?})", t.state, t.waiting_on, t.stats));
        }
    }
    bad
}

#[test]
fn parked_threads_show_parked_on_what_they_wait_on() {
    within(Duration::from_secs(240), "dump", || {
        for round in 0..3 {
            let rt = runtime(1, Duration::from_micros(20));
            let mut waits = Waits::new();
            let mut writers = Vec::new();
            let mut handles = Vec::new();
            for i in 0..1500 {
                if i % 5 == 4 {
                    let h = Builder::new()
                        .spawn_on(rt.handle(), move || {
                            std::hint::black_box(common::spin(200 + i));
                            thread::sleep(Duration::from_secs(3600));
                            0u8
                        })
                        .unwrap();
                    waits.insert(h.thread().id().as_u64().get(), None);
                    handles.push(h);
                    continue;
                }
                let (mut r, w) = UnixStream::pair().unwrap();
                let fd = std::os::fd::AsRawFd::as_raw_fd(&r);
                let h = Builder::new()
                    .spawn_on(rt.handle(), move || {
                        // A little work first, so that slices end all over
                        // the way into the park.
                        std::hint::black_box(common::spin(200 + i));
                        let mut b = [0u8; 1];
                        r.read_exact(&mut b).unwrap();
                        b[0]
                    })
                    .unwrap();
                waits.insert(h.thread().id().as_u64().get(), Some(fd));
                writers.push(w);
                handles.push(h);
            }
            // Until every thread has parked: a thread shown running for good
            // never gets there.
            let until = Instant::now() + Duration::from_secs(30);
            let mut bad = disagreements(&waits);
            while !bad.is_empty() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
                bad = disagreements(&waits);
            }
            assert!(bad.is_empty(), "round {round}: {} of {} threads misreported, e.g. {:?}", bad.len(), waits.len(), &bad[..bad.len().min(3)]);
            // And it stays so.
            for _ in 0..5 {
                std::thread::sleep(Duration::from_millis(10));
                let bad = disagreements(&waits);
                assert!(bad.is_empty(), "round {round}: {:?}", &bad[..bad.len().min(3)]);
            }
            for mut w in writers {
                w.write_all(&[7]).unwrap();
            }
            let mut read = 0;
            for h in handles {
                if waits[&h.thread().id().as_u64().get()].is_some() {
                    assert_eq!(rt.block_on(h).unwrap(), 7);
                    read += 1;
                } else {
                    h.cancel();
                }
            }
            assert_eq!(read, 1200);
        }
    });
}

/// A parked thread that is woken while its worker is busy waits for the
/// worker, not for what it parked on: listed as runnable (it was listed as
/// parked until its switch-in).
#[test]
fn a_woken_thread_waiting_for_its_worker_is_runnable() {
    let rt = runtime(1, Duration::from_micros(20));
    within(Duration::from_secs(60), "woken thread", move || {
        for round in 0..20 {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            let waiter = Builder::new().spawn_on(rt.handle(), move || thread::block_on(rx).unwrap()).unwrap();
            let id = waiter.thread().id().as_u64().get();
            let state = |id: u64| thread::dump().into_iter().find(|t| t.id == id).map(|t| t.state);
            while state(id) != Some(State::Parked(Cause::Future)) {
                std::thread::sleep(Duration::from_micros(100));
            }
            // The worker's only thread from now on: never stopped by its
            // slice, it holds the worker until told to end.
            let busy = Arc::new(AtomicBool::new(true));
            let b = busy.clone();
            let hog = Builder::new()
                .preemptive(false)
                .spawn_on(rt.handle(), move || {
                    while b.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap();
            let hog_id = hog.thread().id().as_u64().get();
            while state(hog_id) != Some(State::Running) {
                std::thread::sleep(Duration::from_micros(100));
            }
            // The wake-up comes from this OS thread; the worker cannot run
            // the waiter until the hog ends.
            tx.send(round).unwrap();
            let seen = state(id);
            busy.store(false, Ordering::Relaxed);
            assert_eq!(seen, Some(State::Runnable), "round {round}: woken, waiting for its worker");
            assert_eq!(waiter.join().unwrap(), round);
            hog.join().unwrap();
        }
    });
}

/// The registry the dump reads reuses the slots of ended threads (issue 28:
/// no global map on the spawn path). Threads that end at once, threads
/// cancelled while parked and threads that live on are spawned from green
/// threads of both workers and from an OS thread at once, round after round:
/// every thread alive must be listed, and no ended one (a slot given back
/// twice, or the wrong one, would drop a live thread from the list). It
/// also caught a lost cancel: a sleeper cancelled just after its spawn
/// slept on, and hung its joiner (every run, within 40 rounds).
#[test]
fn the_dump_lists_every_live_thread_while_others_come_and_go() {
    within(Duration::from_secs(240), "registry", || {
        let rt = runtime(2, Duration::from_micros(20));
        for round in 0..100 {
            // From two green spawners (one per worker, if stealing allows)
            // and this OS thread: short threads, and sleepers kept.
            let spawn_some = |h: &turquoise::Handle| {
                let mut keep = Vec::new();
                for i in 0..60u64 {
                    let short = Builder::new().spawn_on(h, move || std::hint::black_box(i)).unwrap();
                    let long = Builder::new()
                        .spawn_on(h, || {
                            thread::sleep(Duration::from_secs(3600));
                            0u64
                        })
                        .unwrap();
                    if i % 3 == 0 {
                        long.cancel();
                        assert!(long.join().is_err(), "a cancelled sleeper gave a value");
                    } else {
                        keep.push(long);
                    }
                    assert_eq!(short.join().unwrap(), i);
                }
                keep
            };
            let spawners: Vec<_> = (0..2)
                .map(|_| {
                    let h = rt.handle().clone();
                    Builder::new().spawn_on(rt.handle(), move || spawn_some(&h)).unwrap()
                })
                .collect();
            let mut kept = spawn_some(rt.handle());
            for s in spawners {
                kept.extend(s.join().unwrap());
            }
            let listed: std::collections::HashSet<u64> = thread::dump().iter().map(|t| t.id).collect();
            let missing: Vec<u64> = kept.iter().map(|k| k.thread().id().as_u64().get()).filter(|id| !listed.contains(id)).collect();
            assert!(missing.is_empty(), "round {round}: live threads not in the dump: {missing:?}");
            let ids: Vec<u64> = kept.iter().map(|k| k.thread().id().as_u64().get()).collect();
            for k in kept {
                k.cancel();
                let _ = k.join();
            }
            let listed: std::collections::HashSet<u64> = thread::dump().iter().map(|t| t.id).collect();
            let stale: Vec<&u64> = ids.iter().filter(|id| listed.contains(id)).collect();
            assert!(stale.is_empty(), "round {round}: ended threads still in the dump: {stale:?}");
        }
    });
}
