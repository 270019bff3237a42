//! The committed C headers match what cbindgen generates from the sources.

#[test]
fn headers_are_current() {
    for h in &linger_headers::HEADERS {
        let generated = h.generate().expect("generating");
        let committed = std::fs::read_to_string(h.path()).expect("the committed header");
        assert!(generated == committed, "include/{} is stale: run `make header` and commit it", h.file);
    }
}

/// Each header compiles alone as strict C99, C11 and C++11, warnings as
/// errors (`turquoise.h` once declared `struct timespec` inside a
/// parameter list under `-std=c99`).
#[test]
fn headers_compile_as_strict_c_and_cxx() {
    let dir = std::env::temp_dir().join(format!("linger-headers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let include = linger_headers::root().join("include");
    for h in &linger_headers::HEADERS {
        let src = dir.join(format!("{}.c", h.file));
        std::fs::write(&src, format!("#include \"{}\"\nint main(void) {{ return 0; }}\n", h.file)).unwrap();
        for (cc, std, lang) in [("cc", "-std=c99", "c"), ("cc", "-std=c11", "c"), ("c++", "-std=c++11", "c++")] {
            let out = std::process::Command::new(cc)
                .args([std, "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", lang])
                .arg("-I")
                .arg(&include)
                .arg(&src)
                .output()
                .unwrap_or_else(|e| panic!("running {cc}: {e}"));
            assert!(out.status.success(), "{} under {cc} {std}:\n{}", h.file, String::from_utf8_lossy(&out.stderr));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
