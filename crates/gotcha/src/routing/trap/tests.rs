//! Trap-and-redirect, through real faults: a test SIGSEGV handler calls
//! [`redirect`] and ends the process (exit status 99) on any fault it
//! does not handle. Each access form runs many times, alternating the
//! thread's libset, on four threads at once.

use super::*;
use core::arch::asm;
use std::cell::Cell;
use std::ptr::{read_volatile, write_volatile};
use std::sync::Once;

/// Words per test variable (512 bytes: displacements past 127 take 32 bits).
const N: usize = 64;
/// Libsets the accesses alternate between (the thread's libset word is
/// set directly; no libset is made).
const LIBSETS: usize = 4;
const ROUNDS: usize = 2000;

thread_local! {
    static HANDLED: Cell<u64> = const { Cell::new(0) };
}

extern "C" fn on_segv(_sig: libc::c_int, info: *mut libc::siginfo_t, uc: *mut libc::c_void) {
    // SAFETY: the kernel's arguments to an SA_SIGINFO handler of SIGSEGV.
    if unsafe { redirect(info, uc) } {
        HANDLED.with(|h| h.set(h.get() + 1));
        return;
    }
    let msg = b"gotcha trap tests: a SIGSEGV that redirect() did not handle\n";
    // SAFETY: write(2) and _exit(2) are async-signal-safe.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::_exit(99);
    }
}

fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: installing a handler with a zeroed, then filled, sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_segv as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut()), 0);
        }
    });
}

fn handled() -> u64 {
    HANDLED.with(|h| h.get())
}

/// Runs `f`, which must fault exactly once (and be redirected).
fn once<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let before = handled();
    let r = f();
    assert_eq!(handled() - before, 1, "{what}: expected exactly one redirected fault");
    r
}

fn val(k: usize, t: usize, i: usize) -> u64 {
    ((k as u64 + 1) << 56) | ((t as u64) << 48) | i as u64
}

extern "C" fn f0() -> u64 {
    100
}
extern "C" fn f1() -> u64 {
    101
}
extern "C" fn f2() -> u64 {
    102
}
extern "C" fn f3() -> u64 {
    103
}

/// One test variable of `N` words, a copy per libset.
struct TestVar {
    copies: [*mut u64; LIBSETS],
    fake: usize,
}

impl TestVar {
    fn new(fill: impl Fn(usize, usize) -> u64) -> TestVar {
        let copies: [*mut u64; LIBSETS] = std::array::from_fn(|k| {
            let b: &'static mut [u64; N] = Box::leak(Box::new([0u64; N]));
            for (i, w) in b.iter_mut().enumerate() {
                *w = fill(k, i);
            }
            b.as_mut_ptr()
        });
        let real: Vec<usize> = copies.iter().map(|&p| p as usize).collect();
        let fake = add(N * 8, &real).unwrap();
        TestVar { copies, fake }
    }
    fn get(&self, k: usize, i: usize) -> u64 {
        assert!(i < N);
        // SAFETY: inside copy k, a leaked allocation of N words.
        unsafe { read_volatile(self.copies[k].add(i)) }
    }
    fn set(&self, k: usize, i: usize, v: u64) {
        assert!(i < N);
        // SAFETY: as above.
        unsafe { write_volatile(self.copies[k].add(i), v) }
    }
    fn real(&self, k: usize) -> usize {
        self.copies[k] as usize
    }
}

/// Every access form, `ROUNDS` times, libsets 0..LIBSETS in turn. `t`
/// tells this thread's values apart.
fn forms(t: usize) {
    install_handler();
    let a = TestVar::new(|k, i| val(k, t, i));
    let fns = [f0 as extern "C" fn() -> u64, f1, f2, f3];
    let fp = TestVar::new(|k, i| if i == 0 { fns[k] as usize as u64 } else { 0 });
    for round in 0..ROUNDS {
        let k = round % LIBSETS;
        dispatch::set_current(k);
        let fake = a.fake;
        let real = a.real(k);

        // mov r64, [base]; the register keeps the real address.
        // SAFETY (every asm block below): accesses inside test variable
        // `a` (or `fp`) through its fake address, redirected by the
        // handler to copy k; the registers the handler rewrites are
        // outputs.
        let (v, after) = once("mov r64, [base]", || unsafe {
            let (v, after): (u64, usize);
            asm!("mov {v}, qword ptr [{p}]", p = inout(reg) fake => after, v = out(reg) v, options(nostack));
            (v, after)
        });
        assert_eq!((v, after), (val(k, t, 0), real));

        // mov [base + disp32], imm
        for j in 0..LIBSETS {
            a.set(j, 32, 0);
        }
        once("mov [base+disp32], imm", || unsafe {
            asm!("mov qword ptr [{p} + 0x100], 0x5a5a", p = inout(reg) fake => _, options(nostack));
        });
        for j in 0..LIBSETS {
            assert_eq!(a.get(j, 32), if j == k { 0x5a5a } else { 0 }, "libset {j}");
        }

        // mov r32, [base + index*8 + disp8], base fake
        let i = round % 8;
        let v32 = once("mov r32, [base+index*8+disp]", || unsafe {
            let v: u32;
            asm!("mov {v:e}, dword ptr [{p} + {i}*8 + 16]", p = inout(reg) fake => _, i = in(reg) i, v = out(reg) v, options(nostack));
            v
        });
        assert_eq!(v32, val(k, t, 2 + i) as u32);

        // [index*1 + base], the index fake
        let off = 8 * (round % 16);
        let (v, after) = once("mov r64, [base+index*1], index fake", || unsafe {
            let (v, after): (u64, usize);
            asm!("mov {v}, qword ptr [{o} + {p}*1]", p = inout(reg) fake => after, o = in(reg) off, v = out(reg) v, options(nostack));
            (v, after)
        });
        assert_eq!((v, after), (val(k, t, off / 8), real));

        // movzx: the top byte of word 0 is k + 1
        let b = once("movzx", || unsafe {
            let b: u32;
            asm!("movzx {b:e}, byte ptr [{p} + 7]", p = inout(reg) fake => _, b = out(reg) b, options(nostack));
            b
        });
        assert_eq!(b as usize, k + 1);

        // add [mem], reg
        a.set(k, 40, 1000);
        once("add [mem], reg", || unsafe {
            asm!("add qword ptr [{p} + 320], {r}", p = inout(reg) fake => _, r = in(reg) round as u64, options(nostack));
        });
        assert_eq!(a.get(k, 40), 1000 + round as u64);

        // cmp qword ptr [mem], imm: only copy k holds 77
        for j in 0..LIBSETS {
            a.set(j, 48, if j == k { 77 } else { 78 });
        }
        let eq = once("cmp [mem], imm", || unsafe {
            let eq: u8;
            asm!("cmp qword ptr [{p} + 384], 77", "sete {e}", p = inout(reg) fake => _, e = out(reg_byte) eq, options(nostack));
            eq
        });
        assert_eq!(eq, 1);

        // lock xadd
        let before = a.get(k, 49);
        let old = once("lock xadd", || unsafe {
            let old: u64;
            asm!("lock xadd qword ptr [{p} + 392], {r}", p = inout(reg) fake => _, r = inout(reg) 5u64 => old, options(nostack));
            old
        });
        assert_eq!((old, a.get(k, 49)), (before, before + 5));

        // movdqu xmm, [mem]
        let (lo, hi) = once("movdqu", || unsafe {
            let (lo, hi): (u64, u64);
            asm!(
                "movdqu {x}, xmmword ptr [{p} + 16]",
                "movq {lo}, {x}",
                "psrldq {x}, 8",
                "movq {hi}, {x}",
                p = inout(reg) fake => _, x = out(xmm_reg) _, lo = out(reg) lo, hi = out(reg) hi, options(nostack),
            );
            (lo, hi)
        });
        assert_eq!((lo, hi), (val(k, t, 2), val(k, t, 3)));

        // rep movsb, the source (rsi) fake
        let mut dst = [0u8; 64];
        let d = dst.as_mut_ptr();
        once("rep movsb, rsi fake", || unsafe {
            asm!("rep movsb", inout("rsi") fake => _, inout("rdi") d => _, inout("rcx") 64usize => _, options(nostack));
        });
        for (w, chunk) in dst.chunks(8).enumerate() {
            assert_eq!(u64::from_le_bytes(chunk.try_into().unwrap()), val(k, t, w));
        }

        // rep movsb, the destination (rdi) fake
        let src: [u64; 8] = std::array::from_fn(|w| (round * 8 + w) as u64);
        for j in 0..LIBSETS {
            for w in 52..60 {
                a.set(j, w, 0);
            }
        }
        once("rep movsb, rdi fake", || unsafe {
            asm!("rep movsb", inout("rsi") src.as_ptr() => _, inout("rdi") fake + 52 * 8 => _, inout("rcx") 64usize => _, options(nostack));
        });
        for j in 0..LIBSETS {
            for (w, &s) in src.iter().enumerate() {
                assert_eq!(a.get(j, 52 + w), if j == k { s } else { 0 }, "libset {j} word {}", 52 + w);
            }
        }

        // call qword ptr [reg], through a fake pointer to a function pointer
        let r = once("call [reg]", || unsafe {
            let r: u64;
            asm!("call qword ptr [rdx]", inout("rdx") fp.fake => _, out("rax") r, clobber_abi("C"));
            r
        });
        assert_eq!(r, 100 + k as u64);

        // A negative displacement from a pointer one past the end.
        let end = fake + N * 8;
        let (v, after) = once("[end - 8]", || unsafe {
            let (v, after): (u64, usize);
            asm!("mov {v}, qword ptr [{p} - 8]", p = inout(reg) end => after, v = out(reg) v, options(nostack));
            (v, after)
        });
        assert_eq!((v, after), (val(k, t, N - 1), real + N * 8));

        // The rewritten register stays valid: the second access does not fault.
        let (x, y) = once("two accesses, one fault", || unsafe {
            let (x, y): (u64, u64);
            asm!(
                "mov {x}, qword ptr [{p} + 8]",
                "mov {y}, qword ptr [{p} + 24]",
                p = inout(reg) fake => _, x = out(reg) x, y = out(reg) y, options(nostack),
            );
            (x, y)
        });
        assert_eq!((x, y), (val(k, t, 1), val(k, t, 3)));
    }
    dispatch::set_current(0);
}

#[test]
fn accesses_through_fake_addresses_reach_the_current_libsets_copy_on_four_threads() {
    let threads: Vec<_> = (0..4).map(|t| std::thread::spawn(move || forms(t + 1))).collect();
    for th in threads {
        th.join().unwrap();
    }
}

#[test]
fn an_unknown_libset_uses_libset_0s_copy_until_it_learns_its_own() {
    install_handler();
    let mine = Box::leak(Box::new([11u64, 12]));
    let other = Box::leak(Box::new([21u64, 22]));
    let fake = add(16, &[mine.as_ptr() as usize]).unwrap();
    let read = |libset: usize| -> u64 {
        let prev = dispatch::set_current(libset);
        // SAFETY: reads word 1 of the trapped variable through its fake address.
        let v = once("read", || unsafe {
            let v: u64;
            asm!("mov {v}, qword ptr [{p} + 8]", p = inout(reg) fake => _, v = out(reg) v, options(nostack));
            v
        });
        dispatch::set_current(prev);
        v
    };
    for _ in 0..100 {
        assert_eq!(read(5), 12);
        assert_eq!(read(0), 12);
    }
    set_real(fake, 5, other.as_ptr() as usize).unwrap();
    for _ in 0..100 {
        assert_eq!(read(5), 22);
        assert_eq!(read(0), 12);
        assert_eq!(read(MAX_LIBSETS - 1), 12);
    }
    set_real(fake, 5, 0).unwrap();
    assert_eq!(read(5), 12);
    assert!(set_real(fake + 8, 5, other.as_ptr() as usize).is_err(), "not a variable's fake address");
    assert!(set_real(fake, MAX_LIBSETS, other.as_ptr() as usize).is_err());
    assert!(set_real(fake, 0, 0).is_err());
}

#[test]
fn regions_tile_the_area_and_keep_page_offsets() {
    let blocks: Vec<&'static mut [u8; 4096 * 3]> = (0..4).map(|_| Box::leak(Box::new([0u8; 4096 * 3]))).collect();
    for (n, b) in blocks.iter().enumerate() {
        for size in [1, 16, 17, 4000, 4096 * 2 + 5] {
            let real = b.as_ptr() as usize + n * 8;
            let fake = add(size, &[real]).unwrap();
            let (lo, hi) = area().unwrap();
            assert!(lo <= fake && fake < hi);
            assert_eq!(fake % PAGE, real % PAGE, "alignment kept");
            let v = find(fake).unwrap();
            assert_eq!(v.fake.load(Ordering::Relaxed), fake);
            for probe in [fake - PAGE, fake + size - 1, fake + size.div_ceil(16) * 16 + PAGE - 1] {
                assert!(std::ptr::eq(find(probe).unwrap(), v), "{probe:#x} maps back to its variable");
            }
        }
    }
    assert!(add(8, &[]).is_err());
    assert!(add(8, &[0, 1]).is_err());
    assert!(add(8, &[1; MAX_LIBSETS + 1]).is_err());
    let (lo, _) = area().unwrap();
    assert!(add(8, &[lo + 4096]).is_err(), "a fake address as a real one");
}

/// A fabricated fault (no signal): `code` at RIP, registers as given.
struct Fake {
    si: libc::siginfo_t,
    uc: libc::ucontext_t,
    code: Vec<u8>,
}

impl Fake {
    fn new(code: &[u8], addr: usize, regs: &[(libc::c_int, usize)]) -> Fake {
        // SAFETY: both are plain C structs for which all-zero is valid.
        let (mut si, uc): (libc::siginfo_t, libc::ucontext_t) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        si.si_signo = libc::SIGSEGV;
        si.si_code = SEGV_ACCERR;
        // SAFETY: on x86-64 Linux the fault address is the first member of
        // the union at byte 16 of the 128-byte siginfo_t.
        unsafe { (&mut si as *mut libc::siginfo_t).cast::<u8>().add(16).cast::<usize>().write_unaligned(addr) };
        // SAFETY: just written.
        assert_eq!(unsafe { si.si_addr() } as usize, addr);
        let mut code = code.to_vec();
        code.resize(32, 0x90); // what the decoder may read past the instruction
        let mut f = Fake { si, uc, code };
        for &(r, v) in regs {
            f.uc.uc_mcontext.gregs[r as usize] = v as i64;
        }
        f.uc.uc_mcontext.gregs[libc::REG_RIP as usize] = f.code.as_ptr() as i64;
        f
    }
    fn redirect(&mut self) -> bool {
        // SAFETY: a siginfo and a ucontext of our own, RIP at readable bytes.
        unsafe { redirect(&self.si, (&mut self.uc as *mut libc::ucontext_t).cast()) }
    }
    fn reg(&self, r: libc::c_int) -> usize {
        self.uc.uc_mcontext.gregs[r as usize] as usize
    }
}

/// What a refusal test is about, the instruction, the registers.
type Case<'a> = (&'a str, &'a [u8], &'a [(libc::c_int, usize)]);

#[test]
fn what_cannot_be_redirected_safely_is_refused() {
    let word = Box::leak(Box::new([1u64, 2, 3, 4]));
    let word1 = Box::leak(Box::new([5u64, 6, 7, 8]));
    let real = word.as_ptr() as usize;
    let fake = add(32, &[real, word1.as_ptr() as usize]).unwrap();
    use libc::{REG_RAX, REG_RBX, REG_RCX, REG_RIP};
    let mov_rax_rbx8 = [0x48, 0x8b, 0x43, 0x08]; // mov rax, [rbx + 8]

    // The one that works, to show the others fail for their own reason.
    for libset in [0, 1, 7] {
        let prev = dispatch::set_current(libset);
        let mut f = Fake::new(&mov_rax_rbx8, fake + 8, &[(REG_RBX, fake)]);
        assert!(f.redirect());
        dispatch::set_current(prev);
        assert_eq!(f.reg(REG_RBX), if libset == 1 { word1.as_ptr() as usize } else { real });
    }
    // Not in the area: refused at once, nothing looked at.
    assert!(!Fake::new(&mov_rax_rbx8, 0x1000, &[(REG_RBX, fake)]).redirect());
    assert!(!Fake::new(&mov_rax_rbx8, real, &[(REG_RBX, fake)]).redirect());
    // Sent rather than caused.
    let mut f = Fake::new(&mov_rax_rbx8, fake + 8, &[(REG_RBX, fake)]);
    f.si.si_code = libc::SI_USER;
    assert!(!f.redirect());
    // The fault address is in no register's variable (the register is real).
    assert!(!Fake::new(&mov_rax_rbx8, fake + 8, &[(REG_RBX, real)]).redirect());
    let cases: &[Case] = &[
        ("rip-relative", &[0x48, 0x8b, 0x05, 0, 0, 0, 0], &[(REG_RAX, fake)]),
        ("absolute", &[0x48, 0x8b, 0x04, 0x25, 0, 0x10, 0, 0], &[(REG_RAX, fake)]),
        ("fs override", &[0x64, 0x48, 0x8b, 0x03], &[(REG_RBX, fake)]),
        ("gs override", &[0x65, 0x48, 0x8b, 0x03], &[(REG_RBX, fake)]),
        ("the fake value is the data, not the address", &[0x48, 0x89, 0x01], &[(REG_RAX, fake), (REG_RCX, 0x2000)]),
        ("the sum leaves the variable", &[0x48, 0x8b, 0x04, 0x0b], &[(REG_RBX, fake), (REG_RCX, 1 << 20)]),
        ("a fake index scaled by 8", &[0x48, 0x8b, 0x04, 0xd9], &[(REG_RBX, fake), (REG_RCX, 0)]),
        ("32-bit addressing", &[0x67, 0x8b, 0x03], &[(REG_RBX, fake)]),
        ("VSIB gather", &[0xc4, 0xe2, 0x69, 0x90, 0x04, 0x8b], &[(REG_RBX, fake)]),
        ("call reg", &[0xff, 0xd0], &[(REG_RAX, fake)]),
        ("no memory operand", &[0x90], &[(REG_RBX, fake)]),
        ("not an instruction", &[0x06], &[(REG_RBX, fake)]),
        ("lods with a 32-bit address", &[0x67, 0xac], &[(libc::REG_RSI, fake)]),
    ];
    for &(what, code, regs) in cases {
        let mut f = Fake::new(code, fake + 8, regs);
        assert!(!f.redirect(), "{what} was redirected");
        for &(r, v) in regs {
            assert_eq!(f.reg(r), v, "{what}: a register changed");
        }
    }
    // Executing at a fake address (a call through a fake function pointer).
    let mut f = Fake::new(&mov_rax_rbx8, fake, &[(REG_RBX, fake)]);
    f.uc.uc_mcontext.gregs[REG_RIP as usize] = fake as i64;
    assert!(!f.redirect());
    // String instructions with both operands fake: both rewritten.
    let mut f = Fake::new(&[0xf3, 0xa4], fake + 8, &[(libc::REG_RSI, fake + 8), (libc::REG_RDI, fake + 16)]);
    assert!(f.redirect());
    assert_eq!((f.reg(libc::REG_RSI), f.reg(libc::REG_RDI)), (real + 8, real + 16));
}

/// The cost of one redirected access (fault, handler, decode, rewrite,
/// return): `cargo test --release -p linger-gotcha -- --ignored --nocapture trap_cost`.
#[test]
#[ignore]
fn trap_cost() {
    install_handler();
    let w = Box::leak(Box::new([7u64; 2]));
    let fake = add(16, &[w.as_ptr() as usize]).unwrap();
    let time = |p: usize| {
        let mut ns = Vec::with_capacity(10_000);
        for _ in 0..10_000 {
            let t = std::time::Instant::now();
            let v: u64;
            // SAFETY: reads word 0 of `w`, directly or through its fake address.
            unsafe { asm!("mov {v}, qword ptr [{p}]", p = inout(reg) p => _, v = out(reg) v, options(nostack)) };
            ns.push(t.elapsed().as_nanos() as u64);
            assert_eq!(v, 7);
        }
        ns.sort_unstable();
        (ns[ns.len() / 2], ns[ns.len() * 99 / 100])
    };
    let direct = time(w.as_ptr() as usize);
    let before = handled();
    let trapped = time(fake);
    assert_eq!(handled() - before, 10_000);
    println!("trap_cost: direct access median {} ns (p99 {}); redirected access median {} ns (p99 {})", direct.0, direct.1, trapped.0, trapped.1);
}
