//! The committed C header must match what cbindgen generates from the source.

#[test]
fn header_is_current() {
    let generated = include_str!(concat!(env!("OUT_DIR"), "/linger.h"));
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/linger.h"))
        .expect("include/linger.h exists");
    assert!(
        generated == committed,
        "include/linger.h is stale: run `LINGER_UPDATE_HEADER=1 cargo build -p linger` and commit it"
    );
}
