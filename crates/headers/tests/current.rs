//! The committed C headers match what cbindgen generates from the sources.

#[test]
fn headers_are_current() {
    for h in &linger_headers::HEADERS {
        let generated = h.generate().expect("generating");
        let committed = std::fs::read_to_string(h.path()).expect("the committed header");
        assert!(generated == committed, "include/{} is stale: run `make header` and commit it", h.file);
    }
}
