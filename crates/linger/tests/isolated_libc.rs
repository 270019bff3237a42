//! libc itself isolated (`libc` named in the selection): code an isolated
//! function runs inside libc is preemptible there, in the libset's copy,
//! while what libc keeps process-wide stays the program's (its heap,
//! errno, the streams the caller opened).

use std::ffi::CString;
use std::io::Read;
use std::sync::Once;
use std::time::Duration;

use linger::{Builder, Linger};

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let r = linger::isolate(&linger::Selection::parse("libc").unwrap()).unwrap();
        assert!(r.libraries.iter().any(|l| l.contains("libc.so")), "{r:?}");
    });
}

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the functions here keep what libc makes for them inside
    // themselves (no stream or buffer of the copy's leaves them).
    unsafe { Builder::new().isolated(true) }
}

/// Runs `f` isolated with no time limit and returns its value.
fn completed<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match isolated().launch(f, Duration::MAX).unwrap() {
        Linger::Completion(v) => v,
        _ => panic!("not completed"),
    }
}

const MIB: usize = 1 << 20;

/// Copies 32 MiB `rounds` times with libc's memcpy (the program's call,
/// through its GOT), returning a checksum of what arrived.
fn copy_rounds(rounds: usize) -> impl FnOnce() -> u64 + Send + 'static {
    move || {
        let src: Vec<u8> = (0..32 * MIB).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; 32 * MIB];
        for _ in 0..rounds {
            // SAFETY: two live buffers of this length that do not overlap.
            unsafe { libc::memcpy(dst.as_mut_ptr() as *mut libc::c_void, src.as_ptr() as *const libc::c_void, dst.len()) };
        }
        dst.iter().step_by(4093).map(|&b| b as u64).sum()
    }
}

fn expected_checksum() -> u64 {
    (0..32 * MIB).step_by(4093).map(|i| (i % 251) as u64).sum()
}

/// Runs `f` to its end in slices of `slice`, counting the stops that were
/// deferred (taken only when libc returned) and those that were not.
fn slices<T: Send + 'static>(b: Builder, f: impl FnOnce() -> T + Send + 'static, slice: Duration) -> (T, usize, usize) {
    let mut l = b.launch(f, slice).unwrap();
    let (mut deferred, mut inside) = (0, 0);
    loop {
        match l {
            Linger::Completion(v) => return (v, deferred, inside),
            _ => {
                match linger::last_preemption().map(|p| p.deferred) {
                    Some(true) => deferred += 1,
                    Some(false) => inside += 1,
                    None => {}
                }
                linger::resume(&mut l, slice).unwrap();
            }
        }
    }
}

/// Formats `n` doubles with libc's snprintf (which linger defers in the
/// program's libc: it takes locale and stream locks), returning the sum of
/// the lengths.
fn format_doubles(n: usize) -> impl FnOnce() -> usize + Send + 'static {
    move || {
        let mut total = 0;
        let mut buf = [0u8; 128];
        for i in 0..n {
            let x = (i as f64).sqrt() * 1.0e-7 + i as f64;
            // SAFETY: a buffer of that size and a format that matches.
            let r = unsafe { libc::snprintf(buf.as_mut_ptr() as *mut libc::c_char, buf.len(), c"%.17g %.17e %a".as_ptr(), x, x, x) };
            total += r as usize;
        }
        total
    }
}

#[test]
fn a_deadline_inside_libc_is_taken_in_the_libsets_copy() {
    setup();
    let n = 300_000;
    let want = format_doubles(n)();
    for _ in 0..5 {
        let (total, deferred, inside) = slices(isolated(), format_doubles(n), Duration::from_micros(300));
        assert_eq!(total, want);
        assert!(inside > deferred, "isolated: {inside} stops inside libc's copy, {deferred} deferred");
    }
    // The program's own libc is still deferred.
    let (total, deferred, inside) = slices(Builder::new(), format_doubles(n), Duration::from_micros(300));
    assert_eq!(total, want);
    assert!(deferred > inside, "plain: {deferred} deferred, {inside} not");
}

#[test]
fn errno_set_inside_the_copy_is_the_one_the_program_reads() {
    setup();
    for _ in 0..200 {
        let t = completed(|| {
            let p = CString::new("/nonexistent/linger").unwrap();
            // SAFETY: a valid C string; chdir only reads it.
            let r = unsafe { libc::chdir(p.as_ptr()) };
            let e1 = std::io::Error::last_os_error().raw_os_error();
            let s = CString::new("99999999999999999999999").unwrap();
            // SAFETY: a valid C string; strtol reads it.
            let v = unsafe { libc::strtol(s.as_ptr(), std::ptr::null_mut(), 10) };
            let e2 = std::io::Error::last_os_error().raw_os_error();
            (r, e1, v, e2)
        });
        assert_eq!(t, (-1, Some(libc::ENOENT), libc::c_long::MAX, Some(libc::ERANGE)));
    }
}

/// A `FILE *` the test can send to the function.
struct Stream(*mut libc::FILE);
// SAFETY: used by one thread at a time (the function runs on this one).
unsafe impl Send for Stream {}

#[test]
fn a_stream_the_caller_opened_is_written_by_the_callers_libc() {
    setup();
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("isolated-libc-stream.txt");
    let cpath = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: valid C strings.
    let f = unsafe { libc::fopen(cpath.as_ptr(), c"w".as_ptr()) };
    assert!(!f.is_null());
    let s = Stream(f);
    let lines = 20_000;
    let (n, _, _) = slices(
        isolated(),
        move || {
            let s = s;
            let mut n = 0;
            for i in 0..lines {
                // SAFETY: the caller's open stream and a format that
                // matches its arguments.
                n += unsafe { libc::fprintf(s.0, c"line %d of %s\n".as_ptr(), i as libc::c_int, c"linger".as_ptr()) };
                let mut buf = [0u8; 64];
                // SAFETY: a buffer of that size and a matching format.
                unsafe { libc::snprintf(buf.as_mut_ptr() as *mut libc::c_char, buf.len(), c"%08d".as_ptr(), i as libc::c_int) };
                assert_eq!(&buf[..8], format!("{i:08}").as_bytes());
            }
            n
        },
        Duration::from_micros(50),
    );
    // SAFETY: the stream opened above, closed once.
    assert_eq!(unsafe { libc::fclose(f) }, 0);
    let mut text = String::new();
    std::fs::File::open(&path).unwrap().read_to_string(&mut text).unwrap();
    assert_eq!(n as usize, text.len());
    for (i, l) in text.lines().enumerate() {
        assert_eq!(l, format!("line {i} of linger"));
    }
    assert_eq!(text.lines().count(), lines);
}

#[test]
fn cancelled_inside_libc_the_libset_is_reset_and_works() {
    setup();
    let before = linger::stats();
    for i in 0..60u64 {
        let timeout = Duration::from_micros(200 + (i * 7919) % 4000);
        drop(isolated().launch(copy_rounds(4), timeout).unwrap());
    }
    let after = linger::stats();
    assert!(after.libset_resets > before.libset_resets, "{before:?} {after:?}");
    let (sum, _, _) = slices(isolated(), copy_rounds(2), Duration::from_millis(1));
    assert_eq!(sum, expected_checksum());
    // Formatting in the copy still works after the resets.
    let s = completed(|| {
        let mut buf = [0u8; 32];
        // SAFETY: a buffer of that size and a matching format.
        unsafe { libc::snprintf(buf.as_mut_ptr() as *mut libc::c_char, buf.len(), c"%.3f|%x".as_ptr(), 2.5f64, 255u32) };
        String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap()]).into_owned()
    });
    assert_eq!(s, "2.500|ff");
}

extern "C" {
    fn mbrtowc(pwc: *mut libc::wchar_t, s: *const libc::c_char, n: libc::size_t, ps: *mut libc::mbstate_t) -> libc::size_t;
}

/// The codeset of the calling thread's locale, as libc reports it.
fn codeset() -> String {
    // SAFETY: nl_langinfo returns a C string valid until the next call
    // that changes the locale; copied at once.
    unsafe { std::ffi::CStr::from_ptr(libc::nl_langinfo(libc::CODESET)) }.to_string_lossy().into_owned()
}

/// A locale that differs from the program's "C" one in what nl_langinfo
/// and mbrtowc see, and exists on every glibc since 2.35.
fn utf8_locale() -> libc::locale_t {
    // SAFETY: a valid name; a null base makes a new object.
    let l = unsafe { libc::newlocale(libc::LC_ALL_MASK, c"C.UTF-8".as_ptr(), std::ptr::null_mut()) };
    assert!(!l.is_null(), "no C.UTF-8 locale");
    l
}

#[test]
fn the_thread_locale_set_inside_the_function_is_the_one_its_libc_reads() {
    setup();
    for _ in 0..200 {
        let (inside, n, wc, after) = completed(|| {
            let loc = utf8_locale();
            // SAFETY: a live locale object; the previous one is kept and
            // given back below.
            let old = unsafe { libc::uselocale(loc) };
            let inside = codeset();
            let mut wc: libc::wchar_t = 0;
            // SAFETY: zeroes are the initial conversion state.
            let mut st: libc::mbstate_t = unsafe { std::mem::zeroed() };
            // SAFETY: two readable bytes, a place for the character.
            let n = unsafe { mbrtowc(&mut wc, c"\u{e9}".as_ptr(), 2, &mut st) };
            // SAFETY: `old` came from uselocale; `loc` is no longer used.
            unsafe {
                libc::uselocale(old);
                libc::freelocale(loc);
            }
            (inside, n, wc, codeset())
        });
        assert_eq!((inside.as_str(), n, wc), ("UTF-8", 2, 0xe9));
        assert_eq!(after, "ANSI_X3.4-1968");
    }
}

#[test]
fn a_thread_locale_left_by_a_cancelled_function_is_undone_by_the_reset() {
    setup();
    for _ in 0..50 {
        let l = isolated()
            .launch(
                || {
                    // SAFETY: a live locale object, never freed: the reset
                    // frees it with the libset's other blocks.
                    unsafe { libc::uselocale(utf8_locale()) };
                    assert_eq!(codeset(), "UTF-8");
                    while std::hint::black_box(codeset()) == "UTF-8" {}
                },
                Duration::from_millis(2),
            )
            .unwrap();
        assert!(matches!(l, Linger::Continuation(_)));
        drop(l);
        // The libset comes back as it was made: the global "C" locale.
        assert_eq!(completed(codeset), "ANSI_X3.4-1968");
    }
}

extern "C" {
    fn asprintf(out: *mut *mut libc::c_char, format: *const libc::c_char, ...) -> libc::c_int;
}

#[test]
fn setlocale_inside_the_function_is_the_locale_of_what_libc_keeps_the_programs() {
    setup();
    for _ in 0..100 {
        let (n, text) = completed(|| {
            // SAFETY: a valid locale name.
            assert!(!unsafe { libc::setlocale(libc::LC_ALL, c"C.UTF-8".as_ptr()) }.is_null());
            // asprintf stays the program's (the caller frees what it
            // returns); converting a wide 'é' needs a UTF-8 LC_CTYPE.
            let wide: [libc::wchar_t; 2] = [0xe9, 0];
            let mut out: *mut libc::c_char = std::ptr::null_mut();
            // SAFETY: a format that matches its argument, a place for the result.
            let n = unsafe { asprintf(&mut out, c"%ls".as_ptr(), wide.as_ptr()) };
            let mut text = Vec::new();
            if n >= 0 {
                // SAFETY: asprintf's string, freed once after the copy.
                unsafe {
                    text.extend_from_slice(std::ffi::CStr::from_ptr(out).to_bytes());
                    libc::free(out as *mut libc::c_void);
                }
            }
            // SAFETY: back to the program's locale for the libset's next user.
            unsafe { libc::setlocale(libc::LC_ALL, c"C".as_ptr()) };
            (n, text)
        });
        assert_eq!((n, text.as_slice()), (2, "\u{e9}".as_bytes()));
    }
}
