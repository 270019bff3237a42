//! Generates the C header from `src/ffi.rs` into OUT_DIR (and into
//! `include/linger.h` when LINGER_UPDATE_HEADER=1). The test
//! `header_is_current` compares the two, so a stale committed header fails CI.
//! (`liblinger.so` itself is built by crates/linger-c.)

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("linger.h");
    println!("cargo:rerun-if-changed=src/ffi.rs");
    println!("cargo:rerun-if-changed=src/state/stats.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=LINGER_UPDATE_HEADER");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        // Only the C API's own files: the interposed libc functions elsewhere
        // in the crate are exported too, but are not part of our header.
        .with_src(crate_dir.join("src/ffi.rs"))
        .with_src(crate_dir.join("src/state/stats.rs"))
        .with_config(config)
        .generate()
        .expect("generating the C header");
    bindings.write_to_file(&out);
    if std::env::var_os("LINGER_UPDATE_HEADER").is_some() {
        bindings.write_to_file(crate_dir.join("../../include/linger.h"));
    }
}
