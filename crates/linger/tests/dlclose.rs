//! `dlclose` of a library whose code is in the code table: the handler must
//! never read the unmapped code (or unwind tables), nor another library's
//! mapped at the same address later.
//!
//! Two threads run preemptible functions in 20-100 us slices. Each function
//! loads a victim library (deferred code, built without unwind tables),
//! works in it, computes a while in its own code (where it is stopped and
//! resumed, so the table is rebuilt with the victim in it), unloads it, then
//! computes in a preemptible holder library without unwind tables whose
//! frame keeps addresses inside the victim: a deadline there is judged by
//! scanning the stack, which reads the code before each such word. A third
//! thread loads and unloads the victims all the while, so that the last
//! reference goes on either side and other victims take the freed
//! addresses. Without the `dlclose` interposer the scan reads unmapped code
//! and the process dies of SIGSEGV within a few rounds.

use std::ffi::{c_void, CString};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use linger::{launch, resume};

type Work = unsafe extern "C" fn(u64) -> u64;
type Call = unsafe extern "C" fn(Work, u64) -> u64;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/dlclose_lib.c");
const VICTIMS: usize = 3;
/// Functions per worker thread (each loads and unloads a victim once).
const ROUNDS: usize = 150;

/// The definitions of victim `i`: each of another size, so that none fills
/// the hole another one leaves (the scan would read mapped code there).
fn victim(i: usize) -> String {
    format!("-DVICTIM -DPAD={}", (i + 1) << 16)
}

/// Compiles the test library with `defines` into `dir/name`.
fn compile(dir: &Path, name: &str, defines: &str) -> PathBuf {
    let out = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-O1", "-fPIC", "-shared", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"])
        .args(defines.split(' '))
        .arg("-o")
        .arg(&out)
        .arg(SOURCE)
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(status.success(), "{cc} failed to build {name}");
    out
}

fn open(path: &Path) -> *mut c_void {
    let p = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    let h = unsafe { libc::dlopen(p.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {}", path.display());
    h
}

fn symbol(h: *mut c_void, name: &std::ffi::CStr) -> usize {
    // SAFETY: a handle from dlopen and a NUL-terminated name.
    let f = unsafe { libc::dlsym(h, name.as_ptr()) } as usize;
    assert_ne!(f, 0, "{name:?} is defined");
    f
}

fn close(h: *mut c_void) {
    // SAFETY: a handle from dlopen, closed once.
    assert_eq!(unsafe { libc::dlclose(h) }, 0);
}

/// Computes in the program's own code for about `n` iterations.
fn own_work(n: u64) -> u64 {
    let mut c = 0u64;
    for i in 0..n {
        c = black_box(c.wrapping_mul(31).wrapping_add(i));
    }
    c
}

#[test]
fn unloading_a_library_never_crashes_the_handler() {
    // Before the runtime starts (this is the only test in this binary).
    std::env::set_var("LINGER_PREEMPTIBLE_LIBS", "liblinger_test_holder");
    linger::init().unwrap();
    let dir = std::env::temp_dir().join(format!("linger-dlclose-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let holder = compile(&dir, "liblinger_test_holder.so", "-DHOLDER");
    let victims: Arc<Vec<PathBuf>> =
        Arc::new((0..VICTIMS).map(|i| compile(&dir, &format!("liblinger_test_victim{i}.so"), &victim(i))).collect());
    let h = open(&holder); // kept loaded
    let (call, hold) = (symbol(h, c"call"), symbol(h, c"hold"));

    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, victims) = (stop.clone(), victims.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let i = (n as usize) % VICTIMS;
                let a = open(&victims[i]);
                let b = open(&victims[(i + 1) % VICTIMS]);
                own_work(2_000 * (n % 5));
                close(a);
                own_work(1_000 * (n % 3));
                close(b);
                n += 1;
            }
            n
        })
    };
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let victims = victims.clone();
            std::thread::spawn(move || {
                for r in 0..ROUNDS {
                    let path = victims[(r + w as usize) % VICTIMS].clone();
                    let mut l = launch(
                        move || {
                            // SAFETY: the holder's functions have these signatures.
                            let (call, hold) = unsafe {
                                (std::mem::transmute::<usize, Call>(call), std::mem::transmute::<usize, Call>(hold))
                            };
                            let v = open(&path);
                            // SAFETY: `victim` has this signature.
                            let f = unsafe { std::mem::transmute::<usize, Work>(symbol(v, c"victim")) };
                            // SAFETY: f is loaded until the close below.
                            let mut c = unsafe { call(f, 20_000) };
                            c ^= own_work(100_000);
                            close(v);
                            // SAFETY: hold never calls f, only keeps its address.
                            c ^ unsafe { hold(f, 200_000) }
                        },
                        Duration::ZERO,
                    )
                    .unwrap();
                    let slice = Duration::from_micros(20 + 40 * ((r as u64 + w) % 3));
                    while l.is_continuation() {
                        resume(&mut l, slice).unwrap();
                    }
                }
                linger::stats()
            })
        })
        .collect();
    let stats: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    close(h);
    let _ = std::fs::remove_dir_all(&dir);
    println!("loads and unloads by the third thread: {rounds}; workers: {stats:?}");
    assert!(stats.iter().all(|s| s.preemptions > 0), "the functions were preempted");
}
