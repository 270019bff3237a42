//! Generates the C header from `src/ffi.rs` into OUT_DIR (and into
//! `include/turquoise.h` when TURQUOISE_UPDATE_HEADER=1); the test
//! `header_is_current` compares the two. Also gives `libturquoise.so` its
//! soname (as linger's build.rs does for liblinger).

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("turquoise.h");
    println!("cargo:rerun-if-changed=src/ffi.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=TURQUOISE_UPDATE_HEADER");
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-link-arg=-Wl,-soname,libturquoise.so.{major}");
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
