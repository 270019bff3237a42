//! Why gotcha rewrites GOT slots rather than binding through `LD_AUDIT`'s
//! `la_symbind64` (docs/safety.md, "gotcha"): on this glibc the audit
//! interface never sees a `GLOB_DAT` binding (C built with `-fno-plt`, and
//! every call a Rust program makes into a C library), and with
//! `glibc.rtld.nns=16` (needed for 15 libsets) a program with an audit
//! module does not even start.

use std::path::{Path, PathBuf};
use std::process::Command;

fn build(dir: &Path, out: &str, args: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/audit");
    let p = dir.join(out);
    let st = Command::new("cc").args(args).arg("-o").arg(&p).current_dir(&src).status().unwrap();
    assert!(st.success(), "cc {args:?}");
    p
}

/// Runs `bin` with the audit module: (exit status, stderr).
fn run(bin: &Path, audit: &Path, tunables: Option<&str>) -> (i32, String) {
    let mut c = Command::new(bin);
    c.env("LD_AUDIT", audit).env_remove("GLIBC_TUNABLES");
    if let Some(t) = tunables {
        c.env("GLIBC_TUNABLES", t);
    }
    let o = c.output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn la_symbind64_misses_glob_dat_bindings_and_the_namespace_tunable_disables_auditing() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("audit-route");
    std::fs::create_dir_all(&dir).unwrap();
    let audit = build(&dir, "libaudit.so", &["-shared", "-fPIC", "-O2", "audit.c"]);
    let plt = build(&dir, "plt", &["-O2", "call.c", "-lz"]);
    let now = build(&dir, "now", &["-O2", "-Wl,-z,now", "call.c", "-lz"]);
    let noplt = build(&dir, "noplt", &["-O2", "-fno-plt", "call.c", "-lz"]);
    let bound = |b: &Path| {
        let (code, err) = run(b, &audit, None);
        assert_eq!(code, 0, "{err}");
        err.contains("audit: bound zlibVersion")
    };
    assert!(bound(&plt), "a lazy JUMP_SLOT is audited");
    assert!(bound(&now), "a JUMP_SLOT bound at start is audited");
    assert!(!bound(&noplt), "a GLOB_DAT binding was audited: revisit docs/safety.md");
    // The tunable that gives 15 libsets leaves no namespace for an audit
    // module: the loader refuses to start the program at all.
    let (code, err) = run(&plt, &audit, Some("glibc.rtld.nns=16"));
    assert!(code != 0 && err.contains("0 are supported"), "the audit module loaded with nns=16: revisit docs/safety.md ({code}: {err})");
}
