//! A thread locale (`uselocale`) belongs to the flow that set it: a
//! function that installed its own and is stopped (paused, or preempted at
//! an arbitrary instruction) hands the caller the caller's own locale, and
//! finds its own again when resumed, whatever the caller installed meanwhile.
//! The switch reads glibc's locale word directly (`flow.rs`); these loops
//! check that what it reads and writes is what `uselocale` sees.

use std::time::{Duration, Instant};

use linger::{launch, pause, resume, Linger};

struct Locale(libc::locale_t);

impl Locale {
    fn new() -> Locale {
        // SAFETY: a fresh "C" locale object, freed on drop.
        let l = unsafe { libc::newlocale(libc::LC_ALL_MASK, c"C".as_ptr(), std::ptr::null_mut()) };
        assert!(!l.is_null());
        Locale(l)
    }
    fn addr(&self) -> usize {
        self.0 as usize
    }
}

impl Drop for Locale {
    fn drop(&mut self) {
        // SAFETY: made by `newlocale`, no longer installed on any thread.
        unsafe { libc::freelocale(self.0) };
    }
}

fn current() -> usize {
    // SAFETY: a null argument only queries.
    unsafe { libc::uselocale(std::ptr::null_mut()) as usize }
}

fn install(l: usize) {
    // SAFETY: a live locale object (or LC_GLOBAL_LOCALE).
    unsafe { libc::uselocale(l as libc::locale_t) };
}

#[test]
fn a_paused_function_keeps_its_locale_and_the_caller_keeps_its_own() {
    let global = current();
    let callers = [Locale::new(), Locale::new()];
    for round in 0..2_000usize {
        let mine = Locale::new().addr();
        let mut l = launch(
            move || {
                install(mine);
                for _ in 0..5 {
                    pause();
                    assert_eq!(current(), mine, "the function lost its locale across a pause");
                }
                install(global);
            },
            Duration::ZERO,
        )
        .unwrap();
        for step in 0..6 {
            let ours = callers[(round + step) % 2].addr();
            install(ours);
            resume(&mut l, Duration::from_secs(10)).unwrap();
            assert_eq!(current(), ours, "the caller got the function's locale");
        }
        assert!(matches!(l, Linger::Completion(())));
        install(global);
        // SAFETY: installed on no thread any more.
        unsafe { libc::freelocale(mine as libc::locale_t) };
    }
}

#[test]
fn a_preempted_function_keeps_its_locale_and_the_caller_keeps_its_own() {
    let global = current();
    let caller = Locale::new();
    let mut stops = 0;
    for _ in 0..200 {
        let mine = Locale::new().addr();
        let mut l = launch(
            move || {
                install(mine);
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(3) {
                    assert_eq!(current(), mine);
                }
                install(global);
            },
            Duration::from_micros(200),
        )
        .unwrap();
        while !matches!(l, Linger::Completion(())) {
            stops += 1;
            install(caller.addr());
            assert_eq!(current(), caller.addr());
            resume(&mut l, Duration::from_micros(200)).unwrap();
            assert_eq!(current(), caller.addr(), "the caller got the function's locale");
        }
        install(global);
        // SAFETY: installed on no thread any more.
        unsafe { libc::freelocale(mine as libc::locale_t) };
    }
    assert!(stops > 0, "never preempted: the test checked nothing");
}
