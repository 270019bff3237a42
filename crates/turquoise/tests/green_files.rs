//! Regular files in green threads: `std::fs` reads and writes give the data
//! back exactly, whatever the buffer sizes, and a read whose pages are not
//! in the page cache goes to the blocking pool (the thread parks) instead of
//! stalling its worker in the kernel.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use turquoise::thread::Builder;

fn runtime() -> turquoise::Runtime {
    turquoise::Builder::new().worker_threads(2).slice(Duration::from_millis(1)).enable_all().build().unwrap()
}

/// A scratch directory on the build's disk (`/tmp` may be a tmpfs, whose
/// pages cannot be evicted).
fn dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("green_files-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Bytes that differ with position and round.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Drops the file's clean pages from the page cache; true if none of them
/// is resident afterwards (`mincore`), so that the next read must wait for
/// the disk.
fn evict(f: &std::fs::File, len: usize) -> bool {
    f.sync_all().unwrap();
    // SAFETY: advice on our own descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if len == 0 {
        return false;
    }
    // SAFETY: a private read-only mapping of our file, unmapped below; only
    // its residency is queried, never its contents.
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(p, libc::MAP_FAILED);
        let pages = len.div_ceil(4096);
        let mut v = vec![0u8; pages];
        let ok = libc::mincore(p, len, v.as_mut_ptr()) == 0 && v.iter().all(|b| b & 1 == 0);
        libc::munmap(p, len);
        ok
    }
}

#[test]
fn reads_and_writes_of_files_come_back_exact_and_uncached_reads_park() {
    let rt = runtime();
    let d = dir();
    let mut offloaded = 0u64;
    let mut evicted_rounds = 0u64;
    let mut parked_rounds = 0u64;
    for round in 0..60u64 {
        let len = [0, 1, 4095, 4096, 65_537, 300_000, 1 << 20][round as usize % 7] + round as usize;
        let path = d.join(format!("f{round}"));
        let h = Builder::new()
            .spawn_on(rt.handle(), move || {
                let data = pattern(len, round);
                let mut f = std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
                // Writes in uneven pieces.
                for piece in data.chunks(7_777 + round as usize) {
                    f.write_all(piece).unwrap();
                }
                let evicted = evict(&f, len);
                // This worker's parks (green threads stay on theirs, and this
                // is the only one running).
                let c0 = linger::park::counters();
                // Reads back whole, then in small pieces from the middle.
                f.seek(SeekFrom::Start(0)).unwrap();
                let mut back = Vec::new();
                f.read_to_end(&mut back).unwrap();
                let c1 = linger::park::counters();
                let (parks, blocked) = (c1.parks - c0.parks, c1.blocked - c0.blocked);
                assert!(back == data, "round {round}: read_to_end gave other bytes ({} of {len})", back.len());
                evict(&f, len);
                let from = len / 3;
                f.seek(SeekFrom::Start(from as u64)).unwrap();
                let mut small = vec![0u8; 1000];
                let mut got = Vec::new();
                loop {
                    let n = f.read(&mut small).unwrap();
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&small[..n]);
                }
                assert!(got == data[from..], "round {round}: piecewise reads gave other bytes");
                drop(f);
                std::fs::remove_file(&path).unwrap();
                (evicted, parks, blocked)
            })
            .unwrap();
        let (evicted, parks, blocked) = h.join().unwrap();
        if evicted {
            evicted_rounds += 1;
            if parks >= 1 {
                parked_rounds += 1;
            } else {
                eprintln!("round {round}: an uncached read of {len} bytes did not park ({blocked} waits blocked)");
            }
        }
        offloaded += parks;
    }
    let _ = std::fs::remove_dir(&d);
    eprintln!("{evicted_rounds} rounds read uncached files, {parked_rounds} of them parked, {offloaded} parks");
    // Nearly all: under the stall emulator about one round in 300 does not
    // park and blocks nothing either (0 waits blocked): its `RWF_NOWAIT`
    // read found the pages cached again after `mincore` said they were not.
    assert!(parked_rounds * 10 >= evicted_rounds * 9, "{parked_rounds} of {evicted_rounds} uncached reads parked");
}
