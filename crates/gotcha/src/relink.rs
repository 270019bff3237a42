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
use std::sync::{Arc, Mutex};

use crate::elf::{Info, Kind};
use crate::objects::{self, Loaded};
use crate::{dispatch, heap, Error, Report, Selection};

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
}

pub(crate) static PLAN: Mutex<Option<Arc<Plan>>> = Mutex::new(None);

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
    if let Some(v) = version {
        if let Ok(v) = CString::new(v) {
            // SAFETY: valid C strings; RTLD_DEFAULT searches the global scope.
            let p = unsafe { libc::dlvsym(libc::RTLD_DEFAULT, n.as_ptr(), v.as_ptr()) };
            if !p.is_null() {
                return p as usize;
            }
        }
    }
    // SAFETY: as above.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, n.as_ptr()) as usize }
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

/// A slot of the program's to point at a stub: (slot, routed index, addend).
type Slot = (usize, usize, i64);

/// The slots of `o` (a program object, not isolated) bound to functions
/// of isolated libraries, adding the functions to `plan.routed`.
fn scan(o: &Loaded, info: &Info, plan: &mut Plan, variables: &mut Vec<(usize, String)>) -> Vec<Slot> {
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
        // SAFETY: the slot is inside the object's mapped image.
        let bound = unsafe { *(slot as *const usize) };
        let bound = match r.kind {
            Kind::Abs64 => bound.wrapping_sub(r.addend as usize),
            _ => bound,
        };
        let target = if bound == 0 || within(&extent, bound) { lookup(&s.name, s.version.as_deref()) } else { bound };
        let Some(lib) = plan.isolated.iter().position(|l| within(&l.extent, target)) else { continue };
        if !plan.isolated[lib].exec.iter().any(|e| within(e, target)) {
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
    crate::libset::resolve(&plan.routed[from..]);
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
        let why = objects::uncopyable(o, i, ours);
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
    let (mut plan, writes) = loop {
        let mut plan = Plan { isolated: isolated.clone(), routed: Vec::new(), by_target: HashMap::new(), seen: HashSet::new(), adds };
        plan.seen.extend(base.iter().map(|o| o.bias));
        let mut variables: Vec<(usize, String)> = Vec::new();
        let mut writes = Vec::new();
        for (oi, (o, info)) in others.iter().enumerate() {
            let b = o.base_name();
            // libc and the loader never call into application libraries.
            if plan.isolated.is_empty() || b.starts_with("libc.so") || b.starts_with("ld-linux") {
                continue;
            }
            let mine = scan(o, info, &mut plan, &mut variables);
            if oi == 0 {
                // The executable (always first, never isolated): variables
                // moved into it by COPY relocations.
                for c in &info.copied {
                    if let Some(li) = plan.isolated.iter().position(|l| defines(l, c)) {
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
    let slots = publish(&mut plan, 0, &writes)?;
    copy_relocated.sort();
    copy_relocated.dedup();
    let report = Report {
        libraries: plan.isolated.iter().map(|l| l.obj.name.clone()).collect(),
        functions: plan.routed.len(),
        slots,
        excluded,
        copy_relocated,
    };
    *PLAN.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(plan));
    Ok(report)
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
        let mine = scan(&o, &info, &mut plan, &mut variables);
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
/// program's own definition. Returns the slots rewritten.
pub(crate) fn relink_copy(copy: &Loaded, info: &Info, plan: &Plan) -> Result<usize, Error> {
    let mut w = Vec::new();
    for r in &info.relocs {
        let s = &info.syms[r.sym];
        if !s.undefined {
            continue;
        }
        let target = lookup(&s.name, s.version.as_deref());
        if target == 0 || plan.isolated.iter().any(|l| within(&l.extent, target)) {
            continue; // unresolved weak, or another isolated library: stays in the libset
        }
        let value = heap::wrapper(&s.name).unwrap_or(target);
        let value = if r.kind == Kind::Abs64 { value.wrapping_add(r.addend as usize) } else { value };
        w.push((copy.bias + r.offset as usize, value));
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
