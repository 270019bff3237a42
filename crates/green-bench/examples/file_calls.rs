//! What the file-system wrappers cost a green thread, against the same
//! calls on an OS thread (run pinned to one CPU for steady numbers):
//!
//! ```text
//! taskset -c 0 cargo run --release -p green-bench --example file_calls
//! ```
//!
//! Per call, median [min-max] of 7 batches: `stat` and `access` of a file
//! in the caches (made on the worker after a look in the caches), and a
//! `mkdir` + `rmdir` pair (both on the blocking pool, each a park).

use std::ffi::CString;

const N: usize = 20_000;

/// ns per operation of `op` over `N` calls, in 7 batches: median, min, max.
fn batches(mut op: impl FnMut()) -> (f64, f64, f64) {
    green_bench::micro::time_batches(N, |n| {
        (0..n).for_each(|_| op());
        n
    })
}

/// The three measurements, where this runs.
fn measure(file: &CString, dir: &CString) -> Vec<(&'static str, (f64, f64, f64))> {
    let stat = batches(|| {
        // SAFETY: a NUL-terminated path and a zeroed out buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::stat(file.as_ptr(), &mut st) }, 0);
    });
    let access = batches(|| {
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::access(file.as_ptr(), libc::R_OK) }, 0);
    });
    let pair = batches(|| {
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkdir(dir.as_ptr(), 0o700) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::rmdir(dir.as_ptr()) }, 0);
    });
    vec![("stat, cached", stat), ("access, cached", access), ("mkdir + rmdir", pair)]
}

fn main() {
    let base = std::env::temp_dir().join(format!("file_calls-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("f"), b"x").unwrap();
    let file = CString::new(base.join("f").to_str().unwrap()).unwrap();
    let dir = CString::new(base.join("d").to_str().unwrap()).unwrap();
    let os = measure(&file, &dir);
    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().unwrap();
    let (f2, d2) = (file.clone(), dir.clone());
    let green = turquoise::thread::Builder::new().spawn_on(rt.handle(), move || measure(&f2, &d2)).unwrap().join().unwrap();
    drop(rt);
    std::fs::remove_dir_all(&base).unwrap();
    let fmt = |(m, lo, hi): (f64, f64, f64)| format!("{m:.0} ns [{lo:.0}-{hi:.0}]");
    println!("| call | OS thread | green thread |");
    println!("|---|---:|---:|");
    for ((what, o), (_, g)) in os.into_iter().zip(green) {
        println!("| {what} | {} | {} |", fmt(o), fmt(g));
    }
}
