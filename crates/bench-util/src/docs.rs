//! `docs/benchmarks.md` is written by several programs, each owning the
//! text from its marker line to the next program's marker: one of them
//! rewrites its part and keeps the others'.

/// Where green-bench's section (9) starts; it runs to green-bench's notes
/// (which run to the next marker: [`SYNC_MARKER`]).
pub const GREEN_MARKER: &str = "<!-- green-bench: everything below is written by `make bench-green` (green-bench --write-docs) -->";

/// Where sync-bench's section (10) starts; it runs to sync-bench's notes
/// (its `NOTES` marker), which run to the end.
pub const SYNC_MARKER: &str = "<!-- sync-bench: everything below is written by `make bench-sync` (sync-bench --write-docs) -->";

/// `old` with what follows `marker` replaced by `body`, up to the first of
/// the `later` markers after it (those sections are kept) or the end. A
/// document without `marker` gets it before the first `later` marker it
/// has, or at its end.
pub fn replace_section(old: &str, marker: &str, body: &str, later: &[&str]) -> String {
    let body = format!("{marker}\n\n{}\n", body.trim_end_matches('\n'));
    let next_after = |from: usize| later.iter().filter_map(|m| old[from..].find(m).map(|j| from + j)).min();
    match old.find(marker) {
        Some(i) => match next_after(i + marker.len()) {
            Some(j) => format!("{}{body}\n{}", &old[..i], &old[j..]),
            None => format!("{}{body}", &old[..i]),
        },
        None => match next_after(0) {
            Some(j) => format!("{}{body}\n{}", &old[..j], &old[j..]),
            None if old.trim().is_empty() => body,
            None => format!("{}\n\n{body}", old.trim_end()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::replace_section;

    #[test]
    fn a_section_is_replaced_and_the_others_kept() {
        let doc = "head\n\n<!-- a -->\n\nold a\n\n<!-- b -->\n\nold b\n";
        assert_eq!(replace_section(doc, "<!-- a -->", "new a", &["<!-- b -->"]), "head\n\n<!-- a -->\n\nnew a\n\n<!-- b -->\n\nold b\n");
        assert_eq!(replace_section(doc, "<!-- b -->", "new b\n\n", &[]), "head\n\n<!-- a -->\n\nold a\n\n<!-- b -->\n\nnew b\n");
        // Missing: before the first later marker, or at the end.
        assert_eq!(replace_section("head\n<!-- b -->\nb\n", "<!-- a -->", "a", &["<!-- b -->"]), "head\n<!-- a -->\n\na\n\n<!-- b -->\nb\n");
        assert_eq!(replace_section("head\n", "<!-- c -->", "c", &["<!-- d -->"]), "head\n\n<!-- c -->\n\nc\n");
    }
}
