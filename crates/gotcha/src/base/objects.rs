//! The loaded objects of a namespace, from the loader's public `link_map`
//! chain (`<link.h>`), and which of them a libset copies.

use std::ffi::{c_char, c_void, CStr};

/// The public head of glibc's `struct link_map` (`<link.h>`): stable ABI.
#[repr(C)]
pub(crate) struct LinkMap {
    pub l_addr: usize,
    pub l_name: *const c_char,
    pub l_ld: *mut c_void,
    pub l_next: *mut LinkMap,
    pub l_prev: *mut LinkMap,
}

/// One loaded object.
#[derive(Clone, Debug)]
pub(crate) struct Loaded {
    /// The name the loader gives it (a path, or "" for the executable).
    pub name: String,
    /// The file to read it from; None for the vDSO.
    pub path: Option<String>,
    pub bias: usize,
}

impl Loaded {
    /// Its file name without directories (`libpng16.so.16`).
    pub(crate) fn base_name(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }
}

fn from_map(m: &LinkMap, first: bool) -> Loaded {
    let name = if m.l_name.is_null() {
        String::new()
    } else {
        // SAFETY: the loader keeps l_name a NUL-terminated string while the
        // object is loaded.
        unsafe { CStr::from_ptr(m.l_name) }.to_string_lossy().into_owned()
    };
    let path = if name.is_empty() && first {
        std::fs::read_link("/proc/self/exe").ok().map(|p| p.to_string_lossy().into_owned())
    } else if name.starts_with('/') || name.contains('/') {
        Some(name.clone())
    } else {
        None // linux-vdso.so.1: no file
    };
    Loaded { name, path, bias: m.l_addr }
}

/// Every object of the namespace that `map` belongs to, in load order.
///
/// # Safety
/// `map` is a live `link_map` of the loader, and no object of its namespace
/// is unloaded while this runs.
pub(crate) unsafe fn chain(map: *mut LinkMap) -> Vec<Loaded> {
    let mut head = map;
    // SAFETY: the chain is the loader's, alive by the contract.
    unsafe {
        while !(*head).l_prev.is_null() {
            head = (*head).l_prev;
        }
        let mut out = Vec::new();
        let mut m = head;
        while !m.is_null() {
            out.push(from_map(&*m, out.is_empty()));
            m = (*m).l_next;
        }
        out
    }
}

/// The `link_map` of a handle from `dlopen`/`dlmopen`.
///
/// # Safety
/// `handle` is a live handle.
pub(crate) unsafe fn map_of(handle: *mut c_void) -> Option<*mut LinkMap> {
    let mut map: *mut LinkMap = std::ptr::null_mut();
    // SAFETY: RTLD_DI_LINKMAP stores one pointer into `map`.
    let r = unsafe { libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, &mut map as *mut *mut LinkMap as *mut c_void) };
    (r == 0 && !map.is_null()).then_some(map)
}

/// The objects of the program's own namespace.
pub(crate) fn base() -> Vec<Loaded> {
    // SAFETY: dlopen(NULL) gives the executable's handle; RTLD_NOLOAD loads nothing.
    let h = unsafe { libc::dlopen(std::ptr::null(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return Vec::new();
    }
    // SAFETY: a live handle; objects of the base namespace loaded at start
    // are never unloaded, and later ones only by dlclose, which the caller
    // does not run concurrently with start-up.
    let v = unsafe { map_of(h).map(|m| chain(m)).unwrap_or_default() };
    // SAFETY: balances the dlopen above (the executable stays loaded).
    unsafe { libc::dlclose(h) };
    v
}

/// Objects that every libset shares with the program instead of copying:
/// their state is process-wide (the heap, stdio's FILE objects and their
/// locks, the thread list and TLS destructors, `environ`, locales, signal
/// dispositions, the loader's own lists; glibc 2.34 merged libpthread,
/// libdl and librt into libc.so.6), or they are the runtime's (unwinder,
/// C++ exceptions and iostreams). `docs/safety.md` ("gotcha") gives the list
/// with the reasons.
const SHARED: &[&str] = &[
    "ld-linux", "ld64.so", "linux-vdso", "linux-gate", "libc.so", "libpthread.so", "libdl.so", "librt.so",
    "libutil.so", "libanl.so", "libresolv.so", "libnss_", "libm.so", "libmvec.so", "libgcc_s.so", "libstdc++.so",
    "libasan.so", "liblsan.so", "libtsan.so", "libubsan.so", "libvalgrind", "vgpreload_", "liblinger",
];

/// Why an object cannot be copied into a libset, if it cannot.
pub(crate) fn uncopyable(o: &Loaded, index: usize, ours: bool) -> Option<&'static str> {
    if index == 0 {
        return Some("the executable (a position-independent executable cannot be loaded twice)");
    }
    if ours {
        return Some("the object that holds linger and gotcha themselves");
    }
    if o.path.is_none() {
        return Some("no file to load a copy from (the vDSO)");
    }
    let b = o.base_name();
    if SHARED.iter().any(|s| b.starts_with(s)) {
        return Some("process-wide state (libc, the loader, the language runtimes): shared by every libset");
    }
    if preloaded(o) {
        return Some("loaded by LD_PRELOAD: it interposes for the whole process");
    }
    None
}

fn preloaded(o: &Loaded) -> bool {
    let Ok(list) = std::env::var("LD_PRELOAD") else { return false };
    list.split([' ', ':']).filter(|s| !s.is_empty()).any(|p| {
        let pb = p.rsplit('/').next().unwrap_or(p);
        o.name == p || o.base_name() == pb
    })
}

/// Does the selection entry `want` name object `o`? `libpng` names
/// `libpng16.so.16`, `libz` names `libz.so.1` but not `libzstd.so.1`; a
/// path names exactly that file.
pub(crate) fn selected_by(want: &str, o: &Loaded) -> bool {
    if want.contains('/') {
        return o.name == want;
    }
    let b = o.base_name();
    let with_lib = format!("lib{want}");
    [want, with_lib.as_str()].iter().any(|w| {
        b.strip_prefix(w).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '-']) || rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(name: &str) -> Loaded {
        Loaded { name: format!("/usr/lib/x86_64-linux-gnu/{name}"), path: Some(String::new()), bias: 0 }
    }

    #[test]
    fn selection_names_libraries_by_stem() {
        assert!(selected_by("libpng", &lib("libpng16.so.16")));
        assert!(selected_by("png16", &lib("libpng16.so.16")));
        assert!(selected_by("libz", &lib("libz.so.1")));
        assert!(!selected_by("libz", &lib("libzstd.so.1")));
        assert!(selected_by("z", &lib("libz.so.1")));
        assert!(selected_by("/usr/lib/x86_64-linux-gnu/libz.so.1", &lib("libz.so.1")));
        assert!(!selected_by("sqlite", &lib("libz.so.1")));
    }

    #[test]
    fn libc_and_the_loader_are_never_copied() {
        assert!(uncopyable(&lib("libc.so.6"), 3, false).is_some());
        assert!(uncopyable(&lib("ld-linux-x86-64.so.2"), 1, false).is_some());
        assert!(uncopyable(&lib("libpng16.so.16"), 2, false).is_none());
        assert!(uncopyable(&lib("libpng16.so.16"), 0, false).is_some());
    }

    #[test]
    fn the_base_namespace_starts_with_the_executable() {
        let v = base();
        assert!(v.len() > 2);
        assert!(v[0].path.is_some());
        assert!(v.iter().any(|o| o.base_name().starts_with("libc.so")));
    }
}
