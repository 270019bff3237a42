//! The C headers, generated from the crates' C API sources by cbindgen:
//! `include/linger.h` from `crates/linger/src/ffi.rs` and
//! `src/state/stats.rs`, `include/turquoise.h` from
//! `crates/turquoise/src/ffi.rs`, each with its configuration beside this
//! crate (`linger.toml`, `turquoise.toml`). `cargo run -p linger-headers`
//! (`make header`) writes them; the test `headers_are_current` fails while a
//! committed one differs.

use std::path::{Path, PathBuf};

/// One header: its file under `include/`, its configuration, and the
/// sources it is made from (relative to `crates/`).
pub struct Header {
    pub file: &'static str,
    config: &'static str,
    sources: &'static [&'static str],
}

/// Every header the project ships.
pub const HEADERS: [Header; 2] = [
    // Only the C API's own files: the libc functions linger interposes are
    // exported too, but are not part of the header.
    Header { file: "linger.h", config: "linger.toml", sources: &["linger/src/ffi.rs", "linger/src/state/stats.rs"] },
    Header { file: "turquoise.h", config: "turquoise.toml", sources: &["turquoise/src/ffi.rs"] },
];

fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's root.
pub fn root() -> PathBuf {
    here().join("../..")
}

impl Header {
    /// The header's text as generated now.
    pub fn generate(&self) -> Result<String, String> {
        let config = cbindgen::Config::from_file(here().join(self.config)).map_err(|e| format!("{}: {e}", self.config))?;
        let mut b = cbindgen::Builder::new().with_config(config);
        for s in self.sources {
            b = b.with_src(root().join("crates").join(s));
        }
        let bindings = b.generate().map_err(|e| format!("{}: {e}", self.file))?;
        let mut out = Vec::new();
        bindings.write(&mut out);
        String::from_utf8(out).map_err(|e| format!("{}: {e}", self.file))
    }

    /// Where the committed header is.
    pub fn path(&self) -> PathBuf {
        root().join("include").join(self.file)
    }
}
