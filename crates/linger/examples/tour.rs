//! A short tour of linger: launch, timeout, resume, pause, cancel, a
//! head-of-line-blocking demo with numbers, and a decompression bomb inside
//! libpng with and without library isolation. Run with `make tour`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linger::{launch, pause, resume, Builder, Cancelled, Linger};

#[path = "support/png.rs"]
mod png;

/// A builder for isolated launches.
fn isolated() -> Builder {
    // SAFETY: the decodes use what libpng makes only inside themselves
    // and write plain pixels into the caller's buffer.
    unsafe { Builder::new().isolated(true) }
}

/// CPU work that takes roughly `units` x 10 us.
fn work(units: u64) -> u64 {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..units * 6_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x)
}

fn us(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.1} us", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let t = Instant::now();
    linger::init().unwrap();
    println!("(runtime started in {}: signal handler, timer, table of code that must not be preempted)\n", us(t.elapsed()));

    println!("== 1. launch: a call with a timeout");
    let t = Instant::now();
    let l = launch(|| work(1), Duration::from_millis(10)).unwrap();
    println!("   small job, 10 ms budget -> completed: {} in {}", l.is_completion(), us(t.elapsed()));

    println!("\n== 2. timeout: the call comes back when its time is up");
    let t = Instant::now();
    let mut big = launch(|| work(20_000), Duration::from_millis(1)).unwrap();
    println!("   ~200 ms job, 1 ms budget -> completed: {}, back after {}", big.is_completion(), us(t.elapsed()));

    println!("\n== 3. resume: give it more time, a slice at a time");
    let t = Instant::now();
    let mut slices = 1;
    while !big.is_completion() {
        resume(&mut big, Duration::from_millis(5)).unwrap();
        slices += 1;
    }
    println!("   finished after {slices} slices, {:.1} ms in total", t.elapsed().as_secs_f64() * 1e3);

    println!("\n== 4. pause: a function can yield on its own");
    let mut gen = launch(
        || {
            for step in ["fetch", "parse", "render"] {
                println!("   (inside) {step}");
                pause();
            }
            "done"
        },
        Duration::MAX,
    )
    .unwrap();
    while let Linger::Continuation(_) = gen {
        println!("   caller: it yielded = {}", gen.yielded());
        resume(&mut gen, Duration::MAX).unwrap();
    }
    println!("   result: {:?}", gen.completion());

    println!("\n== 5. cancel: drop what you no longer want");
    struct Guard;
    impl Drop for Guard {
        fn drop(&mut self) {
            println!("   (inside) destructor ran");
        }
    }
    let mut paused = launch(
        || {
            let _g = Guard;
            pause();
        },
        Duration::MAX,
    )
    .unwrap();
    println!("   cancel a paused function: {:?}", paused.cancel());
    let mut spinning = launch(|| work(u64::MAX / 1_000_000), Duration::from_micros(200)).unwrap();
    let how = spinning.cancel();
    println!("   cancel a preempted function: {how:?} (stopped mid-instruction: not unwound, what it owned leaks)");
    assert!(matches!(how, Cancelled::Reclaimed | Cancelled::Unwound));
    // A function that borrows runs in a scope, which never ends while it is
    // stopped half-way through an update: cancelling finishes it instead.
    let mut v: Vec<u64> = (0..200_000).rev().collect();
    let how = linger::scope(|s| s.launch(|| v.sort(), Duration::from_micros(100)).unwrap().cancel());
    println!(
        "   cancel a scoped function that borrows a Vec mid-sort: {how:?} (sorted: {})",
        v.windows(2).all(|w| w[0] <= w[1])
    );

    println!("\n== 6. head-of-line blocking: 200 requests, 5 of them 2000x longer ('decompression bombs')");
    // Requests arrive all at once; most are short, five are huge.
    let costs: Vec<u64> = (0..200).map(|i| if i % 40 == 7 { 10_000 } else { 5 }).collect();
    let short = |i: usize| costs[i] == 5;

    // (a) Run to completion, first come first served.
    let start = Instant::now();
    let mut fifo = Vec::new();
    for (i, &c) in costs.iter().enumerate() {
        work(c);
        if short(i) {
            fifo.push(start.elapsed());
        }
    }
    let fifo_total = start.elapsed();

    // (b) Each request is a preemptible function run in 100 us slices, round robin.
    let start = Instant::now();
    let mut queue: VecDeque<(usize, Linger<u64>)> = VecDeque::new();
    let mut sliced = Vec::new();
    for (i, &c) in costs.iter().enumerate() {
        queue.push_back((i, launch(move || work(c), Duration::ZERO).unwrap()));
    }
    while let Some((i, mut l)) = queue.pop_front() {
        resume(&mut l, Duration::from_micros(100)).unwrap();
        if l.is_completion() {
            if short(i) {
                sliced.push(start.elapsed());
            }
        } else {
            queue.push_back((i, l));
        }
    }
    let sliced_total = start.elapsed();
    println!("   latency of the 195 short requests:");
    println!("   {:<28} {:>12} {:>12} {:>12}", "", "median", "p99", "all done");
    println!(
        "   {:<28} {:>12} {:>12} {:>12}",
        "run to completion (FIFO)",
        us(percentile(&mut fifo, 0.5)),
        us(percentile(&mut fifo, 0.99)),
        us(fifo_total)
    );
    println!(
        "   {:<28} {:>12} {:>12} {:>12}",
        "linger, 100 us slices",
        us(percentile(&mut sliced, 0.5)),
        us(percentile(&mut sliced, 0.99)),
        us(sliced_total)
    );
    let s = linger::stats();
    println!(
        "\n   this thread: {} launches, {} preemptions, {} deferred, worst overrun {}",
        s.launches,
        s.preemptions,
        s.deferrals,
        us(Duration::from_nanos(s.worst_overrun_ns))
    );

    bomb_section();
}

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    s.split_whitespace().nth(1).and_then(|p| p.parse::<f64>().ok()).unwrap_or(0.0) * 4096.0 / (1 << 20) as f64
}

/// Section 7: libpng decoding a decompression bomb, bounded by a timeout.
fn bomb_section() {
    println!("\n== 7. a decompression bomb inside libpng, 10 ms budget: isolation (gotcha)");
    let (w, h) = (8000u32, 4000u32);
    let len = (w * h * 3) as usize;
    let bomb = Arc::new(png::bomb(w, h));
    println!("   a {} KiB PNG that decodes to {} MiB of pixels", bomb.len() / 1024, len >> 20);
    let mut out = vec![0u8; len];
    let decode = |bomb: &Arc<Vec<u8>>, out: &mut Vec<u8>| {
        let (b, o) = (bomb.clone(), png::Out(out.as_mut_ptr()));
        move || {
            let o = o;
            // SAFETY: `out` holds `len` bytes and outlives the function
            // (the tour waits for it or cancels it first).
            unsafe { png::decode_into(&b, o.0, len) }
        }
    };
    let t = Instant::now();
    // SAFETY: the function only calls libpng: nothing points into its stack.
    let plain = unsafe { Builder::new().reuse_stack_on_cancel(true) }.launch(decode(&bomb, &mut out), Duration::from_millis(10)).unwrap();
    let without = t.elapsed();
    drop(plain);
    println!("   without isolation: control back after {} (libpng is deferred: the deadline waited for it to return)", us(without));

    let r = linger::isolate(&linger::Selection::parse("libpng16,libz").unwrap()).unwrap();
    println!("   isolate libpng16 + libz: {} functions routed through {} GOT slots", r.functions, r.slots);
    // SAFETY: the decodes only call libpng: nothing points into their stacks.
    let isolated = unsafe { isolated().reuse_stack_on_cancel(true) };
    let t = Instant::now();
    let l = isolated.launch(decode(&bomb, &mut out), Duration::from_millis(10)).unwrap();
    let with = t.elapsed();
    drop(l); // cancels it: the libset is reset, libpng's memory freed
    let g = gotcha::stats();
    println!(
        "   with isolation:    control back after {} (stopped inside its own copy of libpng; first launch made the libset)",
        us(with)
    );
    println!(
        "   cancelled: libset reset in {} ({} bytes of library data restored), {} heap blocks of libpng/zlib freed",
        us(Duration::from_nanos(g.last_reset_ns)),
        g.last_reset_bytes,
        linger::stats().libset_blocks_freed
    );
    let rss0 = rss_mib();
    let mut back = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let l = isolated.launch(decode(&bomb, &mut out), Duration::from_millis(10)).unwrap();
        back.push(t.elapsed());
        assert!(l.is_continuation(), "a bomb decoded within 10 ms?");
        drop(l);
    }
    println!(
        "   200 more bombs, each cancelled: control back after median {}, p99 {}; RSS {:.1} -> {:.1} MiB",
        us(percentile(&mut back, 0.5)),
        us(percentile(&mut back, 0.99)),
        rss0,
        rss_mib()
    );
}
