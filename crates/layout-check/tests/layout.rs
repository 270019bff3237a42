//! The workspace's structure, held to what `known-circles.txt` records
//! (issue 29): no import circle between the files of a crate except those
//! listed, each exactly as listed, so that a new circle, or a listed one
//! that grows, fails here; and one that shrinks or is gone must be taken
//! off the list (the list only gets shorter). `cargo run -p layout-check`
//! shows each circle's imports.

use std::collections::BTreeSet;
use std::path::Path;

fn crates_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_import_circles_but_the_listed_ones() {
    let dir = crates_dir();
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).expect("crates/").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut found = BTreeSet::new();
    for name in &names {
        for c in layout_check::circles(&layout_check::crate_graph(&dir.join(name).join("src"))) {
            found.insert(format!("{name}: {}", c.join(" ")));
        }
    }
    let listed: BTreeSet<String> = include_str!("../known-circles.txt")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    let new: Vec<_> = found.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "import circles differ from crates/layout-check/known-circles.txt (`cargo run -p layout-check` shows their imports)\n\
         found, not listed (a new circle, or a listed one that changed):\n{}\n\
         listed, not found (shrunk or gone: update the list):\n{}",
        new.iter().map(|s| format!("  {s}")).collect::<Vec<_>>().join("\n"),
        gone.iter().map(|s| format!("  {s}")).collect::<Vec<_>>().join("\n"),
    );
}

#[test]
fn no_crate_depends_on_a_crate_that_builds_a_c_library() {
    let bad = layout_check::c_libraries_depended_on(&crates_dir());
    assert!(
        bad.is_empty(),
        "a crate with a cdylib or staticlib target gets an rlib without a hash in its name, and dependents can \
         link two copies of its dependencies; build C libraries in crates of their own (crates/linger-c): {bad:?}"
    );
}

#[test]
fn layered_crates_import_only_downward() {
    let (names, files, breaches) = layout_check::layering(&crates_dir(), include_str!("../layers.txt"));
    assert!(["linger", "turquoise", "gotcha"].iter().all(|n| names.iter().any(|m| m == n)), "layers.txt lists {names:?}");
    assert!(files > 90, "the layered crates' files were not found");
    assert!(breaches.is_empty(), "imports against the layering:\n{}", breaches.join("\n"));
}
