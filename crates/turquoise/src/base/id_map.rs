//! Hash maps keyed by small unique integers: green thread ids and
//! descriptor numbers, looked up at every spawn, end and I/O park.
//!
//! std's SipHash is keyed against keys chosen by an attacker; these keys
//! are ours (counters, descriptor numbers), and SipHash cost ~20 ns of
//! each of a spawn's four lookups (spawn+join 900 -> 820 ns without it).
//! Written by hand: hashing one integer is one multiplication, not worth a
//! dependency.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by an id or a descriptor number.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing: the high bits (which hashbrown's control bytes use)
/// depend on every bit of the key.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

const PHI: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(PHI);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(PHI);
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u64(n as u32 as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn consecutive_keys_differ_in_their_top_bits() {
        let b = BuildHasherDefault::<IdHasher>::default();
        let tops: std::collections::HashSet<u64> = (0..128u64).map(|k| b.hash_one(k) >> 57).collect();
        // 128 keys over 128 possible 7-bit tags: most must differ.
        assert!(tops.len() > 64, "{} distinct tags", tops.len());
        let m: IdMap<i32, i32> = (0..1000).map(|k| (k, -k)).collect();
        assert!((0..1000).all(|k| m[&k] == -k));
    }
}
