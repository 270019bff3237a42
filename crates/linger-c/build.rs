//! Gives `liblinger.so` its versioned soname (see `make install`), so that
//! programs built against the installed library record `liblinger.so.0` and
//! a later incompatible major version can be installed beside it. Not
//! `rustc-link-arg-cdylib`: cargo hands that one to dependents' cdylibs too.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-link-arg=-Wl,-soname,liblinger.so.{major}");
}
