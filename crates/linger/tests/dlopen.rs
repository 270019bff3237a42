//! Code loaded after the runtime started is learnt at the next resume, not
//! only at the next launch: a function that `dlopen`s a library named in
//! `LINGER_PREEMPTIBLE_LIBS` and computes in it is stopped inside it once
//! the table has been rebuilt, with no launch in between.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use linger::{launch, resume};

type Crc32 = unsafe extern "C" fn(u64, *const u8, u32) -> u64;

static IN_LIBRARY: AtomicBool = AtomicBool::new(false);

#[test]
fn resume_learns_code_loaded_since_the_last_launch() {
    // Before the runtime starts (this is the only test in this binary).
    std::env::set_var("LINGER_PREEMPTIBLE_LIBS", "libz.so");
    linger::init().unwrap();
    let buf = vec![0x5au8; 4 << 20];
    let mut l = launch(
        move || {
            // SAFETY: loading libz and looking up its crc32, which has this signature.
            let crc: Crc32 = unsafe {
                let h = libc::dlopen(c"libz.so.1".as_ptr(), libc::RTLD_NOW);
                assert!(!h.is_null(), "libz.so.1 is installed");
                let f = libc::dlsym(h, c"crc32".as_ptr());
                assert!(!f.is_null());
                std::mem::transmute::<*mut c_void, Crc32>(f)
            };
            let mut c = 0;
            for _ in 0..100 {
                IN_LIBRARY.store(true, Ordering::SeqCst);
                // SAFETY: a valid buffer of that length.
                c = unsafe { crc(c, buf.as_ptr(), buf.len() as u32) };
                IN_LIBRARY.store(false, Ordering::SeqCst);
                // Some code of our own, where a deadline can be taken
                // whatever the table says.
                for i in 0..300_000u64 {
                    c = std::hint::black_box(c ^ i);
                }
            }
            c
        },
        Duration::ZERO,
    )
    .unwrap();
    // Only resumes from here on: the library is unknown to the table until
    // one of them rebuilds it.
    let mut inside = 0;
    while l.is_continuation() {
        resume(&mut l, Duration::from_micros(500)).unwrap();
        if l.is_continuation() && IN_LIBRARY.load(Ordering::SeqCst) {
            inside += 1;
        }
    }
    assert!(l.is_completion());
    assert!(inside >= 5, "stopped inside the library only {inside} times");
}
