//! libturquoise.so exports exactly the symbols in `exports.txt`: the C API and
//! every libc interposer, as it did when the `turquoise` crate built it
//! itself. A symbol added or removed on purpose: regenerate the list with
//! `nm -D --defined-only target/release/libturquoise.so | awk '{print $3}' | sort >crates/turquoise-c/exports.txt`.

#[path = "../../linger-c/tests/support/exports.rs"]
mod support;

#[test]
fn the_library_exports_the_listed_symbols() {
    support::check("libturquoise.so", include_str!("../exports.txt"));
}
