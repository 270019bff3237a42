//! libpng + zlib isolated: decodes preempted every 20-100 us inside the
//! libraries give the same pixels as a plain decode; decodes cancelled at
//! random points reset the libset, which then decodes correctly again,
//! and leave no memory behind.

use std::sync::{Arc, Once};
use std::time::Duration;

use linger::{Builder, Linger};

#[path = "../examples/support/png.rs"]
mod png;

use png::Out;

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the functions here use what libpng makes only inside
    // themselves and copy plain pixels out.
    unsafe { Builder::new().isolated(true) }
}

/// A 1024 x 768 RGB picture that does not compress to nothing.
fn encoded() -> Arc<Vec<u8>> {
    static ONCE: Once = Once::new();
    static mut PNG: Option<Arc<Vec<u8>>> = None;
    ONCE.call_once(|| {
        let (w, h) = (1024u32, 768u32);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let pixels: Vec<u8> = (0..w * h * 3)
            .map(|i| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let (x, y) = ((i / 3) % w, (i / 3) / w);
                ((x ^ y).wrapping_mul(3) as u8).wrapping_add((seed & 15) as u8)
            })
            .collect();
        let out = png::encode_rgb(w, h, &pixels);
        // SAFETY: written once, inside call_once, before any read.
        unsafe { PNG = Some(Arc::new(out)) };
    });
    // SAFETY: set once above, never written again.
    unsafe { (*std::ptr::addr_of!(PNG)).clone().unwrap() }
}

const PIXELS: usize = 1024 * 768 * 3;

fn decode_into(png: &[u8], out: *mut u8) -> bool {
    // SAFETY: every caller passes a buffer of PIXELS bytes.
    unsafe { png::decode_into(png, out, PIXELS) }
}

fn decode(png: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; PIXELS];
    decode_into(png, out.as_mut_ptr()).then_some(out)
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        linger::isolate(&linger::Selection::parse("libpng16,libz").unwrap()).unwrap();
    });
}

/// A deterministic slice in [20, 100) us.
fn slice(i: &mut u64) -> Duration {
    *i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    Duration::from_micros(20 + (*i >> 33) % 80)
}

#[test]
fn preempted_every_20_to_100_us_inside_libpng_the_pixels_are_right() {
    setup();
    let png = encoded();
    let reference = decode(&png).unwrap();
    let mut rng = 1;
    let (mut stops, mut inside) = (0u64, 0u64);
    for _ in 0..25 {
        let p = png.clone();
        let mut l = isolated().launch(move || decode(&p), slice(&mut rng)).unwrap();
        while l.is_continuation() {
            stops += 1;
            inside += u64::from(linger::last_preemption().is_some_and(|p| !p.deferred));
            linger::resume(&mut l, slice(&mut rng)).unwrap();
        }
        let Linger::Completion(Some(pixels)) = l else { panic!("decode failed") };
        assert!(pixels == reference, "pixels differ after a preempted decode");
    }
    assert!(stops >= 1000, "only {stops} stops");
    // Most stops land in libpng or zlib's own code (the rest in libc's
    // memcpy and friends, deferred to their return).
    assert!(inside * 2 >= stops, "{inside} of {stops} stops were taken inside the copies");
}

/// Decodes into `out` in an isolated function that recycles its stack if
/// cancelled.
fn launch_decode(png: &Arc<Vec<u8>>, out: &mut [u8], timeout: Duration) -> Linger<bool> {
    let (p, o) = (png.clone(), Out(out.as_mut_ptr()));
    // SAFETY: the function pins nothing and registers no stack address
    // anywhere: it only calls libpng, whose state is reset with its libset.
    unsafe { isolated().reuse_stack_on_cancel(true) }
        .launch(
            move || {
                let o = o;
                decode_into(&p, o.0)
            },
            timeout,
        )
        .unwrap()
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4
}

#[test]
fn cancelled_at_random_points_the_libset_is_reset_and_nothing_leaks() {
    setup();
    let png = encoded();
    let reference = decode(&png).unwrap();
    let mut rng = 7;
    let before = linger::stats();
    let mut rss = Vec::new();
    let mut out = vec![0u8; PIXELS];
    for round in 0..6 {
        for _ in 0..100 {
            let mut l = launch_decode(&png, &mut out, slice(&mut rng));
            for _ in 0..(rng >> 40) % 20 {
                if !l.is_continuation() {
                    break;
                }
                linger::resume(&mut l, slice(&mut rng)).unwrap();
            }
            drop(l);
        }
        // The libset is reused at once, and decodes right.
        out.fill(0);
        let l = launch_decode(&png, &mut out, Duration::MAX);
        assert!(matches!(l, Linger::Completion(true)), "round {round}");
        assert!(out == reference, "round {round}: pixels differ after the reset");
        rss.push(rss_kib());
    }
    let after = linger::stats();
    assert!(after.libset_resets - before.libset_resets >= 500, "{before:?} {after:?}");
    assert!(after.libset_blocks_freed > before.libset_blocks_freed);
    // Each cancelled decode held libpng's structures, row buffers and
    // zlib's window (about 60 KiB, freed by the reset) and a live stack of
    // a few KiB (reused): after the first rounds warm the allocator up,
    // 300 more cancels must not grow the process.
    assert!(rss[5] <= rss[2] + 512, "RSS grew: {rss:?} KiB");
    // The program's own libpng is untouched.
    assert!(decode(&png).unwrap() == reference);
}
