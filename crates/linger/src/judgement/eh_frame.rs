//! Where a loaded object's unwind tables are (`.eh_frame_hdr` and
//! `.eh_frame`, from its program headers), and the frame description of a
//! function in them. The table of code ranges is built from these, and the
//! walker (`unwind`) reads the rules they hold.

use gimli::{BaseAddresses, EhFrame, EhFrameHdr, NativeEndian, UnwindSection};

/// Where one loaded object's unwind tables are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Object {
    /// Executable range of the object.
    pub text: (usize, usize),
    /// `.eh_frame_hdr` (from PT_GNU_EH_FRAME) and the readable extent after it.
    pub hdr: usize,
    pub hdr_len: usize,
    /// The readable extent of the segment holding `.eh_frame`: [start, end).
    pub segs: [(usize, usize); 4],
}

/// The code range of the function containing `pc` in `obj`, from its
/// frame description. Not for signal handlers (reads the tables freely).
pub(crate) fn function_extent(obj: &Object, pc: usize) -> Option<(usize, usize)> {
    let s = sections(obj)?;
    let fde = s.hdr.table()?.fde_for_address(&s.eh_frame, &s.bases, pc as u64, EhFrame::cie_from_offset).ok()?;
    let start = fde.initial_address() as usize;
    Some((start, start + fde.len() as usize))
}

pub(crate) type Slice = gimli::EndianSlice<'static, NativeEndian>;

/// One object's parsed `.eh_frame_hdr` and `.eh_frame`.
pub(crate) struct Sections {
    pub(crate) hdr: gimli::ParsedEhFrameHdr<Slice>,
    pub(crate) eh_frame: EhFrame<Slice>,
    pub(crate) bases: BaseAddresses,
}

pub(crate) fn sections(obj: &Object) -> Option<Sections> {
    // SAFETY: the header lies in a mapped, read-only segment of a loaded
    // object (recorded when the table was built), mapped while it is loaded;
    // callers hold a reading section of that table, which `dlclose` waits
    // for before it unloads anything (see `ranges::unloading`).
    let hdr_bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(obj.hdr as *const u8, obj.hdr_len) };
    let bases = BaseAddresses::default().set_eh_frame_hdr(obj.hdr as u64).set_text(obj.text.0 as u64);
    let hdr = EhFrameHdr::new(hdr_bytes, NativeEndian).parse(&bases, 8).ok()?;
    let gimli::Pointer::Direct(eh) = hdr.eh_frame_ptr() else { return None };
    let eh = eh as usize;
    let seg = obj.segs.iter().find(|s| s.0 <= eh && eh < s.1)?;
    // SAFETY: from `.eh_frame` to the end of the mapped segment holding it.
    let eh_bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(eh as *const u8, seg.1 - eh) };
    Some(Sections { hdr, eh_frame: EhFrame::new(eh_bytes, NativeEndian), bases: bases.set_eh_frame(eh as u64) })
}

/// Reads the unwind table location of one object from its program headers.
pub(crate) fn object_from_phdrs(bias: usize, phdrs: &[libc::Elf64_Phdr], text: (usize, usize)) -> Option<Object> {
    const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
    let eh = phdrs.iter().find(|p| p.p_type == PT_GNU_EH_FRAME)?;
    let hdr = bias + eh.p_vaddr as usize;
    let mut segs = [(0usize, 0usize); 4];
    let mut n = 0;
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_R != 0) {
        if n < segs.len() {
            let s = bias + p.p_vaddr as usize;
            segs[n] = (s, s + p.p_memsz as usize);
            n += 1;
        }
    }
    let seg = segs.iter().find(|s| s.0 <= hdr && hdr < s.1)?;
    Some(Object { text, hdr, hdr_len: seg.1 - hdr, segs })
}
