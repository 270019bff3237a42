//! libc isolated in a program whose locale is not "C" when the libsets are
//! made: each copy of libc keeps the locale's names in heap blocks from
//! before its snapshot. A cancelled function's `setlocale` frees them in
//! the copy; the reset restores the snapshot, which points at them again,
//! so gotcha holds such frees back until a lease ends normally (a reset
//! keeps the blocks). Its own process: the locale and the selection are
//! process-wide.

use std::ffi::CStr;
use std::time::Duration;

use linger::{Builder, Linger};

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the functions here keep what libc makes for them inside
    // themselves (they copy the locale's name out as a String).
    unsafe { Builder::new().isolated(true) }
}

fn locale_name_in_the_copy() -> String {
    let l = isolated()
        .launch(
            || {
                // SAFETY: a query (NULL changes nothing); the name is copied
                // before any other libc call.
                let p = unsafe { libc::setlocale(libc::LC_ALL, std::ptr::null()) };
                assert!(!p.is_null());
                // SAFETY: non-null C string from setlocale.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            },
            Duration::MAX,
        )
        .unwrap();
    match l {
        Linger::Completion(s) => s,
        _ => panic!("not completed"),
    }
}

#[test]
fn a_cancelled_setlocale_does_not_leave_the_reset_copy_pointing_at_freed_names() {
    // SAFETY: valid C strings; no other thread of this test process uses
    // the locale meanwhile.
    assert!(!unsafe { libc::setlocale(libc::LC_ALL, c"C.UTF-8".as_ptr()) }.is_null());
    linger::isolate(&linger::Selection::parse("libc").unwrap()).unwrap();
    assert_eq!(locale_name_in_the_copy(), "C.UTF-8");
    let before = linger::stats().libset_resets;
    for round in 0..100 {
        let l = isolated()
            .launch(
                || {
                    // SAFETY: valid C strings (the copy frees its old names).
                    unsafe { libc::setlocale(libc::LC_ALL, c"C".as_ptr()) };
                    linger::pause();
                },
                Duration::MAX,
            )
            .unwrap();
        assert!(l.yielded(), "round {round}");
        drop(l); // cancelled: the libset is reset
        // Reuse whatever the allocator has free, scribbling over it.
        let scribble: Vec<Vec<u8>> = (0..256).map(|i| vec![b'X'; 8 + i % 64]).collect();
        std::hint::black_box(&scribble);
        assert_eq!(locale_name_in_the_copy(), "C.UTF-8", "round {round}: the copy's restored locale name");
        // (setlocale in the function reached the program's libc too.)
        // SAFETY: as above.
        assert!(!unsafe { libc::setlocale(libc::LC_ALL, c"C.UTF-8".as_ptr()) }.is_null());
    }
    assert!(linger::stats().libset_resets >= before + 100);
}
