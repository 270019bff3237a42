//! Selective relinking: rewriting GOT slots after the loader filled them.
//!
//! Two directions:
//! - the program's own objects: a slot bound to a function of an isolated
//!   library is pointed at that function's stub ([`install`]);
//! - a libset's copies: a slot the namespace bound to its own copy of a
//!   shared library (libc, ...) is pointed back at the program's definition,
//!   or at the heap's wrapper for the malloc family ([`relink_copy`]).
//!
//! Both eager (`GLOB_DAT`) and lazy (`JUMP_SLOT`) slots are rewritten, and
//! data pointers to functions (`R_X86_64_64`): a lazy slot rewritten before
//! its first call never reaches the loader's resolver. Objects loaded later
//! are not relinked (see `docs/safety.md`).

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

use crate::base::elf::{Info, Kind};
use crate::base::objects::{self, Loaded};
use crate::libsets::libc_policy;
use crate::routing::{dispatch, heap};
use crate::{Error, Report, Selection};

/// An isolated library, as loaded in the program's own namespace.
#[derive(Clone, Debug)]
pub(crate) struct Isolated {
    pub obj: Loaded,
    pub info: Arc<Info>,
    /// Absolute extent of its image.
    pub extent: (usize, usize),
    pub exec: Vec<(usize, usize)>,
}

/// A function that has a stub.
#[derive(Clone, Debug)]
pub(crate) struct Routed {
    pub id: usize,
    pub name: String,
    pub version: Option<String>,
    /// Index into the isolated libraries.
    pub lib: usize,
}

/// What relinking set up, kept for making libsets and for objects
/// loaded later.
#[derive(Clone)]
pub(crate) struct Plan {
    pub isolated: Vec<Isolated>,
    pub routed: Vec<Routed>,
    /// Definition address -> index into `routed`.
    by_target: HashMap<usize, usize>,
    /// Load biases of the program's objects already relinked.
    seen: HashSet<usize>,
    /// `dlpi_adds` when the program's objects were last scanned.
    adds: u64,
    /// Index of libc in `isolated`, when the selection named it.
    pub libc: Option<usize>,
    /// The executable holds `COPY`s of libc's `stdin`/`stdout`/`stderr`
    /// (built without `-fpic`), so the program's code uses the program's
    /// streams whatever the libset: functions that use them implicitly
    /// (`printf`, `puts`, ...) and `fflush(NULL)` then stay the program's,
    /// so that `printf` and `fflush(stdout)` reach the same stream.
    /// Otherwise the program's GOT slots for them are trapped.
    pub std_streams_shared: bool,
    /// libc's standard streams trapped in the program's objects: (fake
    /// address, name), each libset's copy learns its own (`libset.rs`).
    pub trapped: Vec<(usize, String)>,
}

/// Is `o` the C library?
pub(crate) fn is_libc(o: &Loaded) -> bool {
    o.base_name().starts_with("libc.so")
}

pub(crate) static PLAN: Mutex<Option<Arc<Plan>>> = Mutex::new(None);

/// Told of newly routed functions (the routed, the index of libc among the
/// isolated, whether the standard streams are shared) before the
/// program's slots point at their stubs: the libsets, which stand above
/// relinking, look the functions up in their copies. Set by the crate's
/// face before anything is routed.
type Resolver = fn(&[Routed], Option<usize>, bool);
static RESOLVER: OnceLock<Resolver> = OnceLock::new();

/// Sets [`RESOLVER`] (once: later calls keep the first).
pub(crate) fn set_resolver(f: Resolver) {
    let _ = RESOLVER.set(f);
}

static INFOS: Mutex<Option<HashMap<String, Arc<Info>>>> = Mutex::new(None);

/// The parsed file of `path` (cached: copies share their base's).
pub(crate) fn info(path: &str) -> Result<Arc<Info>, Error> {
    let mut g = INFOS.lock().unwrap_or_else(|e| e.into_inner());
    let m = g.get_or_insert_with(HashMap::new);
    if let Some(i) = m.get(path) {
        return Ok(i.clone());
    }
    let i = Arc::new(Info::read(path).map_err(Error::Loader)?);
    m.insert(path.to_owned(), i.clone());
    Ok(i)
}

/// The program's definition of `name` (as its own objects bind it: the
/// executable or an `LD_PRELOAD` first, then libraries in load order).
pub(crate) fn lookup(name: &str, version: Option<&str>) -> usize {
    let Ok(n) = CString::new(name) else { return 0 };
    // SAFETY: valid C strings; RTLD_DEFAULT searches the global scope.
    let first = unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) } as usize;
    if let Some(v) = version {
        if let Ok(v) = CString::new(v) {
            // SAFETY: as above.
            let p = unsafe { libc::dlvsym(libc::RTLD_DEFAULT, n.as_ptr(), v.as_ptr()) } as usize;
            // The loader binds a versioned reference to an unversioned
            // definition earlier in the scope (an interposer such as
            // linger's `read`, an LD_PRELOAD), but dlvsym skips those: keep
            // the first definition when it lies in another object.
            if p != 0 && (first == 0 || object_of(first) == object_of(p)) {
                return p;
            }
        }
    }
    first
}

/// The load address of the object holding `addr` (0 if none).
fn object_of(addr: usize) -> usize {
    // SAFETY: Dl_info is plain data (pointers and no invariants): all
    // zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's lists and fills `info`.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

fn abs(o: &Loaded, r: (u64, u64)) -> (usize, usize) {
    (o.bias + r.0 as usize, o.bias + r.1 as usize)
}

fn within(r: &(usize, usize), a: usize) -> bool {
    r.0 <= a && a < r.1
}

/// How many objects the loader has loaded so far (`dlpi_adds`): cheap
/// enough to check at every isolated launch.
fn loader_adds() -> u64 {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _: libc::size_t, out: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the loader's info for the call, and our u64.
        unsafe { *(out as *mut u64) = (*info).dlpi_adds };
        1
    }
    let mut adds = 0u64;
    // SAFETY: the callback only writes `adds`.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut adds as *mut u64 as *mut libc::c_void) };
    adds
}

/// What the loader stored in the slot of `r` at `slot` (inside a mapped
/// object), without the addend of a pointer in data.
fn bound(slot: usize, r: &crate::base::elf::Reloc) -> usize {
    // SAFETY: the caller's slot lies inside an object's mapped image.
    let v = unsafe { *(slot as *const usize) };
    match r.kind {
        Kind::Abs64 => v.wrapping_sub(r.addend as usize),
        _ => v,
    }
}

/// A slot of the program's to point at a stub: (slot, routed index, addend).
type Slot = (usize, usize, i64);

/// The slots of `o` (a program object, not isolated) bound to functions
/// of isolated libraries, adding the functions to `plan.routed`.
fn scan(
    o: &Loaded,
    info: &Info,
    plan: &mut Plan,
    variables: &mut Vec<(usize, String)>,
    libc_variables: &mut Vec<String>,
) -> Vec<Slot> {
    let extent = abs(o, info.extent());
    let mut mine = Vec::new();
    for r in &info.relocs {
        let s = &info.syms[r.sym];
        if !s.undefined {
            continue;
        }
        let slot = o.bias + r.offset as usize;
        // What the loader bound (a lazy slot still points into the
        // object's own PLT: look the name up instead).
        let bound = bound(slot, r);
        let target = if bound == 0 || within(&extent, bound) { lookup(&s.name, s.version.as_deref()) } else { bound };
        let Some(lib) = plan.isolated.iter().position(|l| within(&l.extent, target)) else { continue };
        let function = plan.isolated[lib].exec.iter().any(|e| within(e, target));
        if plan.libc == Some(lib) {
            // What libc keeps process-wide stays the program's; its
            // variables do too (the program reads its own).
            if !function {
                libc_variables.push(s.name.clone());
            }
            if !function || libc_policy::shared(&s.name) || (plan.std_streams_shared && libc_policy::implicit_stream(&s.name)) {
                continue;
            }
        }
        if !function {
            variables.push((lib, s.name.clone()));
            continue;
        }
        let ri = *plan.by_target.entry(target).or_insert_with(|| {
            plan.routed.push(Routed { id: usize::MAX, name: s.name.clone(), version: s.version.clone(), lib });
            plan.routed.len() - 1
        });
        mine.push((slot, ri, if r.kind == Kind::Abs64 { r.addend } else { 0 }));
    }
    mine
}

/// Does isolated library `l` define `name` itself?
fn defines(l: &Isolated, name: &str) -> bool {
    let (Ok(path), Ok(n)) = (CString::new(l.obj.name.as_str()), CString::new(name)) else { return false };
    // SAFETY: RTLD_NOLOAD only looks the loaded library up; the handle is
    // closed again (the library stays loaded: the program linked it).
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if h.is_null() {
            return false;
        }
        let p = libc::dlsym(h, n.as_ptr()) as usize;
        libc::dlclose(h);
        within(&l.extent, p)
    }
}

/// Gives stubs to the routed functions from `from` on, and points the
/// slots at them.
fn publish(plan: &mut Plan, from: usize, writes: &[(Loaded, Arc<Info>, Vec<Slot>)]) -> Result<usize, Error> {
    let targets: Vec<usize> = {
        let mut t = vec![0usize; plan.routed.len() - from];
        for (&target, &ri) in &plan.by_target {
            if ri >= from {
                t[ri - from] = target;
            }
        }
        t
    };
    let ids = dispatch::add(&targets)?;
    for (r, id) in plan.routed[from..].iter_mut().zip(ids) {
        r.id = id;
    }
    // Existing libsets learn where the new functions are in their copies.
    if let Some(resolve) = RESOLVER.get() {
        resolve(&plan.routed[from..], plan.libc, plan.std_streams_shared);
    }
    let mut slots = 0;
    for (o, info, mine) in writes {
        let w: Vec<(usize, usize)> =
            mine.iter().map(|&(slot, ri, add)| (slot, dispatch::stub_address(plan.routed[ri].id).wrapping_add(add as usize))).collect();
        slots += write_slots(o, info, &w)?;
    }
    Ok(slots)
}

/// Sets up isolation of `sel` in the program's namespace.
pub(crate) fn install(sel: &Selection) -> Result<Report, Error> {
    heap::init(|n| lookup(n, None));
    let adds = loader_adds();
    let base = objects::base();
    let me = install as *const () as usize;
    let mut isolated = Vec::new();
    let mut others = Vec::new();
    let mut wanted: Vec<(String, bool)> = match sel {
        Selection::All => Vec::new(),
        Selection::Libraries(v) => v.iter().map(|l| (l.clone(), false)).collect(),
    };
    for (i, o) in base.iter().enumerate() {
        let Some(path) = &o.path else {
            continue;
        };
        let info = info(path)?;
        let extent = abs(o, info.extent());
        let ours = within(&extent, me);
        let named = wanted.iter_mut().filter(|(w, _)| objects::selected_by(w, o)).fold(false, |_, w| {
            w.1 = true;
            true
        });
        // libc is copied only when named: see `libc_policy`.
        let why = if named && is_libc(o) { None } else { objects::uncopyable(o, i, ours) };
        let exec = info.segments.iter().filter(|s| s.executable).map(|s| abs(o, (s.vaddr, s.vaddr + s.memsz))).collect();
        match (named, why, sel) {
            (true, Some(reason), _) => {
                return Err(Error::Uncopyable { library: o.name.clone(), reason: reason.to_owned() });
            }
            (true, None, _) | (false, None, Selection::All) => isolated.push(Isolated { obj: o.clone(), info, extent, exec }),
            _ => others.push((o.clone(), info)),
        }
    }
    if let Some((w, _)) = wanted.iter().find(|(_, found)| !found) {
        return Err(Error::NotLoaded(w.clone()));
    }
    // A library whose variables the program uses directly cannot follow
    // the function into a libset: the program would read its own copy's
    // variables while the libset's code uses the libset's (the assembler's
    // `bfd_abs_section` found this). `all` leaves such libraries shared;
    // naming one is refused.
    let mut excluded = Vec::new();
    let mut copy_relocated = Vec::new();
    let mut libc_variables = Vec::new();
    // A standard stream moved into the executable by a COPY relocation
    // cannot be trapped: the program's code then reads its own, and the
    // functions that use it implicitly stay the program's too.
    let std_streams_shared = others.iter().any(|(_, info)| info.copied.iter().any(|c| libc_policy::std_stream(c)));
    let (mut plan, writes) = loop {
        let libc = isolated.iter().position(|l| is_libc(&l.obj));
        let mut plan = Plan {
            isolated: isolated.clone(),
            routed: Vec::new(),
            by_target: HashMap::new(),
            seen: HashSet::new(),
            adds,
            libc,
            std_streams_shared,
            trapped: Vec::new(),
        };
        plan.seen.extend(base.iter().map(|o| o.bias));
        let mut variables: Vec<(usize, String)> = Vec::new();
        libc_variables.clear();
        let mut writes = Vec::new();
        for (oi, (o, info)) in others.iter().enumerate() {
            let b = o.base_name();
            // libc and the loader never call into application libraries.
            if plan.isolated.is_empty() || b.starts_with("libc.so") || b.starts_with("ld-linux") {
                continue;
            }
            let mine = scan(o, info, &mut plan, &mut variables, &mut libc_variables);
            if oi == 0 {
                // The executable (always first, never isolated): variables
                // moved into it by COPY relocations.
                for c in &info.copied {
                    if let Some(li) = plan.isolated.iter().position(|l| defines(l, c)) {
                        if plan.libc == Some(li) {
                            libc_variables.push(c.clone());
                            copy_relocated.push(c.clone());
                            continue;
                        }
                        variables.push((li, c.clone()));
                        copy_relocated.push(c.clone());
                    }
                }
            }
            if !mine.is_empty() {
                writes.push((o.clone(), info.clone(), mine));
            }
        }
        if variables.is_empty() {
            break (plan, writes);
        }
        let mut offenders: Vec<usize> = variables.iter().map(|v| v.0).collect();
        offenders.sort_unstable();
        offenders.dedup();
        for &li in offenders.iter().rev() {
            let mut names: Vec<&str> = variables.iter().filter(|v| v.0 == li).map(|v| v.1.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            let lib = isolated.remove(li);
            let reason = format!("the program uses its variables directly ({}), which would stay the program's copy", names.join(", "));
            if matches!(sel, Selection::Libraries(_)) {
                return Err(Error::Uncopyable { library: lib.obj.name.clone(), reason });
            }
            excluded.push((lib.obj.name.clone(), reason));
            others.push((lib.obj, lib.info));
        }
    };
    let slots = publish(&mut plan, 0, &writes)? + trap_std_streams(&mut plan, &others)?;
    copy_relocated.sort();
    copy_relocated.dedup();
    libc_variables.sort();
    libc_variables.dedup();
    let report = Report {
        libraries: plan.isolated.iter().map(|l| l.obj.name.clone()).collect(),
        functions: plan.routed.len(),
        slots,
        excluded,
        copy_relocated,
        libc_variables,
    };
    *PLAN.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(plan));
    Ok(report)
}

/// With libc isolated and no standard stream moved into the executable
/// by a `COPY` relocation: points the program's GOT slots (and pointers)
/// for `stdin`, `stdout` and `stderr` at trapped fake addresses, so that
/// the program's own `stdout` is its libset's copy's inside an isolated
/// function and its own outside (the paper's Listing 4, assertion 1).
/// Each access costs a fault (`trap.rs`). Returns the slots rewritten.
fn trap_std_streams(plan: &mut Plan, others: &[(Loaded, Arc<Info>)]) -> Result<usize, Error> {
    let Some(li) = plan.libc else { return Ok(0) };
    if plan.std_streams_shared {
        return Ok(0);
    }
    let libc = plan.isolated[li].clone();
    let mut fakes: HashMap<usize, usize> = HashMap::new();
    let mut slots = 0;
    for (o, info) in others {
        if o.base_name().starts_with("ld-linux") {
            continue;
        }
        let mut w = Vec::new();
        for r in &info.relocs {
            let s = &info.syms[r.sym];
            if !s.undefined || r.kind == Kind::JumpSlot || !libc_policy::std_stream(&s.name) {
                continue;
            }
            let slot = o.bias + r.offset as usize;
            let target = bound(slot, r);
            if !within(&libc.extent, target) {
                continue;
            }
            let fake = match fakes.get(&target) {
                Some(&f) => f,
                None => {
                    let size = libc.info.exports.iter().find(|e| e.name == s.name).map_or(8, |e| e.size as usize);
                    let f = crate::routing::trap::add(size.max(1), &[target])?;
                    plan.trapped.push((f, s.name.clone()));
                    fakes.insert(target, f);
                    f
                }
            };
            w.push((slot, if r.kind == Kind::Abs64 { fake.wrapping_add(r.addend as usize) } else { fake }));
        }
        slots += write_slots(o, info, &w)?;
    }
    Ok(slots)
}

/// Relinks the program's objects loaded since the last look (`dlopen`):
/// their calls into isolated libraries go through the stubs too. Libraries
/// loaded later are never isolated themselves. Returns the slots rewritten.
pub(crate) fn refresh() -> Result<usize, Error> {
    let mut g = PLAN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(current) = g.as_ref() else { return Ok(0) };
    let adds = loader_adds();
    if adds == current.adds || current.isolated.is_empty() {
        return Ok(0);
    }
    let mut plan = Plan::clone(current);
    plan.adds = adds;
    let from = plan.routed.len();
    let mut writes = Vec::new();
    let mut variables = Vec::new();
    for o in objects::base() {
        if !plan.seen.insert(o.bias) {
            continue;
        }
        let Some(path) = &o.path else { continue };
        let info = info(path)?;
        // (A library loaded later that uses an isolated library's
        // variables reads the program's copy of them: documented.)
        let mine = scan(&o, &info, &mut plan, &mut variables, &mut Vec::new());
        if !mine.is_empty() {
            writes.push((o, info, mine));
        }
    }
    let slots = publish(&mut plan, from, &writes)?;
    *g = Some(Arc::new(plan));
    Ok(slots)
}

/// Relinks one copy (an isolated library loaded into a libset's namespace)
/// so that everything it calls outside the isolated libraries is the
/// program's own definition. With libc isolated, its calls into libc stay
/// in the libset's copy except what [`libc_policy`] keeps the program's;
/// stream functions go through the libset's thunks (`streams`), and
/// functions `mirror` names an address for (libc functions that run in
/// both libcs) to that address. Returns the slots rewritten.
pub(crate) fn relink_copy(
    copy: &Loaded,
    info: &Info,
    plan: &Plan,
    streams: &HashMap<String, usize>,
    mirror: fn(&str) -> Option<usize>,
) -> Result<usize, Error> {
    let libc = plan.libc.map(|i| plan.isolated[i].extent);
    let mut w = Vec::new();
    for r in &info.relocs {
        let s = &info.syms[r.sym];
        if !s.undefined {
            continue;
        }
        let target = lookup(&s.name, s.version.as_deref());
        if target == 0 {
            continue; // an unresolved weak reference
        }
        let value = if libc.is_some_and(|e| within(&e, target)) {
            if let Some(&t) = streams.get(&s.name) {
                t
            } else if let Some(m) = mirror(&s.name) {
                m
            } else if libc_policy::shared(&s.name) || libc_policy::shared_variable(&s.name) {
                heap::wrapper(&s.name).unwrap_or(target)
            } else {
                continue; // the libset's copy of libc
            }
        } else if plan.isolated.iter().any(|l| within(&l.extent, target)) {
            continue; // another isolated library: stays in the libset
        } else {
            heap::wrapper(&s.name).unwrap_or(target)
        };
        let value = if r.kind == Kind::Abs64 { value.wrapping_add(r.addend as usize) } else { value };
        w.push((copy.bias + r.offset as usize, value));
    }
    write_slots(copy, info, &w)
}

/// Relinks a libset's copy of libc itself: its own calls to the malloc
/// family (made through its GOT, so that a program may replace malloc) go
/// to the heap's wrappers; its references to the variables that stay the
/// program's (`environ`, ...) point at the program's; and its `errno` is
/// the program's (the thread-pointer offset of its initial-exec `errno`
/// is the program's libc's), so a call into either libc sets the errno
/// the program reads.
pub(crate) fn relink_libc_copy(copy: &Loaded, info: &Info, program_libc: &Loaded) -> Result<usize, Error> {
    let mut w = Vec::new();
    for r in &info.relocs {
        let s = &info.syms[r.sym];
        let value = if let Some(h) = heap::wrapper(&s.name) {
            h
        } else if !s.undefined && libc_policy::shared_variable(&s.name) {
            let v = lookup(&s.name, s.version.as_deref());
            if v == 0 {
                continue;
            }
            v
        } else {
            continue;
        };
        let value = if r.kind == Kind::Abs64 { value.wrapping_add(r.addend as usize) } else { value };
        w.push((copy.bias + r.offset as usize, value));
    }
    let errno = info.exports.iter().find(|e| e.name == "errno" && e.kind == crate::base::elf::ExportKind::Tls).map(|e| e.value);
    let Some(errno) = errno else {
        return Err(Error::Unsupported("this libc has no initial-exec errno to share".into()));
    };
    let mut aliased = 0;
    for (off, addend, name) in &info.tpoff {
        let is_errno = match name {
            Some(n) => n == "errno" || n == "__libc_errno",
            None => *addend as u64 == errno,
        };
        if is_errno {
            // SAFETY: the same GOT slot in the program's libc, mapped and
            // filled by the loader (a thread-pointer offset).
            let program = unsafe { *((program_libc.bias + *off as usize) as *const usize) };
            w.push((copy.bias + *off as usize, program));
            aliased += 1;
        }
    }
    if aliased == 0 {
        return Err(Error::Unsupported("this libc's errno is not reached through a TPOFF slot".into()));
    }
    write_slots(copy, info, &w)
}

/// Stores `(slot, value)` pairs into `o`'s image, opening its RELRO pages
/// for the writes. Returns how many were written.
fn write_slots(o: &Loaded, info: &Info, w: &[(usize, usize)]) -> Result<usize, Error> {
    if w.is_empty() {
        return Ok(0);
    }
    let page = 4096usize;
    let relro = info.relro.map(|(a, n)| {
        let (a, b) = abs(o, (a, a + n));
        (a & !(page - 1), b & !(page - 1)) // as the loader protects it
    });
    let writable: Vec<(usize, usize)> =
        info.segments.iter().filter(|s| s.writable).map(|s| abs(o, (s.vaddr, s.vaddr + s.memsz))).collect();
    for &(slot, _) in w {
        if slot % 8 != 0 || !writable.iter().any(|r| within(r, slot)) {
            return Err(Error::Unsupported(format!("{}: GOT slot {slot:#x} is not in a writable segment", o.name)));
        }
    }
    let open = relro.filter(|r| w.iter().any(|&(s, _)| within(r, s)));
    if let Some((a, b)) = open {
        // SAFETY: pages of the object's own RELRO segment; only GOT slots
        // are written while they are open, then they are closed again.
        if unsafe { libc::mprotect(a as *mut _, b - a, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
            return Err(Error::Os("mprotect of a GOT", std::io::Error::last_os_error()));
        }
    }
    for &(slot, value) in w {
        // SAFETY: an aligned word inside the object's writable image (checked
        // above); other threads may be reading it, so the store is atomic.
        unsafe { (*(slot as *const std::sync::atomic::AtomicUsize)).store(value, std::sync::atomic::Ordering::Release) };
    }
    if let Some((a, b)) = open {
        // SAFETY: as above: back to what the loader left.
        if unsafe { libc::mprotect(a as *mut _, b - a, libc::PROT_READ) } != 0 {
            return Err(Error::Os("mprotect of a GOT", std::io::Error::last_os_error()));
        }
    }
    Ok(w.len())
}
