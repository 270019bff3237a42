//! Runs the READMEs' snippets (compiled by the crate itself), but those
//! that isolate libpng, which this test does not load: compiled only.

#[test]
fn every_readme_snippet_runs() {
    for (place, text, run) in readme_check::SNIPPETS {
        if text.contains("linger::isolate(") {
            continue;
        }
        run().unwrap_or_else(|e| panic!("the snippet at {place}: {e}"));
    }
}
