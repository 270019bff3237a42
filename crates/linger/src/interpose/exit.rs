//! `pthread_exit`: inside a preemptible function, the function's base must
//! know the value the thread ends with (see `crate::machine::exit`).

use std::ffi::c_void;

/// # Safety
/// Same contract as POSIX `pthread_exit`.
#[no_mangle]
pub unsafe extern "C-unwind" fn pthread_exit(value: *mut c_void) -> ! {
    // SAFETY: forwarded with the same contract.
    unsafe { crate::machine::exit::pthread_exit(value) }
}
