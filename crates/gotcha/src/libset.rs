//! Libsets: copies of the isolated libraries in a `dlmopen` namespace,
//! leased to one function at a time and reset after a cancellation.
//!
//! glibc 2.36 allows 16 namespaces, the program's own included, and each
//! copy of libc (which every namespace loads) takes static TLS: 11 libsets
//! fit by default, 15 with `GLIBC_TUNABLES=glibc.rtld.nns=16` set before the
//! process starts. Libsets are made on demand, up to what the loader allows.

use std::ffi::{c_void, CStr, CString};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::objects::{self, Loaded};
use crate::relink::{self, Plan, PLAN};
use crate::{dispatch, heap, Error, Stats};

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
}

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
}

/// What a reset did.
#[derive(Clone, Copy, Debug)]
pub struct ResetReport {
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
                return Ok(Some(Lease { index, created: false }));
            }
            if p.full.is_none() && p.sets.len() + 1 < dispatch::MAX_LIBSETS {
                let index = p.sets.len() + 1;
                match make(index, &plan) {
                    Ok(set) => {
                        p.sets.push(set);
                        p.leased += 1;
                        heap::open(index);
                        crate::bump_generation();
                        return Ok(Some(Lease { index, created: true }));
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
    pub fn reset(self) -> ResetReport {
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

impl Drop for Lease {
    fn drop(&mut self) {
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
    let mut copies = Vec::new();
    let mut objects = Vec::new();
    let mut bytes = 0;
    for l in &plan.isolated {
        let Some(c) = chain.iter().find(|c| c.name == l.obj.name) else {
            close(&handles);
            return Err(Error::Loader(format!("{} missing from its namespace", l.obj.name)));
        };
        relink::relink_copy(c, &l.info, plan)?;
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
        let t = find(h, &r.name, r.version.as_deref());
        if t != 0 {
            dispatch::set_target(index, r.id, t);
        }
    }
    CODE.lock().unwrap_or_else(|e| e.into_inner()).extend(copies.iter().flat_map(|c| c.exec.iter().copied()));
    OBJECTS.lock().unwrap_or_else(|e| e.into_inner()).extend(objects);
    // The handles stay open for the life of the process: the libset is reused.
    Ok(Libset { copies: copies.into(), bytes, handles: handles.iter().map(|&h| h as usize).collect() })
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

fn snapshot(c: &Loaded, info: &crate::elf::Info) -> Copy {
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
fn copy_object(c: &Loaded, info: &crate::elf::Info) -> Option<crate::CopyObject> {
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
pub(crate) fn resolve(routed: &[crate::relink::Routed]) {
    let p = pool();
    for (i, set) in p.sets.iter().enumerate() {
        for r in routed {
            let t = find(set.handles[r.lib] as *mut c_void, &r.name, r.version.as_deref());
            if t != 0 {
                dispatch::set_target(i + 1, r.id, t);
            }
        }
    }
}

/// The code of every copy made so far.
pub(crate) fn copy_code() -> Vec<(usize, usize)> {
    CODE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

pub(crate) fn stats() -> Stats {
    let p = pool();
    Stats { libsets: p.sets.len(), leased: p.leased, ..p.stats }
}
