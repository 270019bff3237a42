//! The committed C header matches the C API.

#[test]
fn header_is_current() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/turquoise.h"));
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/turquoise.h"))
        .expect("include/turquoise.h exists");
    assert!(
        generated == committed,
        "include/turquoise.h is stale: run `TURQUOISE_UPDATE_HEADER=1 cargo build -p turquoise` and commit it"
    );
}
