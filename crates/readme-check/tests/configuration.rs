//! `docs/configuration.md` is the one reference of the environment: every
//! variable the code reads (a string literal naming a `LINGER_*` or `TURQ_*`
//! variable in linger, linger-run, turquoise, gotcha or libas-safe) has its
//! row there, and every row names a variable the code still reads.

use std::collections::BTreeSet;
use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(std::fs::read_to_string(&p).unwrap());
        }
    }
}

/// The names in `"LINGER_..."` / `"TURQ_..."` string literals.
fn named_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices('"') {
        let rest = &text[i + 1..];
        if !(rest.starts_with("LINGER_") || rest.starts_with("TURQ_")) {
            continue;
        }
        let end = rest.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).unwrap_or(rest.len());
        if rest[end..].starts_with('"') {
            out.insert(rest[..end].to_string());
        }
    }
    out
}

#[test]
fn every_variable_read_is_in_the_reference_and_every_row_is_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut texts = Vec::new();
    for c in ["linger", "linger-run", "turquoise", "gotcha", "as-safe"] {
        sources(&root.join("crates").join(c).join("src"), &mut texts);
    }
    let read: BTreeSet<String> = texts.iter().flat_map(|t| named_in(t)).collect();
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let rows: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .filter(|n| n.starts_with("LINGER_") || n.starts_with("TURQ_"))
        .collect();
    assert!(read.len() >= 20, "found only {read:?}: the scan is broken");
    let missing: Vec<_> = read.difference(&rows).collect();
    assert!(missing.is_empty(), "read by the code but not in docs/configuration.md: {missing:?}");
    let stale: Vec<_> = rows.difference(&read).collect();
    assert!(stale.is_empty(), "in docs/configuration.md but read nowhere: {stale:?}");
}
