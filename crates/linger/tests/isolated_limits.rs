//! Bad input around isolation: more isolated functions than libsets, a
//! library that cannot be copied or is not loaded, and the namespace
//! tunable. Each gets a clear error, never an abort. Each case runs in a
//! child process: isolation is set up once per process.

use std::process::Command;
use std::time::{Duration, Instant};

use linger::{pause, Builder, Error, Exhausted, Linger, Selection};

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the functions here call no isolated library, or only
    // zlibVersion, whose static string they return as an address to compare.
    unsafe { Builder::new().isolated(true) }
}

#[link(name = "z")]
extern "C" {
    fn zlibVersion() -> *const u8;
}

fn run_case(case: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "isolation_cases", "--nocapture", "--test-threads=1"]).env("LINGER_ISOLATION_CASE", case);
    cmd.env_remove("GLIBC_TUNABLES");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "case {case} failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Launches isolated functions that stay paused until a launch fails;
/// returns them and the error.
fn fill() -> (Vec<Linger<usize>>, Error) {
    let mut held = Vec::new();
    loop {
        let f = || {
            pause();
            gotcha::current_libset()
        };
        match isolated().launch(f, Duration::MAX) {
            Ok(l) => {
                assert!(l.is_continuation());
                held.push(l);
                assert!(held.len() <= 15, "more libsets than glibc has namespaces");
            }
            Err(e) => return (held, e),
        }
    }
}

fn line(out: &str, key: &str) -> String {
    // (libtest may print the test's name on the same line first.)
    out.lines().find_map(|l| l.split_once(key).map(|x| x.1)).unwrap_or_default().trim().to_owned()
}

#[test]
fn isolation_cases() {
    let Ok(case) = std::env::var("LINGER_ISOLATION_CASE") else { return };
    match case.as_str() {
        "exhausted" => {
            linger::isolate(&Selection::parse("libz").unwrap()).unwrap();
            let (mut held, e) = fill();
            assert!(matches!(e, Error::Isolation(gotcha::Error::NoLibset { .. })), "{e}");
            assert_eq!(e.errno(), libc::EAGAIN);
            println!("libsets: {}", held.len());
            println!("error: {e}");
            // Share: runs with the program's own libraries.
            let l = isolated().when_no_libset(Exhausted::Share).launch(gotcha::current_libset, Duration::MAX).unwrap();
            assert!(matches!(l, Linger::Completion(0)));
            // Wait: fails after the wait when nothing is released...
            let t = Instant::now();
            let e = isolated().when_no_libset(Exhausted::Wait(Duration::from_millis(30))).launch(|| 1, Duration::MAX).unwrap_err();
            assert!(matches!(e, Error::Isolation(gotcha::Error::NoLibset { .. })), "{e}");
            assert!(t.elapsed() >= Duration::from_millis(30));
            // ...and succeeds once another thread cancels a function.
            let last = held.pop().unwrap();
            let canceller = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                drop(last);
            });
            let l = isolated()
                .when_no_libset(Exhausted::Wait(Duration::from_secs(60)))
                .launch(gotcha::current_libset, Duration::MAX)
                .unwrap();
            assert!(matches!(l, Linger::Completion(n) if n > 0));
            canceller.join().unwrap();
            // Every held function still runs in its own libset.
            let mut seen = std::collections::HashSet::new();
            for mut l in held {
                linger::resume(&mut l, Duration::MAX).unwrap();
                let Linger::Completion(n) = l else { panic!() };
                assert!(n > 0 && seen.insert(n), "libset {n} given twice");
            }
        }
        "uncopyable" => {
            let e = linger::isolate(&Selection::parse("libc").unwrap()).unwrap_err();
            assert!(matches!(e, Error::Isolation(gotcha::Error::Uncopyable { .. })), "{e}");
            println!("libc: {e}");
            let e = linger::isolate(&Selection::parse("ld-linux-x86-64").unwrap()).unwrap_err();
            assert!(matches!(e, Error::Isolation(gotcha::Error::Uncopyable { .. })), "{e}");
            let e = linger::isolate(&Selection::parse("libnosuchlibrary").unwrap()).unwrap_err();
            assert!(matches!(e, Error::Isolation(gotcha::Error::NotLoaded(_))), "{e}");
            assert!(Selection::parse(" , ").is_err());
            // Nothing isolated yet: a launch still works, and so does zlib.
            linger::isolate(&Selection::parse("libz").unwrap()).unwrap();
            let e = linger::isolate(&Selection::parse("libpng16").unwrap()).unwrap_err();
            assert!(matches!(e, Error::Isolation(gotcha::Error::AlreadyIsolating(_))), "{e}");
            linger::isolate(&Selection::parse("libz").unwrap()).unwrap();
            // SAFETY: zlib's API.
            let l = isolated().launch(|| unsafe { zlibVersion() } as usize, Duration::MAX).unwrap();
            assert!(matches!(l, Linger::Completion(p) if p != 0));
        }
        "prepare" => {
            linger::isolate(&Selection::parse("libz").unwrap()).unwrap();
            assert_eq!(linger::prepare_libsets(3).unwrap(), 3);
            assert_eq!(gotcha::stats().libsets, 3);
            let l = isolated().launch(gotcha::current_libset, Duration::MAX).unwrap();
            assert!(matches!(l, Linger::Completion(n) if (1..=3).contains(&n)));
            assert_eq!(gotcha::stats().libsets, 3, "the launch made another libset");
            // Asking for more than glibc allows stops where the loader does.
            let n = linger::prepare_libsets(100).unwrap();
            assert!((3..=15).contains(&n), "{n}");
        }
        "env" => {
            // LINGER_ISOLATE names what the first isolated launch isolates.
            let l = isolated().launch(gotcha::current_libset, Duration::MAX).unwrap();
            assert!(matches!(l, Linger::Completion(n) if n > 0));
            let e = linger::isolate(&Selection::parse("libpng16").unwrap()).unwrap_err();
            assert!(matches!(e, Error::Isolation(gotcha::Error::AlreadyIsolating(_))), "{e}");
        }
        "bad-env" => {
            let e = isolated().launch(|| 1, Duration::MAX).unwrap_err();
            assert!(matches!(e, Error::Isolation(_)), "{e}");
            println!("bad env: {e}");
        }
        c => panic!("unknown case {c}"),
    }
}

#[test]
fn more_isolated_functions_than_libsets_fail_share_or_wait() {
    let out = run_case("exhausted", &[]);
    let n: usize = line(&out, "libsets:").parse().unwrap();
    assert!(n >= 1, "{out}");
    let e = line(&out, "error:");
    assert!(e.contains("GLIBC_TUNABLES=glibc.rtld.nns=16") || e.contains("namespaces"), "{e}");
}

#[test]
fn the_namespace_tunable_gives_more_libsets() {
    let plain: usize = line(&run_case("exhausted", &[]), "libsets:").parse().unwrap();
    let out = run_case("exhausted", &[("GLIBC_TUNABLES", "glibc.rtld.nns=16")]);
    let tuned: usize = line(&out, "libsets:").parse().unwrap();
    assert!(tuned > plain, "{plain} libsets without the tunable, {tuned} with it");
    assert!(line(&out, "error:").contains("namespaces"), "{out}");
}

#[test]
fn libsets_can_be_made_ahead_of_time() {
    run_case("prepare", &[]);
}

#[test]
fn libraries_that_cannot_be_copied_or_are_not_loaded_are_refused() {
    let out = run_case("uncopyable", &[]);
    assert!(line(&out, "libc:").contains("libc.so.6"), "{out}");
}

#[test]
fn linger_isolate_in_the_environment_chooses_the_libraries() {
    run_case("env", &[("LINGER_ISOLATE", "libz")]);
    let out = run_case("bad-env", &[("LINGER_ISOLATE", "libnosuchlibrary")]);
    assert!(line(&out, "bad env:").contains("libnosuchlibrary"), "{out}");
}
