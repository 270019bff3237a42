//! `cargo run -p layout-check`: each workspace crate's import circles (the
//! files of each, and the imports that tie them), and the C libraries other
//! crates depend on.

use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let crates = root.join("crates");
    let mut names: Vec<String> = std::fs::read_dir(&crates)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    for name in names {
        let g = layout_check::crate_graph(&crates.join(&name).join("src"));
        for c in layout_check::circles(&g) {
            println!("{name}: a circle of {} files: {}", c.len(), c.join(" "));
            for &(a, b) in &g.edges {
                if c.contains(&g.files[a]) && c.contains(&g.files[b]) {
                    let why: Vec<&str> = g.why.get(&(a, b)).map(|w| w.iter().map(String::as_str).collect()).unwrap_or_default();
                    println!("  {} -> {}: {}", g.files[a], g.files[b], why.join(", "));
                }
            }
        }
    }
    let listing = std::fs::read_to_string(root.join("crates/layout-check/layers.txt")).unwrap_or_default();
    for breach in layout_check::layering(&crates, &listing).2 {
        println!("{breach}");
    }
    for (user, lib) in layout_check::c_libraries_depended_on(&crates) {
        println!("{user} depends on {lib}, which builds a C library");
    }
}
