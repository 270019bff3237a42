//! liblinger.so exports exactly the symbols in `exports.txt`: the C API and
//! every libc interposer, as it did when the `linger` crate built it
//! itself. A symbol added or removed on purpose: regenerate the list with
//! `nm -D --defined-only target/release/liblinger.so | awk '{print $3}' | sort >crates/linger-c/exports.txt`.

#[path = "support/exports.rs"]
mod support;

#[test]
fn the_library_exports_the_listed_symbols() {
    support::check("liblinger.so", include_str!("../exports.txt"));
}
