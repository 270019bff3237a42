//! Deferred functions the compiler inlined into others.
//!
//! The table defers the executable's functions by name (`ranges.rs`). A
//! function inlined into a caller has no symbol and no frame of its own:
//! its code sits inside the caller's symbol, which a name rule does not
//! defer. Across crates Rust inlines generic code, `#[inline]` functions and
//! small leaves, and deferred state is reached that way: tokio's
//! `coop::poll_proceed`, which pushes on a per-thread `RefCell` list, is
//! inlined into `Sleep::poll` (`tools/inline_audit.py` counted 242 such
//! instances in turquoise's test binary). The DWARF inline records
//! (`DW_TAG_inlined_subroutine`, kept by full debug info and by
//! `line-tables-only`) say where each inlined instance's code lies and what
//! it is an instance of; this module returns the address ranges of the
//! instances of deferred functions. A binary without debug info has none to
//! give, and keeps the name rules only (`docs/safety.md`).
//!
//! Read with gimli from the executable's file, once per table build of the
//! executable's rules (milliseconds to tens of them for a large binary).

use std::collections::HashMap;

use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset};
use object::{Object, ObjectSection};

type R<'a> = EndianSlice<'a, LittleEndian>;

/// How [`deferred_ranges`]'s caller judges a function, by its demangled name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Not deferred.
    Free,
    /// Deferred, and one of std's waits that hold nothing (`ranges::STD_WAITS`).
    Wait,
    /// Deferred, anything else.
    Deferred,
}

/// The ranges (biased by `bias`) of inlined instances of the functions that
/// `class` judges deferred (a `Wait` or `Deferred`), and, apart, of those it
/// judges `Deferred`. In the first list nested instances inside a deferred
/// one are covered by its ranges and not listed; in the second, instances
/// nested in a `Wait` are (a wait's code with something else inlined into
/// it). One pass over the debug information for both.
pub(crate) fn deferred_ranges(
    file: &object::File<'_>,
    bias: usize,
    class: &mut dyn FnMut(&str) -> Class,
) -> (Vec<(usize, usize)>, Vec<(usize, usize)>) {
    let mut out = (Vec::new(), Vec::new());
    if file.section_by_name(".debug_info").is_none() {
        return out;
    }
    let load = |id: gimli::SectionId| -> Result<R<'_>, gimli::Error> {
        let data = file.section_by_name(id.name()).and_then(|s| s.data().ok()).unwrap_or(&[]);
        Ok(EndianSlice::new(data, LittleEndian))
    };
    let Ok(dwarf) = gimli::Dwarf::load(load) else { return out };
    let mut headers = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        headers.push(header);
    }
    let mut origins = Origins { dwarf: &dwarf, headers: &headers, verdicts: HashMap::new(), units: HashMap::new(), class };
    for header in &headers {
        let Ok(unit) = dwarf.unit(*header) else { continue };
        unit_ranges(&dwarf, &unit, bias, &mut origins, &mut out);
    }
    out
}

/// The verdicts of the abstract functions that inlined instances refer
/// to, by their offset in `.debug_info`. An instance's origin is usually in
/// its own unit, but not always: with several codegen units, ThinLTO
/// inlines a function across them and the instance then names its origin in
/// the unit it came from (`DW_FORM_ref_addr`). tokio's
/// `broadcast::Sender::close_channel`, taking the channel's lock, was so
/// inlined into a test's task and stopped in with the lock held: the
/// worker that polled the next task then waited on that lock for good.
struct Origins<'d, 'a, 'f> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    headers: &'d [gimli::UnitHeader<R<'a>>],
    verdicts: HashMap<usize, Class>,
    /// Units other than the one being read, parsed once when an origin
    /// lies in them.
    units: HashMap<usize, gimli::Unit<R<'a>>>,
    class: &'f mut dyn FnMut(&str) -> Class,
}

impl<'a> Origins<'_, 'a, '_> {
    /// How the function at `origin` (an offset in `.debug_info`) is judged;
    /// `here` is the unit being read, if the origin lies in it.
    fn class(&mut self, origin: gimli::DebugInfoOffset, here: &gimli::Unit<R<'a>>) -> Class {
        if let Some(&v) = self.verdicts.get(&origin.0) {
            return v;
        }
        let v = self.judge(origin, here);
        self.verdicts.insert(origin.0, v);
        v
    }

    fn judge(&mut self, origin: gimli::DebugInfoOffset, here: &gimli::Unit<R<'a>>) -> Class {
        let raw = if let Some(at) = origin.to_unit_offset(&here.header) {
            linkage_name(self.dwarf, here, at)
        } else {
            // The unit that holds `origin`: the last one starting at or before it.
            let start = |h: &gimli::UnitHeader<R<'a>>| match h.offset() {
                gimli::UnitSectionOffset::DebugInfoOffset(o) => o.0,
                gimli::UnitSectionOffset::DebugTypesOffset(_) => usize::MAX,
            };
            let i = self.headers.partition_point(|h| start(h) <= origin.0);
            let Some(header) = i.checked_sub(1).map(|i| self.headers[i]) else { return Class::Free };
            let Some(at) = origin.to_unit_offset(&header) else { return Class::Free };
            let unit = match self.units.entry(start(&header)) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => match self.dwarf.unit(header) {
                    Ok(u) => e.insert(u),
                    Err(_) => return Class::Free,
                },
            };
            linkage_name(self.dwarf, unit, at)
        };
        match raw {
            Some(raw) => match rustc_demangle::try_demangle(&raw) {
                Ok(d) => (self.class)(&format!("{d:#}")),
                Err(_) => (self.class)(&raw),
            },
            None => Class::Free,
        }
    }
}

fn unit_ranges<'a>(
    dwarf: &gimli::Dwarf<R<'a>>,
    unit: &gimli::Unit<R<'a>>,
    bias: usize,
    origins: &mut Origins<'_, 'a, '_>,
    out: &mut (Vec<(usize, usize)>, Vec<(usize, usize)>),
) {
    let mut entries = unit.entries();
    let mut depth = 0isize;
    // Depth of the deferred inlined instance we are inside of, if any (for
    // the first list), and of the `Deferred` one (for the second).
    let mut inside: Option<isize> = None;
    let mut inside_other: Option<isize> = None;
    while let Ok(Some((delta, e))) = entries.next_dfs() {
        depth += delta;
        if inside.is_some_and(|d| depth <= d) {
            inside = None;
        }
        if inside_other.is_some_and(|d| depth <= d) {
            inside_other = None;
        }
        if inside_other.is_some() || e.tag() != gimli::DW_TAG_inlined_subroutine {
            continue;
        }
        let origin = match e.attr_value(gimli::DW_AT_abstract_origin) {
            Ok(Some(AttributeValue::UnitRef(o))) => o.to_debug_info_offset(&unit.header),
            Ok(Some(AttributeValue::DebugInfoRef(o))) => Some(o),
            _ => None,
        };
        let Some(origin) = origin else { continue };
        let class = origins.class(origin, unit);
        let first = inside.is_none() && class != Class::Free;
        let second = class == Class::Deferred;
        if first {
            inside = Some(depth);
        }
        if second {
            inside_other = Some(depth);
        }
        if !first && !second {
            continue;
        }
        let Ok(mut ranges) = dwarf.die_ranges(unit, e) else { continue };
        while let Ok(Some(r)) = ranges.next() {
            if r.begin < r.end {
                let r = (bias + r.begin as usize, bias + r.end as usize);
                if first {
                    out.0.push(r);
                }
                if second {
                    out.1.push(r);
                }
            }
        }
    }
}

/// The linkage (mangled) name of the function at `at`, following
/// `DW_AT_specification` and `DW_AT_abstract_origin` within the unit.
fn linkage_name(dwarf: &gimli::Dwarf<R<'_>>, unit: &gimli::Unit<R<'_>>, mut at: UnitOffset) -> Option<String> {
    for _ in 0..4 {
        let e = unit.entry(at).ok()?;
        for name in [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name] {
            if let Ok(Some(v)) = e.attr_value(name) {
                let s = dwarf.attr_string(unit, v).ok()?;
                return Some(String::from_utf8_lossy(s.slice()).into_owned());
            }
        }
        at = [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin].into_iter().find_map(|a| match e.attr_value(a) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        })?;
    }
    None
}
