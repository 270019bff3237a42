//! `pthread_exit` and thread cancellation inside a preemptible function.
//!
//! glibc ends a thread by a forced unwind of its stack, guided by a chain of
//! *cancellation buffers* (one per `pthread_cleanup_push` in C, and one in
//! `start_thread` or `__libc_start_main` at the thread's base): when the
//! unwind passes a buffer's frame, glibc `longjmp`s into it, the cleanup
//! handler runs and the unwind goes on from the next buffer. The head of
//! the chain is per-thread state (`cleanup_jmp_buf` in the thread
//! descriptor), so, like `errno`, it belongs to a flow of control:
//!
//! - `flow.rs` swaps it at every switch ([`exchange_chain`]), so that the
//!   caller never sees a buffer of a stopped function (a `pthread_exit` of
//!   the caller would otherwise jump into that function's stack), and a
//!   migrated function takes its own chain along;
//! - every function starts with a buffer of its own at its base
//!   ([`with_base`]). An exit or a cancellation acted on inside the
//!   function unwinds the function's frames (its cleanup handlers and C++
//!   destructors run) and lands there instead of crossing into the
//!   runtime's frames, which aborted the process before. The function then
//!   ends as *exited* (`Outcome::Exited`), and the runtime ends the thread
//!   from the caller's side by calling `pthread_exit` again with the same
//!   value ([`end_thread_if_due`]): the caller's own cleanup handlers run, and an
//!   enclosing preemptible function exits the same way.
//!
//! The buffer's layout and the two registration calls are glibc's public
//! ABI (the `pthread_cleanup_push` macro compiles to them), so programs
//! built years ago rely on them too.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::state::thread::ts;

/// glibc's `PTHREAD_CANCELED`: the value of a thread ended by cancellation.
pub(crate) const PTHREAD_CANCELED: usize = usize::MAX;

/// `__pthread_unwind_buf_t`: a `__jmp_buf` (8 words) and a mask flag, then
/// four words of which the first links to the previous buffer.
#[repr(C, align(16))]
pub(crate) struct UnwindBuf {
    jmp: [u64; 8],
    mask_was_saved: i32,
    pad: [usize; 4],
}

/// Word index of the `prev` link (`priv.data.prev`, byte offset 72).
const PREV: usize = 9;

extern "C" {
    /// Pushes `buf` on this thread's chain (recording the old head in it).
    fn __pthread_register_cancel(buf: *mut c_void);
    /// Makes `buf`'s recorded `prev` the head of this thread's chain.
    fn __pthread_unregister_cancel(buf: *mut c_void);
}

/// Where the chain's head lives in the thread descriptor (an offset from
/// the `fs` base), or 0 if not known: then [`exchange_chain`] calls glibc.
static HEAD_AT: AtomicUsize = AtomicUsize::new(0);

/// Finds where `__pthread_register_cancel` keeps the head, so that a switch
/// swaps it with a load and a store instead of two calls (4 ns of the
/// 40 ns of a resume and pause). Read from the function's first
/// instruction (`mov rax, fs:[disp32]`, what every glibc since the chain
/// exists compiles it to) and then checked on this thread by registering
/// and unregistering a scratch buffer; anything else leaves the calls.
pub(crate) fn find_head() {
    let f = __pthread_register_cancel as unsafe extern "C" fn(*mut c_void) as *const u8;
    // SAFETY: the first 9 bytes of a function of libc's text.
    let code = unsafe { std::slice::from_raw_parts(f, 9) };
    if code[..5] != [0x64, 0x48, 0x8b, 0x04, 0x25] {
        return;
    }
    let off = u32::from_le_bytes([code[5], code[6], code[7], code[8]]) as usize;
    if off == 0 || off % 8 != 0 || off > 0x10000 {
        return;
    }
    let mut scratch = MaybeUninit::<[usize; 14]>::uninit();
    let p = scratch.as_mut_ptr() as usize;
    // SAFETY: as in `exchange_chain`'s slow path; `fs_word` reads a word
    // of this thread's descriptor at an offset glibc's own code uses.
    let ok = unsafe {
        let before = gotcha::fs_word(off as isize);
        __pthread_register_cancel(p as *mut c_void);
        let during = gotcha::fs_word(off as isize);
        let recorded = (*scratch.as_ptr())[PREV];
        __pthread_unregister_cancel(p as *mut c_void);
        let after = gotcha::fs_word(off as isize);
        during == p && recorded == before && after == before
    };
    if ok {
        HEAD_AT.store(off, Ordering::Relaxed);
    }
}

/// Makes `head` (0: none) the head of this thread's chain of cancellation
/// buffers and returns the previous head: a load and a store at the place
/// [`find_head`] found, else two calls into glibc, each a couple of moves,
/// with scratch buffers that only ever hold the link (glibc's functions
/// touch no other word but `cleanup`, written by `register` into the
/// scratch).
#[inline(always)]
pub(crate) fn exchange_chain(head: usize) -> usize {
    let off = HEAD_AT.load(Ordering::Relaxed);
    if off != 0 {
        // SAFETY: `off` was checked by `find_head` to be where this
        // thread's head lives (the same field in every thread), and `head`
        // is a chain of this flow's.
        return unsafe { gotcha::swap_fs_word(off as isize, head) };
    }
    let mut read = MaybeUninit::<[usize; 14]>::uninit();
    let mut write = MaybeUninit::<[usize; 14]>::uninit();
    // SAFETY: both scratch arrays are 112 bytes, as large as glibc's
    // buffer; `register` writes words 9 and 10 of `read` and makes it the
    // head, `unregister` reads word 9 of `write` (set here) and makes that
    // the head: `read` is never reachable from the chain once this returns.
    unsafe {
        __pthread_register_cancel(read.as_mut_ptr().cast());
        let old = (*read.as_ptr())[PREV];
        (*write.as_mut_ptr())[PREV] = head;
        __pthread_unregister_cancel(write.as_mut_ptr().cast());
        old
    }
}

extern "C-unwind" {
    /// Saves a `sigsetjmp` context in `buf`, registers it as the head of the
    /// chain and calls `body(arg)`; unregisters it and returns 0 when `body`
    /// returns. Returns 1 when glibc `longjmp`s into `buf` at the end of a
    /// thread exit's unwind of `body`'s frames. Unwinding (a Rust panic)
    /// passes through it, leaving `buf` registered: the caller drops the
    /// function's chain then (see [`with_base`]).
    fn linger_exit_base(buf: *mut UnwindBuf, body: unsafe extern "C-unwind" fn(*mut c_void), arg: *mut c_void) -> i32;
}

// Hand-written because `sigsetjmp` returns twice, which Rust code cannot
// express; in assembly the registers live across it are explicit (the
// callee-saved ones, which `longjmp` restores). It keeps the stack 16-byte
// aligned at its calls and describes its frame for unwinders.
std::arch::global_asm!(
    ".pushsection .text.linger_exit_base,\"ax\",@progbits",
    ".globl linger_exit_base",
    ".hidden linger_exit_base",
    ".type linger_exit_base,@function",
    ".p2align 4",
    "linger_exit_base:",
    ".cfi_startproc",
    "push rbx",
    ".cfi_def_cfa_offset 16",
    ".cfi_offset rbx, -16",
    "push r12",
    ".cfi_def_cfa_offset 24",
    ".cfi_offset r12, -24",
    "push r13",
    ".cfi_def_cfa_offset 32",
    ".cfi_offset r13, -32",
    "mov rbx, rdi",
    "mov r12, rsi",
    "mov r13, rdx",
    "xor esi, esi",
    "call {sigsetjmp}@PLT",
    "test eax, eax",
    "jnz 2f",
    "mov rdi, rbx",
    "call {register}@PLT",
    "mov rdi, r13",
    "call r12",
    "mov rdi, rbx",
    "call {unregister}@PLT",
    "xor eax, eax",
    "jmp 3f",
    "2:",
    "mov eax, 1",
    "3:",
    "pop r13",
    ".cfi_def_cfa_offset 24",
    "pop r12",
    ".cfi_def_cfa_offset 16",
    "pop rbx",
    ".cfi_def_cfa_offset 8",
    "ret",
    ".cfi_endproc",
    ".size linger_exit_base, .-linger_exit_base",
    ".popsection",
    sigsetjmp = sym __sigsetjmp,
    register = sym __pthread_register_cancel,
    unregister = sym __pthread_unregister_cancel,
);

extern "C" {
    fn __sigsetjmp(env: *mut c_void, savemask: i32) -> i32;
}

struct Ctx<F, T> {
    f: Option<F>,
    out: Option<T>,
}

/// Runs the function's closure for [`linger_exit_base`].
unsafe extern "C-unwind" fn run<F: FnOnce() -> T, T>(p: *mut c_void) {
    // SAFETY: `p` is the `Ctx` that `with_base` passed, alive in its frame.
    let c = unsafe { &mut *(p as *mut Ctx<F, T>) };
    let f = c.f.take().expect("run once");
    c.out = Some(f());
}

/// Runs `f` (the whole of a preemptible function, on its stack) with a
/// cancellation buffer at its base: `None` if a thread exit or cancellation
/// unwound it. Panics propagate. Inlined: see `runtime::enter_user`.
#[inline(always)]
pub(crate) fn with_base<F: FnOnce() -> T, T>(f: F) -> Option<T> {
    // Filled by `sigsetjmp` (the context and the mask flag) and by
    // `__pthread_register_cancel` (the two links glibc reads).
    let mut buf = MaybeUninit::<UnwindBuf>::uninit();
    let mut ctx = Ctx { f: Some(f), out: None };
    // SAFETY: `buf` and `ctx` outlive the call; `run::<F, T>` matches
    // `ctx`'s type. When glibc jumps back into the buffer, every frame
    // below it has been unwound (their cleanups ran), as at the end of any
    // thread exit; the jump restores the callee-saved registers, and this
    // frame's memory lies above the unwound ones.
    let jumped = unsafe { linger_exit_base(buf.as_mut_ptr(), run::<F, T>, &mut ctx as *mut Ctx<F, T> as *mut c_void) };
    if jumped != 0 {
        None
    } else {
        ctx.out
    }
}

/// The value the function `f` exited with (`PTHREAD_CANCELED` for a
/// cancellation, which does not pass through our `pthread_exit`).
pub(crate) fn exit_value(f: &crate::state::thread::Frame) -> usize {
    f.exit_value.replace(PTHREAD_CANCELED)
}

/// The real `pthread_exit`.
type PthreadExit = unsafe extern "C-unwind" fn(*mut c_void) -> !;

fn real_pthread_exit() -> PthreadExit {
    match crate::base::sys::real!("pthread_exit", PthreadExit) {
        Some(f) => f,
        None => {
            // Not reached: libc defines it.
            // SAFETY: ending the process is always allowed.
            unsafe { libc::abort() }
        }
    }
}

pub(crate) fn prepare() {
    let _ = real_pthread_exit();
    find_head();
}

/// `pthread_exit` called by the program: inside a preemptible function,
/// records the value for the function's base, which the unwind reaches.
///
/// # Safety
/// Same contract as POSIX `pthread_exit`.
pub(crate) unsafe fn pthread_exit(value: *mut c_void) -> ! {
    let cur = ts().current.get();
    if !cur.is_null() {
        // SAFETY: `current` is a live frame while set.
        unsafe { (*cur).exit_value.set(value as usize) };
    }
    // SAFETY: forwarding to glibc.
    unsafe { real_pthread_exit()(value) }
}

/// After a function exited: ends this thread here, in its caller's flow,
/// with the function's value.
pub(crate) fn end_thread_if_due() {
    if let Some(v) = ts().exit_pending.take() {
        // SAFETY: ends the thread, as the function's own call asked.
        unsafe { pthread_exit(v as *mut c_void) }
    }
}
