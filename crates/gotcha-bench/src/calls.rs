//! Table 3 analogue: what calls and variable accesses cost once gotcha has
//! isolated a library, next to the same before isolation and to a trivial
//! libc call and a system call.
//!
//! The isolated library is `libgotcha_bench_nop.so` (built by build.rs).
//! Part A runs before [`crate::isolate`], part B after; within a part the
//! measurements take turns batch by batch, so that drift on a shared
//! machine hits them alike.

use std::ffi::{c_char, c_int, c_void};
use std::hint::black_box;
use std::time::{Duration, Instant};

use gotcha::{Exhausted, Lease};

use crate::png::{self, Png};
use crate::progress::Phase;
use crate::stats::Summary;

extern "C" {
    fn gotcha_bench_nop(x: c_int) -> c_int;
    fn gotcha_bench_global_get() -> c_int;
    fn gotcha_bench_malloc_free(n: usize);
    fn gotcha_bench_strlen(s: *const c_char) -> usize;
    fn gotcha_bench_lazy_count() -> c_int;
    fn gotcha_bench_lazy_call(i: c_int, x: c_int) -> c_int;
    fn gotcha_bench_stdout() -> *mut c_void;
}

type Nop = unsafe extern "C" fn(c_int) -> c_int;

/// The program's own reference to `gotcha_bench_nop`: what its GOT slot
/// holds now (the function before isolation, its stub after).
fn nop_as_the_program_sees_it() -> Nop {
    black_box(gotcha_bench_nop as Nop)
}

/// The library's definition itself, from its symbol table.
fn nop_definition() -> Nop {
    // SAFETY: dlsym with a C string; the symbol is a function of this type
    // (non-null: the library is linked in).
    unsafe {
        let p = libc::dlsym(libc::RTLD_DEFAULT, c"gotcha_bench_nop".as_ptr());
        assert!(!p.is_null(), "gotcha_bench_nop not found");
        std::mem::transmute::<*mut c_void, Nop>(p)
    }
}

#[inline(never)]
fn call_loop(f: Nop, n: usize) -> c_int {
    let mut x = 0;
    for _ in 0..n {
        // SAFETY: `f` is gotcha_bench_nop or its stub: int -> int, no state.
        x = unsafe { f(black_box(x)) };
    }
    x
}

static LOCAL: c_int = 7;

#[inline(never)]
fn read_loop(p: *const c_int, n: usize) -> c_int {
    let mut s: c_int = 0;
    for _ in 0..n {
        // SAFETY: `p` is a live, aligned int (a static).
        s = s.wrapping_add(unsafe { std::ptr::read_volatile(black_box(p)) });
    }
    s
}

/// The isolated library's variable, at the address `dlsym` gives the
/// program. Not through a relocation: gotcha refuses to isolate a library
/// whose variables the program's relocations name (docs/safety.md,
/// "gotcha"), and cannot see a pointer taken this way, which stays on the
/// program's own copy.
fn global_ptr() -> *mut c_int {
    static P: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: a NUL-terminated name; the library is linked, so loaded.
    let p = *P.get_or_init(|| unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"gotcha_bench_global".as_ptr()) } as usize);
    assert!(p != 0, "gotcha_bench_global not found");
    black_box(p as *mut c_int)
}

/// ns per operation of one batch of `n`.
fn per_op(n: usize, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64 / n as f64
}

/// ns per call of `n` calls of `f`.
fn each(n: usize, mut f: impl FnMut()) -> f64 {
    per_op(n, || {
        for _ in 0..n {
            f();
        }
    })
}

fn with_libset<R>(libset: usize, f: impl FnOnce() -> R) -> R {
    let prev = gotcha::set_current_libset(libset);
    let r = f();
    gotcha::set_current_libset(prev);
    r
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    pub key: &'static str,
    pub what: String,
    pub when: &'static str,
    pub samples: String,
    pub s: Summary,
}

/// Iterations.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Operations per batch (sub-microsecond operations).
    pub batch: usize,
    /// Launches per batch.
    pub launch_batch: usize,
    /// Batches per measurement.
    pub reps: usize,
    /// Resets timed, of each kind.
    pub resets: usize,
    pub quiet: bool,
}

type Measure<'a> = (&'static str, String, Box<dyn FnMut() -> f64 + 'a>);

/// Runs `ms` in rotation, `reps` batches each.
fn interleave(plan: &Plan, when: &'static str, what: &str, mut ms: Vec<Measure<'_>>, per: usize) -> Vec<Row> {
    let mut samples: Vec<Vec<f64>> = ms.iter().map(|_| Vec::with_capacity(plan.reps)).collect();
    for m in ms.iter_mut() {
        (m.2)(); // warm up
    }
    let mut ph = Phase::new(what, plan.reps as u64, plan.quiet);
    for r in 0..plan.reps {
        for k in 0..ms.len() {
            let i = (r + k) % ms.len();
            samples[i].push((ms[i].2)());
        }
        ph.inc(1);
    }
    ms.into_iter()
        .zip(samples)
        .map(|((key, what, _), s)| Row {
            key,
            what,
            when,
            samples: format!("{} batches of {per}", s.len()),
            s: Summary::of(&s).expect("reps > 0"),
        })
        .collect()
}

fn common_measures<'a>(n: usize) -> Vec<Measure<'a>> {
    vec![
        (
            "gettimeofday",
            "gettimeofday() (vDSO)".into(),
            Box::new(move || {
                let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
                each(n, || {
                    // SAFETY: a valid timeval; no timezone.
                    unsafe { libc::gettimeofday(black_box(&mut tv), std::ptr::null_mut()) };
                })
            }),
        ),
        (
            "getpid",
            "syscall(SYS_getpid) (a raw system call)".into(),
            Box::new(move || {
                each(n, || {
                    // SAFETY: getpid has no arguments or effects.
                    black_box(unsafe { libc::syscall(libc::SYS_getpid) });
                })
            }),
        ),
        (
            "malloc_free_rust",
            "malloc(64) + free from the program (libc, no gotcha)".into(),
            Box::new(move || {
                each(n, || {
                    // SAFETY: a 64-byte block, written once, freed once.
                    unsafe {
                        let p = libc::malloc(black_box(64)) as *mut u8;
                        std::ptr::write_volatile(p, 1);
                        libc::free(p.cast());
                    }
                })
            }),
        ),
        (
            "local_read",
            "read of the program's own global variable".into(),
            Box::new(move || per_op(n, || { black_box(read_loop(&LOCAL, n)); })),
        ),
    ]
}

/// Part A's results, and what part B compares with them.
pub struct Before {
    pub rows: Vec<Row>,
    /// The first half of the lazily bound functions.
    pub lazy: Lazy,
}

/// Calls of lazily bound functions, each timed alone.
#[derive(Clone, Debug, Default)]
pub struct Lazy {
    /// The first call of each function.
    pub first: Vec<f64>,
    /// Its second call, right after.
    pub second: Vec<f64>,
    /// The timing alone (two clock reads with nothing between).
    pub clock: Vec<f64>,
}

/// Calls each lazily bound function in `range` twice.
fn lazy_calls(range: std::ops::Range<usize>) -> Lazy {
    let mut l = Lazy::default();
    for i in range {
        for v in [&mut l.first, &mut l.second] {
            let t = Instant::now();
            // SAFETY: i is below gotcha_bench_lazy_count().
            black_box(unsafe { gotcha_bench_lazy_call(black_box(i as c_int), 1) });
            v.push(t.elapsed().as_nanos() as f64);
        }
        let t = Instant::now();
        l.clock.push(black_box(t).elapsed().as_nanos() as f64);
    }
    l
}

fn lazy_half() -> usize {
    // SAFETY: returns a constant.
    (unsafe { gotcha_bench_lazy_count() }) as usize / 2
}

/// Part A: before isolation.
pub fn before(plan: &Plan) -> Before {
    let n = plan.batch;
    let lazy = lazy_calls(0..lazy_half());
    let mut ms: Vec<Measure<'_>> = vec![
        (
            "call_plain",
            "call of gotcha_bench_nop() (the program's GOT slot: the function)".into(),
            Box::new(move || {
                let f = nop_as_the_program_sees_it();
                per_op(n, || { black_box(call_loop(f, n)); })
            }),
        ),
        (
            "global_read",
            "read of the library's variable gotcha_bench_global (through a pointer from dlsym)".into(),
            Box::new(move || per_op(n, || { black_box(read_loop(global_ptr(), n)); })),
        ),
        (
            "malloc_free_lib",
            "malloc(64) + free from inside the library".into(),
            Box::new(move || {
                each(n, || {
                    // SAFETY: the library's function allocates and frees.
                    unsafe { gotcha_bench_malloc_free(black_box(64)) };
                })
            }),
        ),
    ];
    ms.extend(common_measures(n));
    let rows = interleave(plan, "before isolate", "calls before isolation", ms, n);
    Before { rows, lazy }
}

/// What the program and the copies see of the library's variable.
#[derive(Clone, Copy, Debug)]
pub struct Sharing {
    pub program: c_int,
    pub base_library: c_int,
    pub copy: c_int,
}

/// The reset measurements.
#[derive(Clone, Debug)]
pub struct Resets {
    pub after_png: Summary,
    pub bare: Summary,
    pub bytes: usize,
    pub blocks: Summary,
}

/// Part B's results.
pub struct After {
    pub rows: Vec<Row>,
    /// The second half of the lazily bound functions.
    pub lazy: Lazy,
    pub sharing: Sharing,
    /// The program's reference to the function is the stub, not the function.
    pub program_calls_stub: bool,
    pub libset: usize,
    pub resets: Resets,
}

/// Is libc among the isolated libraries (the `--libc` run)?
fn libc_in_libsets() -> bool {
    gotcha::code().objects.iter().any(|o| o.name.contains("/libc.so"))
}

/// Part B: after isolation (of at least libgotcha_bench_nop, libpng16, libz).
pub fn after(plan: &Plan, png_for_reset: Png) -> Result<After, String> {
    let n = plan.batch;
    let lazy = lazy_calls(lazy_half()..2 * lazy_half());
    let lease = Lease::acquire(Exhausted::Fail).map_err(|e| e.to_string())?.ok_or("no libset")?;
    let k = lease.libset();
    let definition = nop_definition();
    let program_calls_stub = nop_as_the_program_sees_it() as usize != definition as usize;

    // SAFETY: the variable is only touched by this thread here.
    let sharing = unsafe {
        let g = global_ptr();
        let old = *g;
        *g = 42;
        let copy = with_libset(k, || gotcha_bench_global_get());
        let s = Sharing { program: std::ptr::read_volatile(g), base_library: gotcha_bench_global_get(), copy };
        *g = old;
        s
    };

    let text = c"hello, world";
    // With libc isolated, the caller library's GOT slot for `stdout` is
    // trapped: each read faults and is redirected (the paper's "global
    // access"); otherwise a plain load.
    let trapped = gotcha::trap_stats().variables > 0;
    let how = if trapped { "a trapped GOT slot: a fault per read" } else { "a plain GOT load" };
    let strlen_where = if libc_in_libsets() { "the copy's libc" } else { "the program's libc, not wrapped" };
    let mut ms: Vec<Measure<'_>> = vec![
        (
            "stdout_read_0",
            format!("read of libc's stdout from a -fpic library ({how}), libset 0 current"),
            Box::new(move || {
                // SAFETY: returns the value of libc's stdout.
                each(n, || { black_box(unsafe { gotcha_bench_stdout() }); })
            }),
        ),
        (
            "stdout_read_k",
            format!("read of libc's stdout from a -fpic library ({how}), libset {k} current"),
            Box::new(move || {
                // SAFETY: as above.
                with_libset(k, || each(n, || { black_box(unsafe { gotcha_bench_stdout() }); }))
            }),
        ),
        (
            "call_definition",
            "call of gotcha_bench_nop() through its address from dlsym (no stub)".into(),
            Box::new(move || per_op(n, || { black_box(call_loop(definition, n)); })),
        ),
        (
            "call_stub_0",
            "call of gotcha_bench_nop() (GOT slot: the stub), libset 0 current".into(),
            Box::new(move || {
                let f = nop_as_the_program_sees_it();
                per_op(n, || { black_box(call_loop(f, n)); })
            }),
        ),
        (
            "call_stub_k",
            format!("call of gotcha_bench_nop() (GOT slot: the stub), libset {k} current (its copy)"),
            Box::new(move || {
                let f = nop_as_the_program_sees_it();
                with_libset(k, || per_op(n, || { black_box(call_loop(f, n)); }))
            }),
        ),
        (
            "global_read_0",
            "read of gotcha_bench_global, libset 0 current".into(),
            Box::new(move || per_op(n, || { black_box(read_loop(global_ptr(), n)); })),
        ),
        (
            "global_read_k",
            format!("read of gotcha_bench_global, libset {k} current"),
            Box::new(move || with_libset(k, || per_op(n, || { black_box(read_loop(global_ptr(), n)); }))),
        ),
        (
            "malloc_free_base",
            "malloc(64) + free from inside the library, libset 0 (libc directly)".into(),
            Box::new(move || {
                each(n, || {
                    // SAFETY: the library's function allocates and frees.
                    unsafe { gotcha_bench_malloc_free(black_box(64)) };
                })
            }),
        ),
        (
            "malloc_free_copy",
            format!("malloc(64) + free from inside libset {k}'s copy (gotcha's recording wrappers)"),
            Box::new(move || {
                with_libset(k, || {
                    each(n, || {
                        // SAFETY: as above, in the copy.
                        unsafe { gotcha_bench_malloc_free(black_box(64)) };
                    })
                })
            }),
        ),
        (
            "strlen_base",
            "strlen(12 chars) from inside the library, libset 0".into(),
            Box::new(move || {
                each(n, || {
                    // SAFETY: a NUL-terminated string.
                    black_box(unsafe { gotcha_bench_strlen(black_box(text.as_ptr())) });
                })
            }),
        ),
        (
            "strlen_copy",
            format!("strlen(12 chars) from inside libset {k}'s copy ({strlen_where})"),
            Box::new(move || {
                with_libset(k, || {
                    each(n, || {
                        // SAFETY: as above.
                        black_box(unsafe { gotcha_bench_strlen(black_box(text.as_ptr())) });
                    })
                })
            }),
        ),
    ];
    ms.extend(common_measures(n));
    let mut rows = interleave(plan, "after isolate", "calls after isolation", ms, n);

    let m = plan.launch_batch;
    let timeout = Duration::from_micros(100);
    let launches: Vec<Measure<'_>> = vec![
        (
            "launch_plain",
            "linger launch + return of an empty fn, 100 us timeout".into(),
            Box::new(move || {
                per_op(m, || {
                    for _ in 0..m {
                        black_box(linger::launch(|| black_box(1u32), timeout).expect("launch").is_completion());
                    }
                })
            }),
        ),
        (
            "launch_isolated",
            "the same, isolated (a libset leased and handed back)".into(),
            Box::new(move || {
                // SAFETY: the function calls no isolated library.
                let b = unsafe { linger::Builder::new().isolated(true) };
                per_op(m, || {
                    for _ in 0..m {
                        black_box(b.launch(|| black_box(1u32), timeout).expect("isolated launch").is_completion());
                    }
                })
            }),
        ),
    ];
    rows.extend(interleave(plan, "after isolate", "launches", launches, m));
    drop(lease);
    let resets = resets(plan, png_for_reset)?;
    Ok(After { rows, lazy, sharing, program_calls_stub, libset: k, resets })
}

/// Times `Lease::reset` of a libset whose copies started a PNG decode (what
/// a cancelled decode leaves), and of one that did nothing.
fn resets(plan: &Plan, png: Png) -> Result<Resets, String> {
    let (mut after_png, mut bare, mut blocks, mut bytes) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut ph = Phase::new("libset resets", plan.resets as u64, plan.quiet);
    for _ in 0..plan.resets {
        for with_png in [true, false] {
            let lease = Lease::acquire(Exhausted::Fail).map_err(|e| e.to_string())?.ok_or("no libset")?;
            if with_png && !with_libset(lease.libset(), || png::begin_and_abandon(png.data)) {
                return Err("png_image_begin_read_from_memory failed in the copy".into());
            }
            let t = Instant::now();
            let r = lease.reset();
            let ns = t.elapsed().as_nanos() as f64;
            bytes = r.bytes;
            if with_png {
                after_png.push(ns);
                blocks.push(r.blocks as f64);
            } else {
                bare.push(ns);
            }
        }
        ph.inc(1);
    }
    let s = |v: &[f64]| Summary::of(v).ok_or("no resets");
    Ok(Resets { after_png: s(&after_png)?, bare: s(&bare)?, bytes, blocks: s(&blocks)? })
}
