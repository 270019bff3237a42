//! `dlclose`: code must leave the table before it is unmapped.
//!
//! The preemption handler reads the code bytes and the unwind tables of
//! every object the code table describes (`crate::judgement::ranges`). Unloading one
//! would leave the handler reading unmapped memory, or another object's
//! tables once something else is mapped at the same address. So the table
//! is retired before the real `dlclose` (handlers still reading it are
//! waited for; from then on they defer without reading anything), and built
//! again after it.

use std::ffi::c_void;

use libc::c_int;

use crate::base::sys::real;

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

fn real_dlclose() -> Option<DlcloseFn> {
    real!("dlclose", DlcloseFn)
}

pub(crate) fn prepare() {
    let _ = real_dlclose();
}

/// # Safety
/// Same contract as POSIX `dlclose`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let Some(real) = real_dlclose() else {
        return -1; // cannot happen: libc defines it (dlerror has nothing to say)
    };
    // Not stopped while it holds the build lock or has the table retired
    // (every other function would stay deferred meanwhile); a deadline that
    // passes is taken when it returns.
    let _scope = crate::state::guard::Scope::enter_from_c();
    // SAFETY: forwarded verbatim.
    crate::judgement::ranges::unloading(|| unsafe { real(handle) })
}
