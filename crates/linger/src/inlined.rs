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

/// The ranges (biased by `bias`) of inlined instances of functions whose
/// demangled name `defer` judges deferred. Nested instances inside a
/// deferred one are covered by its ranges and not listed.
pub(crate) fn deferred_ranges(file: &object::File<'_>, bias: usize, defer: &mut dyn FnMut(&str) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    if file.section_by_name(".debug_info").is_none() {
        return out;
    }
    let load = |id: gimli::SectionId| -> Result<R<'_>, gimli::Error> {
        let data = file.section_by_name(id.name()).and_then(|s| s.data().ok()).unwrap_or(&[]);
        Ok(EndianSlice::new(data, LittleEndian))
    };
    let Ok(dwarf) = gimli::Dwarf::load(load) else { return out };
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else { continue };
        unit_ranges(&dwarf, &unit, bias, defer, &mut out);
    }
    out
}

fn unit_ranges(
    dwarf: &gimli::Dwarf<R<'_>>,
    unit: &gimli::Unit<R<'_>>,
    bias: usize,
    defer: &mut dyn FnMut(&str) -> bool,
    out: &mut Vec<(usize, usize)>,
) {
    // The verdict of each abstract function, by its offset in the unit.
    let mut verdicts: HashMap<UnitOffset, bool> = HashMap::new();
    let mut entries = unit.entries();
    let mut depth = 0isize;
    // Depth of the deferred inlined instance we are inside of, if any.
    let mut inside: Option<isize> = None;
    while let Ok(Some((delta, e))) = entries.next_dfs() {
        depth += delta;
        if inside.is_some_and(|d| depth <= d) {
            inside = None;
        }
        if inside.is_some() || e.tag() != gimli::DW_TAG_inlined_subroutine {
            continue;
        }
        // Rust refers to the abstract function within the unit; an
        // instance whose origin lies in another unit (cross-unit LTO) is
        // judged by nothing here, and left to the name rules.
        let Ok(Some(AttributeValue::UnitRef(origin))) = e.attr_value(gimli::DW_AT_abstract_origin) else { continue };
        let deferred = *verdicts.entry(origin).or_insert_with(|| match linkage_name(dwarf, unit, origin) {
            Some(raw) => match rustc_demangle::try_demangle(&raw) {
                Ok(d) => defer(&format!("{d:#}")),
                Err(_) => defer(&raw),
            },
            None => false,
        });
        if !deferred {
            continue;
        }
        inside = Some(depth);
        let Ok(mut ranges) = dwarf.die_ranges(unit, e) else { continue };
        while let Ok(Some(r)) = ranges.next() {
            if r.begin < r.end {
                out.push((bias + r.begin as usize, bias + r.end as usize));
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
