//! Gives `libturquoise.so` its versioned soname (see `make install` and
//! crates/linger-c/build.rs).

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-link-arg=-Wl,-soname,libturquoise.so.{major}");
}
