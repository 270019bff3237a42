//! Hazard pointers on asymmetric fences: readers run flat out (OS threads
//! and preempted green threads) on nodes that writers replace and retire as
//! fast as they can; every node a reader gets must still carry its canary.
//! A node's drop poisons it first, so a reader that got a freed node sees
//! the poison even without ASan (`make test-asan` runs this file under it).
//! `HAZARD_SECONDS` sets the length of the two stress tests (5 s each by
//! default).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turquoise::sync::hazard::{Domain, HazAtomic, HazardPointer};

/// One test at a time: they count frees in statics and want the CPUs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const KEY: u64 = 0x9e37_79b9_7f4a_7c15;
const POISON: u64 = 0xdead_dead_dead_dead;

/// A node with a canary: `check == seq ^ KEY` while it lives; dropping it
/// poisons both (atomics, so a reader racing with the poisoning is no data
/// race: it just sees a broken canary) and counts the free.
struct Node {
    seq: AtomicU64,
    check: AtomicU64,
    freed: &'static AtomicU64,
}

impl Node {
    fn new(seq: u64, freed: &'static AtomicU64) -> Node {
        Node { seq: AtomicU64::new(seq), check: AtomicU64::new(seq ^ KEY), freed }
    }

    fn intact(&self) -> bool {
        let seq = self.seq.load(Relaxed);
        seq != POISON && self.check.load(Relaxed) == seq ^ KEY
    }

    fn poison(&self) {
        self.seq.store(POISON, Relaxed);
        self.check.store(POISON, Relaxed);
        self.freed.fetch_add(1, Relaxed);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.poison();
    }
}

fn seconds() -> f64 {
    std::env::var("HAZARD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5.0)
}

fn green() -> turquoise::thread::Builder {
    turquoise::thread::Builder::new().slice(Duration::from_micros(100))
}

/// Reads until `stop`, taking a new hazard pointer every 4096 reads (slots
/// are recycled): (reads, broken canaries).
fn read_flat_out(domain: &'static Domain, shared: &HazAtomic<Node>, stop: &AtomicBool) -> (u64, u64) {
    let (mut reads, mut broken) = (0, 0);
    while !stop.load(Relaxed) {
        let mut hp = domain.hazard_pointer();
        for _ in 0..4096 {
            let node = shared.load(&mut hp).expect("never empty");
            broken += !node.intact() as u64;
            reads += 1;
        }
    }
    (reads, broken)
}

/// Stores new nodes until `stop`: how many.
fn write_flat_out(shared: &HazAtomic<Node>, stop: &AtomicBool, freed: &'static AtomicU64) -> u64 {
    let mut n = 0;
    while !stop.load(Relaxed) {
        n += 1;
        shared.store(Node::new(n, freed));
    }
    n
}

#[test]
fn readers_never_see_a_reclaimed_node() {
    static DOMAIN: Domain = Domain::new();
    static FREED: AtomicU64 = AtomicU64::new(0);
    let _one = one_at_a_time();
    let (os_readers, green_readers, os_writers) = (2, 3, 2);
    let round = Duration::from_millis(500);
    let rounds = ((seconds() / round.as_secs_f64()) as u32).max(1);
    let (mut reads, mut created, mut during) = (0, 0, 0);
    let t = Instant::now();
    for _ in 0..rounds {
        let shared = Arc::new(HazAtomic::in_domain(Some(Node::new(0, &FREED)), &DOMAIN));
        let stop = Arc::new(AtomicBool::new(false));
        let freed_before = FREED.load(Relaxed);
        let spawn_reader = |green_thread: bool| {
            let (shared, stop) = (shared.clone(), stop.clone());
            let f = move || read_flat_out(&DOMAIN, &shared, &stop);
            if green_thread {
                Err(green().spawn(f).unwrap())
            } else {
                Ok(std::thread::spawn(f))
            }
        };
        let readers: Vec<_> = (0..os_readers).map(|_| spawn_reader(false)).chain((0..green_readers).map(|_| spawn_reader(true))).collect();
        let writers: Vec<_> = (0..os_writers)
            .map(|_| {
                let (shared, stop) = (shared.clone(), stop.clone());
                std::thread::spawn(move || write_flat_out(&shared, &stop, &FREED))
            })
            .collect();
        // A green writer too.
        let (s, st) = (shared.clone(), stop.clone());
        let green_writer = green().spawn(move || write_flat_out(&s, &st, &FREED)).unwrap();
        std::thread::sleep(round);
        during += FREED.load(Relaxed) - freed_before;
        stop.store(true, Relaxed);
        for r in readers {
            let (n, broken) = match r {
                Ok(h) => h.join().unwrap(),
                Err(h) => h.join().unwrap(),
            };
            assert_eq!(broken, 0, "a reader got a reclaimed node");
            reads += n;
        }
        let made: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum::<u64>() + green_writer.join().unwrap() + 1;
        created += made;
        assert!(DOMAIN.slots() <= os_readers + green_readers, "{} slots for {} readers", DOMAIN.slots(), os_readers + green_readers);
        // Readers gone: one scan frees everything retired; the last node
        // goes with its HazAtomic.
        DOMAIN.reclaim();
        assert_eq!(DOMAIN.pending(), 0);
        assert_eq!(FREED.load(Relaxed) - freed_before, made - 1);
        drop(shared);
        assert_eq!(FREED.load(Relaxed) - freed_before, made);
    }
    assert!(during > 0, "nothing was reclaimed while the readers ran");
    eprintln!(
        "{rounds} rounds in {:?}: {reads} reads ({os_readers} OS, {green_readers} green readers), {created} nodes retired, {during} of them freed while readers ran, {} slots",
        t.elapsed(),
        DOMAIN.slots()
    );
}

#[test]
fn a_held_node_outlives_its_retirement() {
    static DOMAIN: Domain = Domain::new();
    static FREED: AtomicU64 = AtomicU64::new(0);
    let _one = one_at_a_time();
    let shared = HazAtomic::in_domain(Some(Node::new(1, &FREED)), &DOMAIN);
    let mut hp = DOMAIN.hazard_pointer();
    let node = shared.load(&mut hp).unwrap();
    shared.store(Node::new(2, &FREED));
    assert_eq!(DOMAIN.reclaim(), 0);
    assert!(node.intact());
    assert_eq!(node.seq.load(Relaxed), 1);
    drop(node);
    assert_eq!(DOMAIN.reclaim(), 1);
    assert_eq!(FREED.load(Relaxed), 1);
    shared.clear();
    assert!(shared.load(&mut hp).is_none());
    assert_eq!(DOMAIN.reclaim(), 1);
    drop(hp);
    let again = DOMAIN.hazard_pointer();
    assert_eq!(DOMAIN.slots(), 1, "the slot was reused");
    drop(again);
}

/// A green thread holds a node across many of its slices (linger stops it
/// again and again) while 100,000 others are retired and scanned past it.
#[test]
fn a_preempted_green_thread_keeps_its_node() {
    static DOMAIN: Domain = Domain::new();
    static FREED: AtomicU64 = AtomicU64::new(0);
    static HELD: AtomicBool = AtomicBool::new(false);
    static DONE: AtomicBool = AtomicBool::new(false);
    let _one = one_at_a_time();
    let shared = Arc::new(HazAtomic::in_domain(Some(Node::new(0, &FREED)), &DOMAIN));
    let s = shared.clone();
    let holder = green()
        .spawn(move || {
            let mut hp = DOMAIN.hazard_pointer();
            let node = s.load(&mut hp).unwrap();
            HELD.store(true, Release);
            let mut spins = 0u64;
            while !DONE.load(Acquire) {
                assert!(node.intact());
                spins += 1;
            }
            (node.seq.load(Relaxed), spins)
        })
        .unwrap();
    while !HELD.load(Acquire) {
        std::hint::spin_loop();
    }
    let t = Instant::now();
    for n in 1..=100_000 {
        shared.store(Node::new(n, &FREED));
    }
    DOMAIN.reclaim();
    let elapsed = t.elapsed();
    assert_eq!(FREED.load(Relaxed), 99_999, "all but the held node and the current one");
    DONE.store(true, Release);
    let (seq, spins) = holder.join().unwrap();
    assert_eq!(seq, 0);
    assert_eq!(DOMAIN.reclaim(), 1);
    eprintln!("100000 nodes retired past a held one in {elapsed:?} (the holder spun {spins} times)");
}

/// The raw API (`protect_raw`, `retire`) with a deleter that poisons and
/// keeps the node (freed at the end): a node a reader gets after its
/// reclamation shows the poison, and no memory is reused meanwhile, so this
/// also serves as the control with no barrier on the scan side. Each
/// retire is followed by a scan. Returns (reads, poisoned reads, scans).
fn raw_run(domain: &'static Domain, length: Duration) -> (u64, u64, u64) {
    static FREED: AtomicU64 = AtomicU64::new(0);
    static KEPT: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    /// Poisons; the node stays allocated until the end of the run.
    ///
    /// # Safety
    /// `p` is a live node from `Box::into_raw`.
    unsafe fn poison(p: *mut Node) {
        // SAFETY: the caller's promise.
        unsafe { (*p).poison() };
        KEPT.lock().unwrap().push(p as usize);
    }
    let src = Arc::new(AtomicPtr::new(Box::into_raw(Box::new(Node::new(0, &FREED)))));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (src, stop) = (src.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut hp = domain.hazard_pointer();
                let (mut reads, mut poisoned) = (0, 0);
                while !stop.load(Relaxed) {
                    let p = hp.protect_raw(&src);
                    // SAFETY: nodes are retired into `domain` after they
                    // are unlinked and never freed before the run's end.
                    poisoned += !unsafe { &*p }.intact() as u64;
                    reads += 1;
                }
                (reads, poisoned)
            })
        })
        .collect();
    let t = Instant::now();
    let mut scans = 0;
    while t.elapsed() < length {
        let old = src.swap(Box::into_raw(Box::new(Node::new(scans + 1, &FREED))), AcqRel);
        // SAFETY: unlinked by the swap, retired once; `poison` may run on
        // any thread.
        unsafe { domain.retire(old, poison) };
        domain.reclaim();
        scans += 1;
    }
    stop.store(true, Relaxed);
    let (mut reads, mut poisoned) = (0, 0);
    for r in readers {
        let (n, p) = r.join().unwrap();
        reads += n;
        poisoned += p;
    }
    domain.reclaim();
    for p in KEPT.lock().unwrap().drain(..).chain([src.load(Relaxed) as usize]) {
        // SAFETY: every node, once, from `Box::into_raw`; no reader is left.
        drop(unsafe { Box::from_raw(p as *mut Node) });
    }
    (reads, poisoned, scans)
}

#[test]
fn raw_protect_and_retire_with_a_scan_per_retire() {
    static DOMAIN: Domain = Domain::new();
    let _one = one_at_a_time();
    let (reads, poisoned, scans) = raw_run(&DOMAIN, Duration::from_secs_f64(seconds() / 2.0));
    eprintln!("raw API: {reads} reads, {scans} retires each with a scan (heavy()), {poisoned} poisoned reads");
    assert_eq!(poisoned, 0);

    // The control, printed only: scans without heavy() may free a node
    // whose reader's hazard still sat in its store buffer.
    static NO_FENCE: Domain = Domain::with_scan_fence(|| {});
    let (reads, poisoned, scans) = raw_run(&NO_FENCE, Duration::from_secs_f64(seconds() / 2.0));
    eprintln!("control, scans without heavy(): {reads} reads, {scans} scans, {poisoned} poisoned reads");
}

/// Costs, printed: protect + reset with light() against the same with
/// fence(SeqCst), and one scan.
#[test]
fn costs() {
    static DOMAIN: Domain = Domain::new();
    let _one = one_at_a_time();
    let node = Box::into_raw(Box::new(7u64));
    let src = AtomicPtr::new(node);
    let mut hp = DOMAIN.hazard_pointer();
    let n = if cfg!(debug_assertions) { 100_000 } else { 20_000_000 };
    let per = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed().as_secs_f64() * 1e9 / n as f64
    };
    let light = per(&mut || {
        std::hint::black_box(hp.protect_raw(&src));
        hp.reset();
    });
    let seqcst = per(&mut || {
        std::hint::black_box(hp.protect_raw_seqcst(&src));
        hp.reset();
    });
    eprintln!("protect + reset: {light:.1} ns with light(), {seqcst:.1} ns with fence(SeqCst)");
    drop(hp);
    // SAFETY: from Box::into_raw; no reader left.
    drop(unsafe { Box::from_raw(node) });

    // A scan of 1000 retired nodes with 8 slots, 4 of them holding one.
    static FREED: AtomicU64 = AtomicU64::new(0);
    let nodes: Vec<_> = (0..4).map(|i| HazAtomic::in_domain(Some(Node::new(i, &FREED)), &DOMAIN)).collect();
    let mut hps: Vec<HazardPointer> = (0..8).map(|_| DOMAIN.hazard_pointer()).collect();
    let mut times = Vec::new();
    for _ in 0..20 {
        let guards: Vec<_> = nodes.iter().zip(hps.iter_mut()).map(|(a, hp)| a.load(hp).unwrap()).collect();
        let retire = Instant::now();
        for i in 0..1000 {
            nodes[i % 4].store(Node::new(i as u64, &FREED));
        }
        let retire = retire.elapsed();
        drop(guards);
        let t = Instant::now();
        DOMAIN.reclaim();
        times.push((t.elapsed(), retire));
    }
    times.sort();
    let (scan, retire) = times[times.len() / 2];
    let t = Instant::now();
    turquoise::sync::fence::heavy();
    eprintln!(
        "scan of the retired nodes left (up to {} of 1000, 8 slots): {scan:?} median; 1000 stores with retire (scans included): {retire:?}; one heavy() alone: {:?} ({:?})",
        256 + 16,
        t.elapsed(),
        turquoise::sync::fence::mechanism()
    );
}
