//! Generates the C header from `src/ffi.rs` into OUT_DIR (and into
//! `include/turquoise.h` when TURQUOISE_UPDATE_HEADER=1); the test
//! `header_is_current` compares the two. (`libturquoise.so` itself is built
//! by crates/turquoise-c.)

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("turquoise.h");
    println!("cargo:rerun-if-changed=src/ffi.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=TURQUOISE_UPDATE_HEADER");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_src(crate_dir.join("src/ffi.rs"))
        .with_config(config)
        .generate()
        .expect("generating the C header");
    bindings.write_to_file(&out);
    if std::env::var_os("TURQUOISE_UPDATE_HEADER").is_some() {
        bindings.write_to_file(crate_dir.join("../../include/turquoise.h"));
    }
}
