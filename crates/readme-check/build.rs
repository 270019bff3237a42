//! Cuts the ```rust blocks out of the READMEs (the project's, then each
//! published crate's), in order, and writes each into
//! `$OUT_DIR/snippets.rs` as the body of a function, after its context
//! from `preludes.txt` (the names a snippet uses without defining them:
//! the reader's own functions and data). A snippet added to a README
//! without a section there fails the build, saying which.

use std::fmt::Write;

/// The READMEs, from the workspace's root.
const READMES: [&str; 5] = [
    "README.md",
    "crates/linger/README.md",
    "crates/turquoise/README.md",
    "crates/gotcha/README.md",
    "crates/turquoise-macros/README.md",
];

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let preludes = format!("{}/preludes.txt", env!("CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed={preludes}");
    let preludes = sections(&std::fs::read_to_string(&preludes).expect("preludes.txt"));
    let mut out = String::new();
    let mut places = Vec::new();
    for readme in READMES {
        let path = format!("{root}/{readme}");
        println!("cargo:rerun-if-changed={path}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{readme}: {e}"));
        let mut block: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut block {
                None if line.trim_end() == "```rust" => block = Some((i + 1, String::new())),
                None => {}
                Some((at, body)) if line.trim_end() == "```" => {
                    let n = places.len() + 1;
                    let place = format!("{readme}:{at}");
                    let prelude = preludes.get(n - 1).unwrap_or_else(|| panic!("preludes.txt has no section \"== {n}\" for the snippet at {place}"));
                    writeln!(out, "/// The snippet at {place}.").unwrap();
                    writeln!(out, "pub fn snippet_{n}() -> Result<(), Box<dyn std::error::Error>> {{").unwrap();
                    writeln!(out, "{prelude}    {{\n{body}    }}\n    #[allow(unreachable_code)]\n    Ok(())\n}}\n").unwrap();
                    places.push((place, body.clone()));
                    block = None;
                }
                Some((_, body)) => {
                    body.push_str("        ");
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
        assert!(block.is_none(), "{readme}: a ```rust block is not closed");
    }
    let n = places.len();
    assert_eq!(preludes.len(), n, "preludes.txt has {} sections for the READMEs' {n} snippets", preludes.len());
    writeln!(out, "/// Every snippet: where it is, its text, and the function that holds it.").unwrap();
    writeln!(out, "pub const SNIPPETS: [(&str, &str, fn() -> Result<(), Box<dyn std::error::Error>>); {n}] = [").unwrap();
    for (i, (place, body)) in places.iter().enumerate() {
        writeln!(out, "    ({place:?}, {body:?}, snippet_{}),", i + 1).unwrap();
    }
    writeln!(out, "];").unwrap();
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("snippets.rs");
    std::fs::write(dest, out).unwrap();
}

/// The sections of `preludes.txt`, in order, each indented as a function
/// body; checks that they are numbered 1, 2, ...
fn sections(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("== ") {
            let n = n.split_whitespace().next().and_then(|n| n.parse::<usize>().ok());
            assert_eq!(n, Some(out.len() + 1), "preludes.txt: sections must be numbered in order ({line})");
            out.push(String::new());
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let s = out.last_mut().expect("preludes.txt: a line before the first \"== 1\"");
            s.push_str("    ");
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}
