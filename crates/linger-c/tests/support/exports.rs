//! The check behind both C libraries' `tests/exports.rs` (turquoise-c
//! includes this file by path).

use std::collections::BTreeSet;

use object::{Object, ObjectSymbol};

/// Asserts that `lib` (a file name), built beside the running test's
/// executable (target/<profile>/deps) by a build of its crate, exports exactly the symbols `listed`
/// (one per line), defined and global.
pub fn check(lib: &str, listed: &str) {
    let exe = std::env::current_exe().expect("test executable");
    let so = exe.parent().expect("deps directory").join(lib);
    let data = std::fs::read(&so).unwrap_or_else(|e| {
        panic!("{}: {e} (a test run does not build the C libraries: `cargo build -p linger-c -p turquoise-c` with the same profile first, as `make test` does)", so.display())
    });
    let file = object::File::parse(&*data).expect("an ELF file");
    let got: BTreeSet<String> = file
        .dynamic_symbols()
        .filter(|s| !s.is_undefined() && s.is_global())
        .map(|s| s.name().expect("symbol name").to_string())
        .collect();
    let want: BTreeSet<String> = listed.lines().map(str::to_string).collect();
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty() && extra.is_empty(), "{lib}: missing {missing:?}, not listed {extra:?}");
}
