//! Isolated functions (gotcha): deadlines inside an isolated library are
//! taken there, the copy is reset after a cancel, and the program's own
//! copy of the library is never disturbed.

use std::sync::{Arc, Once};
use std::time::Duration;

use linger::{Builder, Linger};

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the functions here use what zlib makes (its inflate state)
    // only inside themselves and copy plain bytes out.
    unsafe { Builder::new().isolated(true) }
}

#[link(name = "z")]
extern "C" {
    fn compress(dest: *mut u8, dest_len: *mut libc::c_ulong, src: *const u8, src_len: libc::c_ulong) -> libc::c_int;
    fn uncompress(dest: *mut u8, dest_len: *mut libc::c_ulong, src: *const u8, src_len: libc::c_ulong) -> libc::c_int;
}

const BIG: usize = 96 << 20;

/// 96 MiB of zeros, deflated (about 100 KiB): inflating it takes tens of
/// milliseconds inside zlib.
fn bomb() -> Arc<Vec<u8>> {
    static ONCE: Once = Once::new();
    static mut BOMB: Option<Arc<Vec<u8>>> = None;
    ONCE.call_once(|| {
        let src = vec![0u8; BIG];
        let mut out = vec![0u8; BIG / 500 + 4096];
        let mut n = out.len() as libc::c_ulong;
        // SAFETY: zlib's documented API with valid buffers and lengths.
        let r = unsafe { compress(out.as_mut_ptr(), &mut n, src.as_ptr(), src.len() as libc::c_ulong) };
        assert_eq!(r, 0);
        out.truncate(n as usize);
        // SAFETY: written once, inside call_once, before any read.
        unsafe { BOMB = Some(Arc::new(out)) };
    });
    // SAFETY: initialised above and never written again.
    unsafe { (*std::ptr::addr_of!(BOMB)).clone().unwrap() }
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        linger::isolate(&linger::Selection::parse("libz").unwrap()).unwrap();
    });
}

/// An output buffer shared with the function (filled with 1s; inflating
/// writes zeros from the start): how far zlib got when the function stopped.
struct Out(*mut u8);
// SAFETY: the test reads it only while the function is stopped or done.
unsafe impl Send for Out {}

fn out_buffer() -> Vec<u8> {
    vec![1u8; BIG]
}

/// Did zlib finish writing `out`?
fn finished(out: &[u8]) -> bool {
    std::hint::black_box(out[BIG - 1]) == 0
}

/// Inflates the bomb into `out`, then checks it.
fn inflate(bomb: Arc<Vec<u8>>, out: &mut [u8]) -> impl FnOnce() -> bool + Send + 'static {
    assert_eq!(out.len(), BIG);
    let out = Out(out.as_mut_ptr());
    move || {
        let out = out;
        let mut n = BIG as libc::c_ulong;
        // SAFETY: zlib's documented API with valid buffers and lengths (the
        // test keeps `out` alive until the function is done or cancelled).
        let r = unsafe { uncompress(out.0, &mut n, bomb.as_ptr(), bomb.len() as libc::c_ulong) };
        r == 0 && n as usize == BIG
    }
}

#[test]
fn a_deadline_inside_an_isolated_library_is_taken_there() {
    setup();
    let bomb = bomb();
    for _ in 0..5 {
        let mut out = out_buffer();
        let mut l = isolated().launch(inflate(bomb.clone(), &mut out), Duration::from_millis(1)).unwrap();
        assert!(l.is_continuation(), "96 MiB inflated in 1 ms?");
        assert!(!finished(&out), "stopped only once zlib had returned: the copy was deferred");
        assert_eq!(linger::last_preemption().map(|p| p.deferred), Some(false));
        while l.is_continuation() {
            linger::resume(&mut l, Duration::from_millis(1)).unwrap();
        }
        assert!(matches!(l, Linger::Completion(true)));
        assert!(out.iter().all(|&b| b == 0));
    }
}

#[test]
fn without_isolation_the_library_runs_to_its_end() {
    setup();
    let bomb = bomb();
    let mut out = out_buffer();
    let mut l = Builder::new().launch(inflate(bomb.clone(), &mut out), Duration::from_millis(1)).unwrap();
    if l.is_continuation() {
        assert!(finished(&out), "stopped inside the program's own zlib");
    }
    while l.is_continuation() {
        linger::resume(&mut l, Duration::MAX).unwrap();
    }
    assert!(matches!(l, Linger::Completion(true)));
}

#[test]
fn cancelled_inside_the_library_the_libset_is_reset_and_reused() {
    setup();
    let bomb = bomb();
    let before = linger::stats();
    let mut out = out_buffer();
    let mut inside = 0;
    // Until 30 stopped inside zlib: a launch whose deadline passed before
    // zlib was entered (a VM stall, a loaded machine) stops outside it and
    // does not count; 200 tries at most.
    for i in 0..200u64 {
        if inside == 30 {
            break;
        }
        out[BIG - 1] = 1;
        let timeout = Duration::from_micros(100 + (i * 7919) % 3000);
        let l = isolated().launch(inflate(bomb.clone(), &mut out), timeout).unwrap();
        inside += usize::from(l.is_continuation() && !finished(&out));
        drop(l); // cancels it wherever it stopped
    }
    let after = linger::stats();
    assert!(inside >= 30, "{inside} of 200 stopped inside zlib");
    assert!(after.libset_resets - before.libset_resets >= inside as u64, "{before:?} {after:?}");
    // zlib's inflate state and window, allocated inside `uncompress`, were
    // freed: by nearly every reset (a stop inside `uncompress` before its
    // first allocation frees nothing; seen once in 30 on a loaded machine).
    assert!(after.libset_blocks_freed - before.libset_blocks_freed >= inside as u64 * 9 / 10, "{after:?}");
    // The libset still works, and so does the program's own zlib.
    let l = isolated().launch(inflate(bomb.clone(), &mut out), Duration::MAX).unwrap();
    assert!(matches!(l, Linger::Completion(true)));
    assert!(out.iter().all(|&b| b == 0));
    out.fill(1);
    assert!(inflate(bomb, &mut out)());
    assert!(out.iter().all(|&b| b == 0));
}

#[link(name = "z")]
extern "C" {
    fn zlibVersion() -> *const libc::c_char;
}

/// Builds and loads a small library that calls zlib, after isolation
/// was set up; returns its function.
fn plugin() -> extern "C" fn() -> *const libc::c_char {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("isolated-plugin");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("plugin.c");
    std::fs::write(&src, "#include <zlib.h>\nconst char *plugin_zlib_version(void) { return zlibVersion(); }\n").unwrap();
    let lib = dir.join("libisolated_plugin.so");
    let st = std::process::Command::new("cc").args(["-shared", "-fPIC", "-O2", "-o"]).arg(&lib).arg(&src).arg("-lz").status().unwrap();
    assert!(st.success());
    let path = std::ffi::CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: loading our own small library and looking up its function,
    // which has this signature.
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!h.is_null());
        let f = libc::dlsym(h, c"plugin_zlib_version".as_ptr());
        assert!(!f.is_null());
        std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> *const libc::c_char>(f)
    }
}

#[test]
fn a_library_loaded_later_calls_the_libsets_copy_too() {
    setup();
    let f = plugin();
    // SAFETY: zlib's API.
    let base = unsafe { zlibVersion() } as usize;
    assert_eq!(f() as usize, base, "outside isolated functions: the program's own zlib");
    let (mine, via_plugin) = match isolated().launch(move || (unsafe { zlibVersion() } as usize, f() as usize), Duration::MAX).unwrap() {
        Linger::Completion(v) => v,
        _ => panic!(),
    };
    assert_ne!(mine, base);
    assert_eq!(via_plugin, mine, "the library loaded later still called the program's zlib");
}
