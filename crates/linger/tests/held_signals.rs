//! Program signals that arrive while a function is stopped between slices.
//!
//! With `Builder::hold_signals` they wait on the caller's side and are
//! handled on the function's stack when it resumes, where a handler without
//! SA_RESTART still interrupts the blocking call the function was stopped in.
//! Without it they are handled by the caller, which is running at the time.
//! Each test uses its own signal: tests run in parallel threads of one process.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use linger::{resume, Builder, Error};

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    (fds[0], fds[1])
}

/// Where a handler last ran (address of one of its locals) and how often.
struct Seen {
    sp: AtomicUsize,
    runs: AtomicUsize,
}

static USR1: Seen = Seen { sp: AtomicUsize::new(0), runs: AtomicUsize::new(0) };
static USR2: Seen = Seen { sp: AtomicUsize::new(0), runs: AtomicUsize::new(0) };
static WINCH: Seen = Seen { sp: AtomicUsize::new(0), runs: AtomicUsize::new(0) };
static URG: Seen = Seen { sp: AtomicUsize::new(0), runs: AtomicUsize::new(0) };

fn record(s: &Seen) {
    let here = 0u8;
    s.sp.store(&here as *const u8 as usize, Ordering::SeqCst);
    s.runs.fetch_add(1, Ordering::SeqCst);
}
extern "C" fn on_usr1(_: libc::c_int) {
    record(&USR1);
}
extern "C" fn on_usr2(_: libc::c_int) {
    record(&USR2);
}
extern "C" fn on_winch(_: libc::c_int) {
    record(&WINCH);
}
extern "C" fn on_urg(_: libc::c_int) {
    record(&URG);
}

fn install(sig: libc::c_int, h: extern "C" fn(libc::c_int), flags: libc::c_int) {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = h as usize;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

fn kill_self(sig: libc::c_int) {
    assert_eq!(unsafe { libc::pthread_kill(libc::pthread_self(), sig) }, 0);
}

/// This thread's signal mask, straight from the kernel.
fn blocks(sig: libc::c_int) -> bool {
    let mut old = 0u64;
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, std::ptr::null::<u64>(), &mut old, 8usize) };
    old & (1 << (sig - 1)) != 0
}

/// A function blocked in `read` on an empty pipe, stopped at its deadline:
/// returns the continuation and the address of one of the function's locals.
fn blocked_reader(
    hold: bool,
    r: i32,
    local: &'static AtomicUsize,
) -> linger::Linger<(isize, Option<i32>)> {
    local.store(0, Ordering::SeqCst);
    let mut l = Builder::new()
        .hold_signals(hold)
        .launch(
            move || {
                let mut buf = [0u8; 8];
                local.store(buf.as_ptr() as usize, Ordering::SeqCst);
                let n = unsafe { libc::read(r, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                (n, std::io::Error::last_os_error().raw_os_error())
            },
            Duration::from_millis(1),
        )
        .unwrap();
    // A stalled machine can take the deadline before the read: resume until
    // the function has started, then one slice more to carry it into `read`.
    while local.load(Ordering::SeqCst) == 0 && l.is_continuation() {
        resume(&mut l, Duration::from_millis(1)).unwrap();
    }
    resume(&mut l, Duration::from_millis(1)).unwrap();
    assert!(l.is_continuation(), "read returned without data");
    l
}

fn near(a: usize, b: usize) -> bool {
    a.abs_diff(b) < 64 * 1024
}

#[test]
fn held_signal_runs_on_the_functions_stack_and_interrupts_its_read() {
    install(libc::SIGUSR1, on_usr1, 0);
    static LOCAL: AtomicUsize = AtomicUsize::new(0);
    for _ in 0..50 {
        let (r, w) = pipe();
        let before = USR1.runs.load(Ordering::SeqCst);
        let mut l = blocked_reader(true, r, &LOCAL);
        assert!(blocks(libc::SIGUSR1), "the caller should hold the program's signals while stopped");
        kill_self(libc::SIGUSR1);
        assert_eq!(USR1.runs.load(Ordering::SeqCst), before, "a held signal ran on the caller's side");
        resume(&mut l, Duration::from_secs(5)).unwrap();
        let (n, err) = l.completion().expect("the signal should end the read");
        assert_eq!((n, err), (-1, Some(libc::EINTR)), "read should fail with EINTR");
        assert_eq!(USR1.runs.load(Ordering::SeqCst), before + 1);
        assert!(near(USR1.sp.load(Ordering::SeqCst), LOCAL.load(Ordering::SeqCst)), "handler ran off the function's stack");
        assert!(!blocks(libc::SIGUSR1), "the function's own mask should be back");
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
}

#[test]
fn held_signal_with_sa_restart_lets_the_read_continue() {
    install(libc::SIGUSR2, on_usr2, libc::SA_RESTART);
    static LOCAL: AtomicUsize = AtomicUsize::new(0);
    for round in 0..30u8 {
        let (r, w) = pipe();
        let before = USR2.runs.load(Ordering::SeqCst);
        let mut l = blocked_reader(true, r, &LOCAL);
        kill_self(libc::SIGUSR2);
        resume(&mut l, Duration::from_millis(2)).unwrap();
        assert!(l.is_continuation(), "an SA_RESTART handler must not end the read");
        assert_eq!(USR2.runs.load(Ordering::SeqCst), before + 1);
        assert!(near(USR2.sp.load(Ordering::SeqCst), LOCAL.load(Ordering::SeqCst)), "handler ran off the function's stack");
        assert_eq!(unsafe { libc::write(w, [round].as_ptr() as *const libc::c_void, 1) }, 1);
        resume(&mut l, Duration::from_secs(5)).unwrap();
        assert_eq!(l.completion().unwrap().0, 1, "the read should return the byte");
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
}

#[test]
fn without_holding_the_caller_handles_the_signal_and_the_read_goes_on() {
    install(libc::SIGWINCH, on_winch, 0);
    static LOCAL: AtomicUsize = AtomicUsize::new(0);
    let (r, w) = pipe();
    let before = WINCH.runs.load(Ordering::SeqCst);
    let mut l = blocked_reader(false, r, &LOCAL);
    assert!(!blocks(libc::SIGWINCH));
    kill_self(libc::SIGWINCH);
    assert_eq!(WINCH.runs.load(Ordering::SeqCst), before + 1, "the caller should handle it at once");
    assert!(!near(WINCH.sp.load(Ordering::SeqCst), LOCAL.load(Ordering::SeqCst)));
    resume(&mut l, Duration::from_millis(2)).unwrap();
    assert!(l.is_continuation(), "the function never saw the signal: its read goes on");
    assert_eq!(unsafe { libc::write(w, b"x".as_ptr() as *const libc::c_void, 1) }, 1);
    resume(&mut l, Duration::from_secs(5)).unwrap();
    assert_eq!(l.completion().unwrap().0, 1);
    unsafe {
        libc::close(r);
        libc::close(w);
    }
}

#[test]
fn cancelling_a_held_function_gives_the_caller_its_signals_back() {
    install(libc::SIGURG, on_urg, 0);
    static LOCAL: AtomicUsize = AtomicUsize::new(0);
    for _ in 0..20 {
        let (r, w) = pipe();
        let before = URG.runs.load(Ordering::SeqCst);
        let mut l = blocked_reader(true, r, &LOCAL);
        kill_self(libc::SIGURG);
        assert_eq!(URG.runs.load(Ordering::SeqCst), before);
        l.cancel();
        assert!(!blocks(libc::SIGURG), "cancel should restore the caller's mask");
        assert_eq!(URG.runs.load(Ordering::SeqCst), before + 1, "the held signal is delivered to the caller");
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
}

#[test]
fn a_paused_function_holds_signals_too() {
    static RAN: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_chld(_: libc::c_int) {
        RAN.store(true, Ordering::SeqCst);
    }
    install(libc::SIGCHLD, on_chld, libc::SA_RESTART);
    let mut l = Builder::new()
        .hold_signals(true)
        .launch(
            || {
                linger::pause();
                RAN.load(Ordering::SeqCst)
            },
            Duration::from_secs(5),
        )
        .unwrap();
    assert!(l.is_continuation());
    kill_self(libc::SIGCHLD);
    assert!(!RAN.load(Ordering::SeqCst), "held while paused");
    resume(&mut l, Duration::from_secs(5)).unwrap();
    assert_eq!(l.completion(), Some(true), "delivered inside the function once resumed");
    assert!(!blocks(libc::SIGCHLD));
}

#[test]
fn holding_signals_and_migrating_do_not_mix() {
    let r = unsafe { Builder::new().hold_signals(true).migratable(true) }.launch(|| 1, Duration::from_millis(1));
    assert!(matches!(r, Err(Error::Config(_))));
}
