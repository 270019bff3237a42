//! Libsets: copies of the isolated libraries in a `dlmopen` namespace,
//! leased to one function at a time and reset after a cancellation.
//!
//! glibc 2.36 allows 16 namespaces, the program's own included, and each
//! copy of libc (which every namespace loads) takes static TLS: 11 libsets
//! fit by default, 15 with `GLIBC_TUNABLES=glibc.rtld.nns=16` set before the
//! process starts. Libsets are made on demand, up to what the loader allows.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::base::objects::{self, Loaded};
use crate::libsets::relink::{self, Plan, PLAN};
use crate::libsets::libc_policy;
use crate::routing::{dispatch, heap};
use crate::{Error, Stats};

/// What to do when every libset is leased and no more can be made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exhausted {
    /// Fail the launch with [`Error::NoLibset`].
    #[default]
    Fail,
    /// Run without isolation: the libraries are the program's own, and
    /// deadlines inside them are deferred as usual.
    Share,
    /// Wait up to this long for a libset to be released, then fail.
    Wait(Duration),
}

struct Copy {
    exec: Vec<(usize, usize)>,
    /// (address, contents after initialisation) of each writable range the
    /// loader leaves writable.
    snapshot: Vec<(usize, Box<[u8]>)>,
}

struct Libset {
    /// Never changed once made: a reset reads it outside the pool's lock.
    copies: Arc<[Copy]>,
    bytes: usize,
    /// `dlmopen` handles of the isolated libraries, in the plan's order
    /// (kept open: the libset lives as long as the process).
    handles: Vec<usize>,
    /// The image of its copy of libc, when libc is isolated.
    libc_image: Option<(usize, usize)>,
}

/// Functions and variables of a libset's copy of libc that gotcha calls
/// itself (each 0 when the libset has no copy of libc, or lacks it).
struct LibcCopy {
    /// Called when a lease ends normally, so that what the function
    /// printed is written, and at exit for the exiting thread's libset.
    fflush: AtomicUsize,
    /// Each thread's first entry (`thread_ready`).
    ctype_init: AtomicUsize,
    /// A thread's first entry after a reset (`thread_ready`).
    uselocale: AtomicUsize,
    /// What `setlocale_both` calls first.
    setlocale: AtomicUsize,
    /// The copy's `stdout` variable, and the stream lock calls, for the
    /// flush at exit.
    stdout: AtomicUsize,
    ftrylockfile: AtomicUsize,
    funlockfile: AtomicUsize,
}

static LIBC: [LibcCopy; dispatch::MAX_LIBSETS] = [const {
    LibcCopy {
        fflush: AtomicUsize::new(0),
        ctype_init: AtomicUsize::new(0),
        uselocale: AtomicUsize::new(0),
        setlocale: AtomicUsize::new(0),
        stdout: AtomicUsize::new(0),
        ftrylockfile: AtomicUsize::new(0),
        funlockfile: AtomicUsize::new(0),
    }
}; dispatch::MAX_LIBSETS];

struct Pool {
    /// Libset i + 1 is `sets[i]`.
    sets: Vec<Libset>,
    free: Vec<usize>,
    leased: usize,
    /// Why no more libsets can be made, once the loader refused.
    full: Option<&'static str>,
    stats: Stats,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { sets: Vec::new(), free: Vec::new(), leased: 0, full: None, stats: Stats {
    libsets: 0,
    leased: 0,
    resets: 0,
    blocks_reclaimed: 0,
    last_reset_ns: 0,
    last_reset_bytes: 0,
} });
static RELEASED: Condvar = Condvar::new();
/// The copies' code, for the preemption handler's table.
static CODE: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
/// The copies as objects (program headers), for the handler's unwinding.
static OBJECTS: Mutex<Vec<crate::CopyObject>> = Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A libset leased to one function. Dropping it gives the libset back as
/// it is (the function completed: what its libraries allocated is handed
/// over); [`Lease::reset`] restores it first (the function was cancelled).
#[derive(Debug)]
pub struct Lease {
    index: usize,
    created: bool,
    /// Reset: nothing of the function's is left to write out when it ends.
    was_reset: bool,
}

/// What a reset did.
#[derive(Clone, Copy, Debug)]
pub struct ResetReport {
    /// How long the reset took.
    pub duration: Duration,
    /// Bytes of writable segments restored.
    pub bytes: usize,
    /// Heap blocks freed.
    pub blocks: usize,
}

impl Lease {
    /// Leases a free libset, making one if none is free. `Ok(None)` when
    /// none is available and the policy is [`Exhausted::Share`].
    pub fn acquire(policy: Exhausted) -> Result<Option<Lease>, Error> {
        let plan = PLAN.lock().unwrap_or_else(|e| e.into_inner()).clone().ok_or(Error::NotIsolating)?;
        if plan.isolated.is_empty() {
            return Ok(None); // `all`, and nothing could be copied: nothing to isolate
        }
        let deadline = match policy {
            Exhausted::Wait(d) => Some(Instant::now() + d),
            _ => None,
        };
        let mut p = pool();
        loop {
            if let Some(index) = p.free.pop() {
                p.leased += 1;
                heap::open(index);
                return Ok(Some(Lease { index, created: false, was_reset: false }));
            }
            if p.full.is_none() && p.sets.len() + 1 < dispatch::MAX_LIBSETS {
                let index = p.sets.len() + 1;
                match make(index, &plan) {
                    Ok(set) => {
                        p.sets.push(set);
                        p.leased += 1;
                        heap::open(index);
                        crate::bump_generation();
                        return Ok(Some(Lease { index, created: true, was_reset: false }));
                    }
                    Err(Error::Loader(m)) if p.sets.is_empty() => return Err(Error::Loader(m)),
                    Err(Error::Loader(m)) => p.full = Some(hint(&m)),
                    Err(e) => return Err(e),
                }
            }
            let libsets = p.sets.len();
            let hint = p.full.unwrap_or("glibc allows 16 namespaces, the program's own included");
            match (policy, deadline) {
                (Exhausted::Share, _) => return Ok(None),
                (Exhausted::Wait(_), Some(d)) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(Error::NoLibset { libsets, hint });
                    }
                    p = RELEASED.wait_timeout(p, d - now).unwrap_or_else(|e| e.into_inner()).0;
                }
                _ => return Err(Error::NoLibset { libsets, hint }),
            }
        }
    }

    /// Makes libsets until `n` exist (or the loader refuses); returns how
    /// many exist. Making one takes about a millisecond: done ahead of
    /// time, the first isolated launches do not pay it.
    pub fn prepare(n: usize) -> Result<usize, Error> {
        let plan = PLAN.lock().unwrap_or_else(|e| e.into_inner()).clone().ok_or(Error::NotIsolating)?;
        if plan.isolated.is_empty() {
            return Ok(0);
        }
        let mut p = pool();
        while p.sets.len() < n.min(dispatch::MAX_LIBSETS - 1) && p.full.is_none() {
            let index = p.sets.len() + 1;
            match make(index, &plan) {
                Ok(set) => {
                    p.sets.push(set);
                    p.free.insert(0, index);
                    crate::bump_generation();
                }
                Err(Error::Loader(m)) if p.sets.is_empty() => return Err(Error::Loader(m)),
                Err(Error::Loader(m)) => p.full = Some(hint(&m)),
                Err(e) => return Err(e),
            }
        }
        Ok(p.sets.len())
    }

    /// The libset's number (1..): what [`crate::set_current_libset`] takes.
    pub fn libset(&self) -> usize {
        self.index
    }

    /// Was the libset made for this lease (new code the preemption
    /// handler must learn about)?
    pub fn created(&self) -> bool {
        self.created
    }

    /// Heap blocks the libset's copies hold now.
    pub fn outstanding_blocks(&self) -> usize {
        heap::outstanding(self.index)
    }

    /// Restores the libset to its state right after it was made (its
    /// libraries' writable segments, from a snapshot) and frees what they
    /// allocated during the lease, then gives it back.
    ///
    /// Only for a libset no code is running in: the function that held it
    /// was cancelled, and nothing it left behind will call into it again.
    pub fn reset(mut self) -> ResetReport {
        self.was_reset = true;
        let t = Instant::now();
        // Not under the pool's lock: a launch leasing another libset must
        // not wait for this one's restore.
        let (copies, bytes) = {
            let p = pool();
            let set = &p.sets[self.index - 1];
            (set.copies.clone(), set.bytes)
        };
        for c in copies.iter() {
            for (at, bytes) in &c.snapshot {
                // SAFETY: a writable range of the copy's image, the size it
                // had when the snapshot was taken; no code of this libset
                // runs (the caller's promise).
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), *at as *mut u8, bytes.len()) };
            }
        }
        let blocks = heap::reclaim(self.index);
        // Threads that ran in the libset keep a thread locale in its copy
        // of libc that may point at what was just freed: each sets it back
        // to the global one when it next enters (`thread_ready`).
        RESETS[self.index].fetch_add(1, Ordering::Release);
        let duration = t.elapsed();
        let mut p = pool();
        p.stats.resets += 1;
        p.stats.blocks_reclaimed += blocks as u64;
        p.stats.last_reset_ns = duration.as_nanos() as u64;
        p.stats.last_reset_bytes = bytes;
        drop(p);
        ResetReport { duration, bytes, blocks }
    }
}

/// glibc's `LC_GLOBAL_LOCALE` (the libc crate has no constant for it).
const LC_GLOBAL_LOCALE: libc::locale_t = -1isize as libc::locale_t;
/// Per libset: how many times it was reset.
static RESETS: [std::sync::atomic::AtomicU32; dispatch::MAX_LIBSETS] =
    [const { std::sync::atomic::AtomicU32::new(0) }; dispatch::MAX_LIBSETS];

/// The program's `setlocale`.
static PROGRAM_SETLOCALE: AtomicUsize = AtomicUsize::new(0);

type SetlocaleFn = extern "C" fn(libc::c_int, *const libc::c_char) -> *mut libc::c_char;

/// What the program's and the copies' calls to `setlocale` reach in a
/// libset whose copy of libc is isolated: the copy's `setlocale`, whose
/// locale the copy's functions use, and, when it changed the locale, the
/// program's with the same arguments. The global locale is the process's:
/// the functions libc keeps the program's (`asprintf`, `gettext`, `error`,
/// `iconv_open`, ...) must format and translate as the copy's do.
extern "C" fn setlocale_both(category: libc::c_int, name: *const libc::c_char) -> *mut libc::c_char {
    let k = dispatch::current();
    let copy = LIBC.get(k).map_or(0, |c| c.setlocale.load(Ordering::Acquire));
    let program = PROGRAM_SETLOCALE.load(Ordering::Acquire);
    let own = if copy != 0 { copy } else { program };
    if own == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: a libc's `setlocale`, with the caller's arguments.
    let r = unsafe { std::mem::transmute::<usize, SetlocaleFn>(own) }(category, name);
    if copy != 0 && program != 0 && !name.is_null() && !r.is_null() {
        // SAFETY: the program's `setlocale` (this signature), called with
        // the caller's arguments (the environment it reads for "" is the
        // copy's too: `environ` is aliased); its result is its own.
        let program = unsafe { std::mem::transmute::<usize, SetlocaleFn>(program) };
        program(category, name);
    }
    r
}

/// The function calls to `name` reach in a libset with libc isolated, when
/// it is neither the copy's nor the program's alone.
pub(crate) fn libc_mirror(name: &str) -> Option<usize> {
    libc_policy::mirrored(name).then(|| {
        PROGRAM_SETLOCALE.store(relink::lookup(name, None), Ordering::Release);
        setlocale_both as *const () as usize
    })
}

thread_local! {
    /// Libsets whose copy of libc this thread has set up (bit i: libset i).
    static READY: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Per libset: its reset count when this thread last set it up.
    static SEEN: [std::cell::Cell<u32>; dispatch::MAX_LIBSETS] =
        const { [const { std::cell::Cell::new(0) }; dispatch::MAX_LIBSETS] };
}

/// Sets up the calling thread's state in `libset`'s copy of libc: the
/// first time, the per-thread pointers to the character-class tables that
/// `isalpha`, `printf` and `strtod` read (glibc sets them when a thread
/// starts, in the copy of libc that starts it (the program's), and in the
/// thread that loads a copy: every other thread would find them null); and
/// after the libset was reset, the thread's locale in the copy (`uselocale`
/// of a cancelled function may have left it at a locale the reset freed),
/// back to the global one, as it was when the copy was made.
#[inline]
pub(crate) fn thread_ready(libset: usize) {
    if libset == 0 || libset >= dispatch::MAX_LIBSETS {
        return;
    }
    let bit = 1u32 << libset;
    let Ok(ready) = READY.try_with(|r| r.get()) else { return };
    let resets = RESETS[libset].load(Ordering::Acquire);
    if ready & bit != 0 && SEEN.try_with(|s| s[libset].get() == resets).unwrap_or(true) {
        return;
    }
    let uselocale = LIBC[libset].uselocale.load(Ordering::Acquire);
    if ready & bit != 0 && uselocale != 0 {
        // SAFETY: the copy's `uselocale(locale_t)`: given LC_GLOBAL_LOCALE
        // it stores the copy's global locale and its tables in this
        // thread's TLS words of the copy, and does not read the old locale.
        let f: extern "C" fn(libc::locale_t) -> libc::locale_t = unsafe { std::mem::transmute(uselocale) };
        f(LC_GLOBAL_LOCALE);
    }
    let init = LIBC[libset].ctype_init.load(Ordering::Acquire);
    if init != 0 {
        // SAFETY: the copy's `__ctype_init(void)`: it stores three of this
        // thread's TLS words in the copy's static TLS block.
        let f: extern "C" fn() = unsafe { std::mem::transmute(init) };
        f();
    }
    let _ = READY.try_with(|r| r.set(ready | bit));
    let _ = SEEN.try_with(|s| s[libset].set(resets));
}

impl Drop for Lease {
    fn drop(&mut self) {
        let flush = LIBC[self.index].fflush.load(Ordering::Acquire);
        if flush != 0 && !self.was_reset {
            thread_ready(self.index);
            // SAFETY: the copy's `fflush`, called with NULL (every stream of
            // that copy) while no code of the libset runs: the function
            // completed.
            let f: extern "C" fn(*mut c_void) -> i32 = unsafe { std::mem::transmute(flush) };
            f(std::ptr::null_mut());
        }
        heap::hand_over(self.index);
        let mut p = pool();
        p.leased -= 1;
        p.free.push(self.index);
        drop(p);
        RELEASED.notify_one();
    }
}

fn hint(loader: &str) -> &'static str {
    if loader.contains("static TLS") {
        "the loader ran out of static TLS for another libc copy: start the process with GLIBC_TUNABLES=glibc.rtld.nns=16 for up to 15 libsets"
    } else if loader.contains("namespace") {
        "glibc allows 16 namespaces, the program's own included"
    } else {
        "the loader refused to make another copy"
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a C string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null C string.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// Loads copies of the isolated libraries into a new namespace, relinks
/// them, fills libset `index`'s dispatch table and takes the snapshot.
fn make(index: usize, plan: &Arc<Plan>) -> Result<Libset, Error> {
    let mut lmid: libc::Lmid_t = libc::LM_ID_NEWLM;
    let mut handles: Vec<*mut c_void> = Vec::new();
    let close = |hs: &[*mut c_void]| {
        for &h in hs.iter().rev() {
            // SAFETY: handles from our dlmopen calls, closed once.
            unsafe { libc::dlclose(h) };
        }
    };
    for l in &plan.isolated {
        let path = CString::new(l.obj.name.as_str()).map_err(|_| Error::Loader(format!("bad path {}", l.obj.name)))?;
        // SAFETY: a valid path; the namespace is ours.
        let h = unsafe { libc::dlmopen(lmid, path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            let e = dlerror();
            close(&handles);
            return Err(Error::Loader(e));
        }
        if handles.is_empty() {
            // SAFETY: RTLD_DI_LMID stores one Lmid_t.
            if unsafe { libc::dlinfo(h, libc::RTLD_DI_LMID, &mut lmid as *mut libc::Lmid_t as *mut c_void) } != 0 {
                let e = dlerror();
                handles.push(h);
                close(&handles);
                return Err(Error::Loader(e));
            }
        }
        handles.push(h);
    }
    // SAFETY: a live handle of the new namespace; nothing unloads it.
    let Some(map) = (unsafe { objects::map_of(handles[0]) }) else {
        close(&handles);
        return Err(Error::Loader("no link map for the new namespace".into()));
    };
    // SAFETY: as above.
    let chain = unsafe { objects::chain(map) };
    let libc = match plan.libc {
        Some(li) => match chain.iter().find(|c| c.name == plan.isolated[li].obj.name) {
            Some(c) => Some((li, c.clone(), plan.isolated[li].info.clone())),
            None => {
                close(&handles);
                return Err(Error::Loader("libc missing from its namespace".into()));
            }
        },
        None => None,
    };
    let libc_image = libc.as_ref().map(|(_, c, info)| {
        let (a, b) = info.extent();
        (c.bias + a as usize, c.bias + b as usize)
    });
    // Stream functions the program or the copies call: one thunk each.
    let mut streams = HashMap::new();
    if let (Some((li, _, _)), Some(image)) = (&libc, libc_image) {
        let mut names: BTreeSet<&str> =
            plan.routed.iter().filter(|r| libc_policy::file_arg(&r.name).is_some()).map(|r| r.name.as_str()).collect();
        for l in &plan.isolated {
            names.extend(l.info.relocs.iter().map(|r| l.info.syms[r.sym].name.as_str()).filter(|n| libc_policy::file_arg(n).is_some()));
        }
        streams = stream_thunks(handles[*li], image, !plan.std_streams_shared, names.into_iter())?;
    }
    let mut copies = Vec::new();
    let mut objects = Vec::new();
    let mut bytes = 0;
    for l in &plan.isolated {
        let Some(c) = chain.iter().find(|c| c.name == l.obj.name) else {
            close(&handles);
            return Err(Error::Loader(format!("{} missing from its namespace", l.obj.name)));
        };
        if relink::is_libc(c) {
            relink::relink_libc_copy(c, &l.info, &l.obj)?;
        } else {
            relink::relink_copy(c, &l.info, plan, &streams, libc_mirror)?;
        }
    }
    if let Some((li, _, _)) = &libc {
        prepare_stdio(index, handles[*li]);
        for (fake, name) in &plan.trapped {
            let real = find(handles[*li], name, None);
            if real != 0 {
                crate::routing::trap::set_real(*fake, index, real)?;
            }
        }
    }
    for l in &plan.isolated {
        let c = chain.iter().find(|c| c.name == l.obj.name).expect("found above");
        copies.push(snapshot(c, &l.info));
        if let Some(o) = copy_object(c, &l.info) {
            objects.push(o);
        }
    }
    for c in &copies {
        bytes += c.snapshot.iter().map(|s| s.1.len()).sum::<usize>();
    }
    for r in &plan.routed {
        let h = handles[r.lib];
        let t = target(h, r, &streams, plan.libc);
        if t != 0 {
            dispatch::set_target(index, r.id, t);
        }
    }
    CODE.lock().unwrap_or_else(|e| e.into_inner()).extend(copies.iter().flat_map(|c| c.exec.iter().copied()));
    OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).extend(objects);
    // The handles stay open for the life of the process: the libset is reused.
    Ok(Libset { copies: copies.into(), bytes, handles: handles.iter().map(|&h| h as usize).collect(), libc_image })
}

/// Thunks for the stream functions `names` of the copy of libc `h` (image
/// `image`): a stream of the copy's goes to the copy, any other to the
/// program's libc.
fn stream_thunks<'a>(
    h: *mut c_void,
    image: (usize, usize),
    null_to_copy: bool,
    names: impl Iterator<Item = &'a str>,
) -> Result<HashMap<String, usize>, Error> {
    let mut calls = Vec::new();
    let mut named = Vec::new();
    for n in names {
        let (Some(arg), copy, program) = (libc_policy::file_arg(n), find(h, n, None), relink::lookup(n, None)) else { continue };
        if copy == 0 || program == 0 {
            continue;
        }
        calls.push(dispatch::StreamCall { arg, copy_image: image, copy, program, null_to_copy });
        named.push(n.to_owned());
    }
    let thunks = dispatch::stream_thunks(&calls)?;
    Ok(named.into_iter().zip(thunks).collect())
}

/// Also run among the destructors (`_dl_fini`, after every `atexit`
/// handler): a program's destructor may print too.
#[used]
#[link_section = ".fini_array"]
static FLUSH_AT_FINI: extern "C" fn() = flush_at_exit;

/// At exit (the program's libc runs it): a function that calls `exit` in
/// a libset, or a program run whole in one (`linger-run --isolate libc`),
/// has printed into its copy's `stdout`, which the program's libc does
/// not know. The exiting thread's libset is written out, unless another
/// thread holds the stream. Libsets of functions that are stopped are not:
/// their output is cut short, as a killed thread's would be.
extern "C" fn flush_at_exit() {
    let k = dispatch::current();
    let Some(c) = LIBC.get(k).filter(|_| k != 0) else { return };
    let [flush, out, trylock, unlock] =
        [&c.fflush, &c.stdout, &c.ftrylockfile, &c.funlockfile].map(|a| a.load(Ordering::Acquire));
    if flush == 0 || out == 0 || trylock == 0 || unlock == 0 {
        return;
    }
    // SAFETY: the copy's own functions on its own `stdout` (the variable
    // holds its FILE pointer); the lock is taken only if free or already
    // this thread's, and released again.
    unsafe {
        let f = *(out as *const *mut c_void);
        let trylock: extern "C" fn(*mut c_void) -> libc::c_int = std::mem::transmute(trylock);
        let unlock: extern "C" fn(*mut c_void) = std::mem::transmute(unlock);
        let fflush: extern "C" fn(*mut c_void) -> libc::c_int = std::mem::transmute(flush);
        if trylock(f) == 0 {
            fflush(f);
            unlock(f);
        }
    }
}

/// Readies a new libset's copy of libc before its snapshot: its standard
/// streams get buffers of their own (not from the heap, which a reset
/// would not give back), `stdin` unbuffered so that it reads no more of
/// the program's input than it uses, and the program's locale.
fn prepare_stdio(index: usize, h: *mut c_void) {
    const BUF: usize = 8192;
    let setvbuf = find(h, "setvbuf", None);
    let setlocale = find(h, "setlocale", None);
    let (out, inp) = (find(h, "stdout", None), find(h, "stdin", None));
    if setvbuf != 0 && out != 0 && inp != 0 {
        // SAFETY: the copy's own `setvbuf` on its own streams (the variables
        // `stdout`/`stdin` hold FILE pointers), with a buffer that lives as
        // long as the process; nothing else uses the new libset yet.
        unsafe {
            let f: extern "C" fn(*mut c_void, *mut libc::c_char, libc::c_int, libc::size_t) -> libc::c_int = std::mem::transmute(setvbuf);
            let buf: &'static mut [u8] = Box::leak(vec![0u8; BUF].into_boxed_slice());
            let mode = if libc::isatty(1) == 1 { libc::_IOLBF } else { libc::_IOFBF };
            f(*(out as *const *mut c_void), buf.as_mut_ptr() as *mut libc::c_char, mode, BUF);
            f(*(inp as *const *mut c_void), std::ptr::null_mut(), libc::_IONBF, 0);
        }
    }
    if setlocale != 0 {
        // SAFETY: querying the program's locale (a NULL locale changes
        // nothing) and setting the copy's to the same name; the returned
        // string is copied before any other call.
        unsafe {
            let now = libc::setlocale(libc::LC_ALL, std::ptr::null());
            if !now.is_null() {
                let name = CStr::from_ptr(now).to_owned();
                if name.as_bytes() != b"C" {
                    let f: extern "C" fn(libc::c_int, *const libc::c_char) -> *mut libc::c_char = std::mem::transmute(setlocale);
                    f(libc::LC_ALL, name.as_ptr());
                }
            }
        }
    }
    let c = &LIBC[index];
    for (slot, name) in [
        (&c.fflush, "fflush"),
        (&c.ctype_init, "__ctype_init"),
        (&c.uselocale, "uselocale"),
        (&c.ftrylockfile, "ftrylockfile"),
        (&c.funlockfile, "funlockfile"),
    ] {
        slot.store(find(h, name, None), Ordering::Release);
    }
    c.setlocale.store(setlocale, Ordering::Release);
    c.stdout.store(out, Ordering::Release);
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function with the program's libc.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(flush_at_exit);
    });
}

fn find(h: *mut c_void, name: &str, version: Option<&str>) -> usize {
    let Ok(n) = CString::new(name) else { return 0 };
    if let Some(v) = version.and_then(|v| CString::new(v).ok()) {
        // SAFETY: a live handle and C strings.
        let p = unsafe { libc::dlvsym(h, n.as_ptr(), v.as_ptr()) };
        if !p.is_null() {
            return p as usize;
        }
    }
    // SAFETY: as above.
    unsafe { libc::dlsym(h, n.as_ptr()) as usize }
}

fn snapshot(c: &Loaded, info: &crate::base::elf::Info) -> Copy {
    let exec = info.segments.iter().filter(|s| s.executable).map(|s| (c.bias + s.vaddr as usize, c.bias + (s.vaddr + s.memsz) as usize)).collect();
    let snapshot = info
        .mutable_ranges(4096)
        .into_iter()
        .map(|(a, b)| {
            let at = c.bias + a as usize;
            // SAFETY: a writable, mapped range of the copy's image.
            let bytes = unsafe { std::slice::from_raw_parts(at as *const u8, (b - a) as usize) }.to_vec().into_boxed_slice();
            (at, bytes)
        })
        .collect();
    Copy { exec, snapshot }
}

/// The copy's mapped program headers, found through its ELF header (at
/// the start of its first segment, where every linker puts both).
fn copy_object(c: &Loaded, info: &crate::base::elf::Info) -> Option<crate::CopyObject> {
    let first = info.segments.first()?;
    if first.vaddr != 0 || info.segments.is_empty() {
        return None;
    }
    let at = c.bias;
    // SAFETY: the first segment maps the file from offset 0: the ELF header.
    let ehdr = unsafe { &*(at as *const libc::Elf64_Ehdr) };
    if ehdr.e_ident[..4] != *b"\x7fELF" || ehdr.e_phoff + (ehdr.e_phnum as u64) * 56 > first.memsz {
        return None;
    }
    Some(crate::CopyObject {
        name: c.name.clone(),
        bias: c.bias,
        phdr: (at + ehdr.e_phoff as usize) as *const libc::Elf64_Phdr,
        phnum: ehdr.e_phnum as usize,
    })
}

/// The copies as loaded objects.
pub(crate) fn copy_objects() -> Vec<crate::CopyObject> {
    OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Points every existing libset's table slots for `routed` (functions
/// that just got stubs) at its own copies.
pub(crate) fn resolve(routed: &[crate::libsets::relink::Routed], libc: Option<usize>, std_streams_shared: bool) {
    let p = pool();
    for (i, set) in p.sets.iter().enumerate() {
        let streams = match (libc, set.libc_image) {
            (Some(li), Some(image)) => {
                let names = routed.iter().filter(|r| libc_policy::file_arg(&r.name).is_some()).map(|r| r.name.as_str());
                stream_thunks(set.handles[li] as *mut c_void, image, !std_streams_shared, names).unwrap_or_default()
            }
            _ => HashMap::new(),
        };
        for r in routed {
            let t = target(set.handles[r.lib] as *mut c_void, r, &streams, libc);
            if t != 0 {
                dispatch::set_target(i + 1, r.id, t);
            }
        }
    }
}

/// Where libset calls to the routed function `r` go: its stream thunk,
/// the mirror of a libc function, or its definition in the copy `h`.
fn target(h: *mut c_void, r: &crate::libsets::relink::Routed, streams: &HashMap<String, usize>, libc: Option<usize>) -> usize {
    if let Some(&t) = streams.get(&r.name) {
        return t;
    }
    if libc == Some(r.lib) {
        if let Some(m) = libc_mirror(&r.name) {
            return m;
        }
    }
    find(h, &r.name, r.version.as_deref())
}

/// The code of every copy made so far.
pub(crate) fn copy_code() -> Vec<(usize, usize)> {
    CODE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

pub(crate) fn stats() -> Stats {
    let p = pool();
    Stats { libsets: p.sets.len(), leased: p.leased, ..p.stats }
}
