//! What selective relinking needs to know about one object file: its
//! dynamic relocations that name a symbol (the GOT slots and pointers the
//! loader filled in), and which of its segments are writable.
//!
//! Read from the file on disk with the `object` crate rather than from the
//! mapped image: the in-memory dynamic section has no section headers, and
//! symbol versions (needed to look a libc symbol up the way the loader did)
//! are easiest to get from the sections.

use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, Rela, SectionHeader, Sym as _};
use object::Endianness;

/// How the loader filled a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `R_X86_64_GLOB_DAT`: a GOT slot, bound at load time.
    GlobDat,
    /// `R_X86_64_JUMP_SLOT`: a PLT's GOT slot, maybe bound lazily.
    JumpSlot,
    /// `R_X86_64_64`: a pointer in data (function tables), symbol + addend.
    Abs64,
}

/// One dynamic relocation against a named symbol.
#[derive(Clone, Debug)]
pub(crate) struct Reloc {
    /// The slot, as an address relative to the object's load bias.
    pub offset: u64,
    pub kind: Kind,
    pub addend: i64,
    /// Index into [`Info::syms`].
    pub sym: usize,
}

/// A dynamic symbol named by a relocation.
#[derive(Clone, Debug)]
pub(crate) struct Sym {
    pub name: String,
    /// The version the object asked for (`GLIBC_2.2.5`), if any.
    pub version: Option<String>,
    /// Defined outside this object.
    pub undefined: bool,
}

/// A loadable segment, relative to the load bias.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub vaddr: u64,
    pub memsz: u64,
    pub writable: bool,
    pub executable: bool,
}

/// The parts of an object file that relinking and snapshots use.
#[derive(Debug, Default)]
pub(crate) struct Info {
    pub relocs: Vec<Reloc>,
    pub syms: Vec<Sym>,
    pub segments: Vec<Segment>,
    /// `PT_GNU_RELRO`: made read-only by the loader after relocation.
    pub relro: Option<(u64, u64)>,
    /// Symbols the executable took by `R_X86_64_COPY`: their storage moved
    /// into the executable, so no libset can have its own.
    pub copied: Vec<String>,
    /// Symbols the object defines (functions, variables, TLS).
    pub exports: Vec<Export>,
    /// `R_X86_64_TPOFF64` slots: (offset, addend, symbol name if any): the
    /// thread-pointer offsets of initial-exec TLS (libc's `errno`).
    pub tpoff: Vec<(u64, i64, Option<String>)>,
}

/// A symbol the object defines.
#[derive(Clone, Debug)]
pub(crate) struct Export {
    pub name: String,
    /// Relative to the bias; for TLS, the offset in the object's TLS block.
    pub value: u64,
    pub size: u64,
    pub kind: ExportKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExportKind {
    Function,
    Variable,
    Tls,
}

impl Info {
    /// Parses the file at `path`.
    pub(crate) fn read(path: &str) -> Result<Info, String> {
        let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        Info::parse(&data).map_err(|e| format!("{path}: {e}"))
    }

    pub(crate) fn parse(data: &[u8]) -> Result<Info, object::Error> {
        let header = FileHeader64::<Endianness>::parse(data)?;
        let endian = header.endian()?;
        let mut info = Info::default();
        for ph in header.program_headers(endian, data)? {
            match ph.p_type(endian) {
                elf::PT_LOAD => {
                    let flags = ph.p_flags(endian);
                    info.segments.push(Segment {
                        vaddr: ph.p_vaddr(endian),
                        memsz: ph.p_memsz(endian),
                        writable: flags & elf::PF_W != 0,
                        executable: flags & elf::PF_X != 0,
                    });
                }
                elf::PT_GNU_RELRO => info.relro = Some((ph.p_vaddr(endian), ph.p_memsz(endian))),
                _ => {}
            }
        }
        let sections = header.sections(endian, data)?;
        let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM)?;
        if dynsym.is_empty() {
            return Ok(info);
        }
        for s in dynsym.iter() {
            if s.is_undefined(endian) {
                continue;
            }
            let kind = match s.st_type() {
                elf::STT_FUNC | elf::STT_GNU_IFUNC => ExportKind::Function,
                elf::STT_OBJECT => ExportKind::Variable,
                elf::STT_TLS => ExportKind::Tls,
                _ => continue,
            };
            let name = String::from_utf8_lossy(dynsym.symbol_name(endian, s)?).into_owned();
            info.exports.push(Export { name, value: s.st_value(endian), size: s.st_size(endian), kind });
        }
        let versions = sections.versions(endian, data)?;
        let mut index_of: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
        for section in sections.iter() {
            let Some((relas, link)) = section.rela(endian, data)? else { continue };
            if link != dynsym.section() {
                continue;
            }
            for r in relas {
                let kind = match r.r_type(endian, false) {
                    elf::R_X86_64_GLOB_DAT => Kind::GlobDat,
                    elf::R_X86_64_JUMP_SLOT => Kind::JumpSlot,
                    elf::R_X86_64_64 => Kind::Abs64,
                    elf::R_X86_64_TPOFF64 => {
                        let i = r.r_sym(endian, false) as usize;
                        let name = if i == 0 {
                            None
                        } else {
                            dynsym
                                .symbol(object::SymbolIndex(i))
                                .and_then(|s| dynsym.symbol_name(endian, s))
                                .ok()
                                .map(|n| String::from_utf8_lossy(n).into_owned())
                        };
                        info.tpoff.push((r.r_offset(endian), r.r_addend(endian), name));
                        continue;
                    }
                    elf::R_X86_64_COPY => {
                        let i = object::SymbolIndex(r.r_sym(endian, false) as usize);
                        if let Ok(s) = dynsym.symbol(i) {
                            if let Ok(n) = dynsym.symbol_name(endian, s) {
                                info.copied.push(String::from_utf8_lossy(n).into_owned());
                            }
                        }
                        continue;
                    }
                    _ => continue,
                };
                let index = r.r_sym(endian, false) as usize;
                if index == 0 {
                    continue;
                }
                let sym = match index_of.get(&index) {
                    Some(&s) => s,
                    None => {
                        let s = dynsym.symbol(object::SymbolIndex(index))?;
                        let name = String::from_utf8_lossy(dynsym.symbol_name(endian, s)?).into_owned();
                        let version = match &versions {
                            Some(v) => v
                                .version(v.version_index(endian, object::SymbolIndex(index)))?
                                .map(|v| String::from_utf8_lossy(v.name()).into_owned()),
                            None => None,
                        };
                        info.syms.push(Sym { name, version, undefined: s.is_undefined(endian) });
                        index_of.insert(index, info.syms.len() - 1);
                        info.syms.len() - 1
                    }
                };
                info.relocs.push(Reloc { offset: r.r_offset(endian), kind, addend: r.r_addend(endian), sym });
            }
        }
        Ok(info)
    }

    /// The writable ranges the loader leaves writable (not RELRO), relative
    /// to the bias: what a libset's reset must restore.
    pub(crate) fn mutable_ranges(&self, page: u64) -> Vec<(u64, u64)> {
        // The loader protects [page_down(start), page_down(end)) of RELRO.
        let relro = self.relro.map(|(a, n)| (a & !(page - 1), (a + n) & !(page - 1)));
        let mut out = Vec::new();
        for s in self.segments.iter().filter(|s| s.writable) {
            let (a, b) = (s.vaddr, s.vaddr + s.memsz);
            match relro {
                Some((ra, rb)) if ra < b && rb > a => {
                    if a < ra {
                        out.push((a, ra));
                    }
                    if rb < b {
                        out.push((rb, b));
                    }
                }
                _ => out.push((a, b)),
            }
        }
        out
    }

    /// The extent of the object's image, relative to the bias.
    pub(crate) fn extent(&self) -> (u64, u64) {
        let lo = self.segments.iter().map(|s| s.vaddr).min().unwrap_or(0);
        let hi = self.segments.iter().map(|s| s.vaddr + s.memsz).max().unwrap_or(0);
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libcs_relocations_and_segments() {
        let info = Info::read("/lib/x86_64-linux-gnu/libz.so.1").unwrap();
        assert!(info.segments.iter().any(|s| s.executable));
        assert!(info.segments.iter().any(|s| s.writable));
        // zlib calls malloc and memcpy through its GOT.
        let names: Vec<&str> = info.relocs.iter().map(|r| info.syms[r.sym].name.as_str()).collect();
        assert!(names.contains(&"malloc") || names.contains(&"free"), "{names:?}");
        let free = info.syms.iter().find(|s| s.name == "free").unwrap();
        assert!(free.undefined);
        assert_eq!(free.version.as_deref(), Some("GLIBC_2.2.5"));
    }
}
