//! Isolating libz and libpng in this test process, then calling them in a
//! libset and in the program's own copy.

use std::ffi::{c_char, c_void, CStr};

#[link(name = "z")]
extern "C" {
    fn zlibVersion() -> *const c_char;
    fn compressBound(n: libc::c_ulong) -> libc::c_ulong;
}

#[link(name = "png16")]
extern "C" {
    fn png_access_version_number() -> u32;
}

fn object_of(p: usize) -> String {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address.
    unsafe { libc::dladdr(p as *const c_void, &mut info) };
    if info.dli_fbase.is_null() {
        return String::new();
    }
    format!("{:p}", info.dli_fbase)
}

#[test]
fn calls_go_to_the_current_libsets_copy() {
    let report = gotcha::isolate(&gotcha::Selection::parse("libz,libpng").unwrap()).unwrap();
    assert_eq!(report.libraries.len(), 2, "{report:?}");
    assert!(report.functions >= 3, "{report:?}");
    // SAFETY: zlib's documented API.
    let base_version = unsafe { zlibVersion() } as usize;
    let lease = gotcha::Lease::acquire(gotcha::Exhausted::Fail).unwrap().unwrap();
    let prev = gotcha::set_current_libset(lease.libset());
    // SAFETY: as above.
    let copy_version = unsafe { zlibVersion() } as usize;
    let bound = unsafe { compressBound(1000) };
    let png = unsafe { png_access_version_number() };
    gotcha::set_current_libset(prev);
    assert_ne!(base_version, copy_version, "the libset's call returned the program's own copy's string");
    assert_ne!(object_of(base_version), object_of(copy_version));
    // SAFETY: both are zlib's version strings.
    unsafe {
        assert_eq!(CStr::from_ptr(base_version as *const c_char), CStr::from_ptr(copy_version as *const c_char));
    }
    assert!(bound > 1000);
    assert_eq!(png, unsafe { png_access_version_number() });
    let code = gotcha::code();
    // The copy's code is listed as preemptible; the program's own is not.
    let in_copy = copy_version; // zlib's rodata sits between its code segments' ends
    assert!(!code.preemptible.is_empty());
    let copy_base = code.preemptible.iter().any(|r| r.0 <= in_copy + (1 << 20) && in_copy < r.1 + (1 << 20));
    assert!(copy_base, "{:?} vs {in_copy:#x}", code.preemptible);
    assert!(code.stubs.0 < code.stubs.1);
    drop(lease);
}
