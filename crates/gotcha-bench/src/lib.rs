//! gotcha-bench: the benchmarks of gotcha's library isolation, after the
//! paper's Figure 5 (a libpng decompression bomb stopped at a deadline)
//! and Table 3 (what calls into isolated libraries cost). The binary runs
//! both and writes section 8 of `docs/benchmarks.md`; the smoke test runs
//! the bomb path briefly.

pub mod bomb;
pub mod calls;
pub mod machine;
pub mod plots;
pub mod png;
pub mod progress;
pub mod report;
pub mod stats;

/// What the benchmark isolates: libpng and zlib (Figure 5) and the small
/// library of the call measurements (Table 3).
pub const SELECTION: &str = "libpng16,libz,gotcha_bench_nop";

/// Isolates the libraries named in `selection` (linger's syntax).
pub fn isolate(selection: &str) -> Result<gotcha::Report, String> {
    let sel = linger::Selection::parse(selection).map_err(|e| e.to_string())?;
    linger::isolate(&sel).map_err(|e| format!("isolating {selection}: {e}"))
}
