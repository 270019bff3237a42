//! The workspace's structure, read from its code: which file of a crate
//! imports which, the import circles among them, and which crates build C
//! libraries. `tests/layout.rs` holds the workspace to it (issue 29).
//!
//! An import is any path into the crate's own modules: `crate::`, `super::`
//! and `self::` paths, `use` trees with their groups, and paths that start
//! with a child module's name (`green::spawn` in `thread/mod.rs`), outside
//! comments, string literals and `#[cfg(test)]` items. A path is charged to
//! the deepest module file it names; a name that a module re-exports
//! (`pub use`) is followed to where it is defined. As in the project's
//! drawings, the crate root (`lib.rs`, `main.rs`) is the crate's face: its
//! own imports and imports of items it defines are not counted.
//!
//! Written by hand: the crates that draw module graphs (cargo-modules and
//! the like) are tools to install, not libraries a test can call, and this
//! needs only the imports, not name resolution.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path, from the crate root (`["thread", "green"]`).
type ModPath = Vec<String>;

/// One crate's files and imports.
#[derive(Debug, Default)]
pub struct Graph {
    /// Paths relative to the crate's `src`, in the order indexed below.
    pub files: Vec<String>,
    /// (importer, imported) file indices.
    pub edges: BTreeSet<(usize, usize)>,
    /// The paths behind each edge, as the importer wrote them.
    pub why: BTreeMap<(usize, usize), BTreeSet<String>>,
}

/// The files of the crate whose sources are in `src` (its `src/bin`
/// programs aside: each is a root of its own) and their imports.
pub fn crate_graph(src: &Path) -> Graph {
    let mut paths = Vec::new();
    collect(src, src, &mut paths);
    paths.sort();
    let mut by_mod: BTreeMap<ModPath, usize> = BTreeMap::new();
    let mut roots = BTreeSet::new();
    let mut texts = Vec::new();
    for (i, rel) in paths.iter().enumerate() {
        let m = module_of(rel);
        if m.is_empty() {
            roots.insert(i);
        }
        // Two roots (`lib.rs` and `main.rs`) share the empty path; either
        // serves for re-exports.
        by_mod.entry(m).or_insert(i);
        let text = std::fs::read_to_string(src.join(rel)).unwrap_or_default();
        texts.push(skip_test_items(&clean(&text)));
    }
    let mods: Vec<ModPath> = paths.iter().map(|p| module_of(p)).collect();
    // Re-exports: (file, name) -> the absolute path it stands for.
    let mut reexports: BTreeMap<(usize, String), ModPath> = BTreeMap::new();
    for (i, t) in texts.iter().enumerate() {
        for (path, alias, public) in uses(t) {
            if !public {
                continue;
            }
            if let Some(abs) = absolute(&path, &mods[i], &by_mod) {
                let name = alias.unwrap_or_else(|| abs.last().cloned().unwrap_or_default());
                if name != "*" && name != "self" {
                    reexports.insert((i, name), abs);
                }
            }
        }
    }
    let mut edges = BTreeSet::new();
    let mut why = BTreeMap::new();
    for (i, t) in texts.iter().enumerate() {
        if roots.contains(&i) {
            continue;
        }
        let mut written: Vec<ModPath> = uses(t).into_iter().map(|(p, _, _)| p).collect();
        written.extend(bare_paths(t));
        for p in written {
            let Some(abs) = absolute(&p, &mods[i], &by_mod) else { continue };
            if let Some(j) = resolve(&abs, &by_mod, &reexports, 8) {
                if j != i && !roots.contains(&j) {
                    edges.insert((i, j));
                    why.entry((i, j)).or_insert_with(BTreeSet::new).insert(p.join("::"));
                }
            }
        }
    }
    Graph { files: paths, edges, why }
}

/// Every crate `listing` (layers.txt) lists, read from `crates_dir`: the
/// crates' names, their files counted, and each breach of their layering
/// (a folder not among the layers, an import from a lower layer into a
/// higher one), said in a line.
pub fn layering(crates_dir: &Path, listing: &str) -> (Vec<String>, usize, Vec<String>) {
    let (mut names, mut files, mut breaches) = (Vec::new(), 0, Vec::new());
    for line in listing.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let Some((name, rest)) = line.split_once(':') else { continue };
        let layers: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
        let g = crate_graph(&crates_dir.join(name).join("src"));
        for f in unlisted_folders(&g, &layers) {
            breaches.push(format!("{name}: folder {f}/ is not among its layers in crates/layout-check/layers.txt"));
        }
        for (a, b, why) in upward_imports(&g, &layers) {
            breaches.push(format!("{name}: {a} imports {b}, a higher layer: {}", why.join(", ")));
        }
        files += g.files.len();
        names.push(name.to_string());
    }
    (names, files, breaches)
}

/// The layer of a file of `g` (its index in `layers`), `layers.len()` for
/// the files outside every layer folder, None for a folder not listed.
fn layer_of(file: &str, layers: &[String]) -> Option<usize> {
    match file.split_once('/') {
        None => Some(layers.len()),
        Some((dir, _)) => layers.iter().position(|l| l == dir),
    }
}

/// Imports from a lower layer into a higher one: (importer, imported, the
/// paths written), each a breach of the layering.
pub fn upward_imports(g: &Graph, layers: &[String]) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for &(a, b) in &g.edges {
        let (Some(la), Some(lb)) = (layer_of(&g.files[a], layers), layer_of(&g.files[b], layers)) else { continue };
        if la < lb {
            let why = g.why.get(&(a, b)).map(|w| w.iter().cloned().collect()).unwrap_or_default();
            out.push((g.files[a].clone(), g.files[b].clone(), why));
        }
    }
    out
}

/// Folders of a layered crate that are not among its layers (a new folder
/// must take its place in the order).
pub fn unlisted_folders(g: &Graph, layers: &[String]) -> Vec<String> {
    let dirs: BTreeSet<String> =
        g.files.iter().filter_map(|f| f.split_once('/')).map(|(d, _)| d.to_string()).collect();
    dirs.into_iter().filter(|d| !layers.contains(d)).collect()
}

/// The import circles of `g`: each a sorted list of its files (strongly
/// connected components of more than one file), sorted.
pub fn circles(g: &Graph) -> Vec<Vec<String>> {
    let n = g.files.len();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in &g.edges {
        next[a].push(b);
    }
    let mut t = Tarjan { next: &next, index: vec![None; n], low: vec![0; n], on: vec![false; n], stack: Vec::new(), count: 0, out: Vec::new() };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .out
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|i| g.files[i].clone()).collect();
            names.sort();
            names
        })
        .collect();
    out.sort();
    out
}

/// Tarjan's strongly connected components (recursive: a crate has at most
/// a few dozen files).
struct Tarjan<'a> {
    next: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on: Vec<bool>,
    stack: Vec<usize>,
    count: usize,
    out: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.count);
        self.low[v] = self.count;
        self.count += 1;
        self.stack.push(v);
        self.on[v] = true;
        for k in 0..self.next[v].len() {
            let w = self.next[v][k];
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut c = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            self.out.push(c);
        }
    }
}

fn collect(src: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p != src.join("bin") {
                collect(src, &p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            if let Ok(rel) = p.strip_prefix(src) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
}

/// `thread/green.rs` -> `[thread, green]`; `thread/mod.rs` -> `[thread]`;
/// `lib.rs`, `main.rs` -> `[]`.
fn module_of(rel: &str) -> ModPath {
    let p = PathBuf::from(rel.strip_suffix(".rs").unwrap_or(rel));
    let mut m: ModPath = p.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if m.last().is_some_and(|s| s == "mod") || (m.len() == 1 && (m[0] == "lib" || m[0] == "main")) {
        m.pop();
    }
    m
}

/// The absolute module path of `path` as written in module `here`, or
/// None if it leads outside the crate.
fn absolute(path: &[String], here: &ModPath, by_mod: &BTreeMap<ModPath, usize>) -> Option<ModPath> {
    let first = path.first()?;
    let mut rest = &path[1..];
    let mut base: ModPath = match first.as_str() {
        "crate" | "$crate" => Vec::new(),
        "self" => here.clone(),
        "super" => {
            let mut b = here.clone();
            b.pop()?;
            while rest.first().is_some_and(|s| s == "super") {
                b.pop()?;
                rest = &rest[1..];
            }
            b
        }
        _ => {
            // A child module of this one, named directly.
            let mut child = here.clone();
            child.push(first.clone());
            if !by_mod.contains_key(&child) {
                return None;
            }
            child
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file that `abs` lands in: its deepest module, or where that
/// module's re-export of the next name leads.
fn resolve(abs: &[String], by_mod: &BTreeMap<ModPath, usize>, reexports: &BTreeMap<(usize, String), ModPath>, depth: u32) -> Option<usize> {
    let mut m: ModPath = Vec::new();
    let mut i = 0;
    while i < abs.len() {
        let mut deeper = m.clone();
        deeper.push(abs[i].clone());
        if !by_mod.contains_key(&deeper) {
            break;
        }
        m = deeper;
        i += 1;
    }
    let file = *by_mod.get(&m)?;
    if i < abs.len() && depth > 0 {
        if let Some(target) = reexports.get(&(file, abs[i].clone())) {
            let mut t = target.clone();
            t.extend(abs[i + 1..].iter().cloned());
            if t.as_slice() != abs {
                return resolve(&t, by_mod, reexports, depth - 1).or(Some(file));
            }
        }
    }
    Some(file)
}

/// The text with comments blanked, and string and character literals
/// emptied (newlines kept, so that nothing else moves).
pub fn clean(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push(b'\n');
                    }
                    i += 1;
                }
            }
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && !ident_byte(i.checked_sub(1).map(|j| b[j])) {
            // A raw string: r"...", r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match b.get(j) {
                    None => break,
                    Some(b'"') if b[j + 1..].iter().take(hashes).filter(|&&x| x == b'#').count() == hashes => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(b'\n') => out.push(b'\n'),
                    _ => {}
                }
                j += 1;
            }
            out.extend_from_slice(b"\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    out.push(b'\n');
                }
                i += 1;
            }
            i += 1;
            out.extend_from_slice(b"\"\"");
        } else if c == b'\'' {
            // A character literal ('a', '\n', '\u{1F600}'), or a lifetime.
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.extend_from_slice(b"' '");
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
                out.extend_from_slice(b"' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ident_byte(c: Option<u8>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The text without its `#[cfg(test)]` items (a test module may import
/// whatever it tests from, above or below).
fn skip_test_items(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at its block's closing brace, or at a `;` met first.
        let b = after.as_bytes();
        let mut depth = 0usize;
        let mut end = b.len();
        for (k, &c) in b.iter().enumerate().skip("#[cfg(test)]".len()) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Identifier-and-`::` tokens of a cleaned text.
fn tokens(s: &str) -> Vec<(usize, String)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' || (c == b'$' && ident_byte(b.get(i + 1).copied())) {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((start, s[start..i].to_string()));
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push((i, "::".into()));
            i += 2;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push((i, (c as char).to_string()));
            i += 1;
        }
    }
    out
}

/// The `use` declarations of a cleaned text: each leaf path (`self` leaves
/// resolved to their group's prefix), its alias, and whether it is a
/// re-export (`pub use` in any form).
fn uses(s: &str) -> Vec<(ModPath, Option<String>, bool)> {
    let t = tokens(s);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i].1 == "use" && (i == 0 || t[i - 1].1 != "::") {
            // `pub use`, `pub(crate) use`, `pub(super) use`...
            let public = i >= 1 && (t[i - 1].1 == "pub" || (t[i - 1].1 == ")" && i >= 4 && t[i - 4].1 == "pub"));
            let mut j = i + 1;
            if t.get(j).is_some_and(|x| x.1 == "::") {
                j += 1; // `use ::std::...`: an outside crate
                skip_to_semicolon(&t, &mut j);
                i = j;
                continue;
            }
            let mut leaves = Vec::new();
            tree(&t, &mut j, Vec::new(), &mut leaves);
            out.extend(leaves.into_iter().map(|(p, a)| (p, a, public)));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

fn skip_to_semicolon(t: &[(usize, String)], j: &mut usize) {
    while *j < t.len() && t[*j].1 != ";" {
        *j += 1;
    }
}

/// Parses one use tree at `t[*j]` under `prefix` into `leaves`.
fn tree(t: &[(usize, String)], j: &mut usize, prefix: ModPath, leaves: &mut Vec<(ModPath, Option<String>)>) {
    let mut path = prefix;
    loop {
        let Some((_, tok)) = t.get(*j) else { return };
        if tok == "{" {
            *j += 1;
            loop {
                match t.get(*j).map(|x| x.1.as_str()) {
                    None => return,
                    Some("}") => {
                        *j += 1;
                        return;
                    }
                    Some(",") => *j += 1,
                    _ => tree(t, j, path.clone(), leaves),
                }
            }
        }
        if tok == "*" {
            *j += 1;
            leaves.push((path, None));
            return;
        }
        if !is_ident(tok) {
            return;
        }
        if tok == "self" && !path.is_empty() {
            // `a::{self, b}`: the module `a` itself.
        } else {
            path.push(tok.clone());
        }
        *j += 1;
        if t.get(*j).is_some_and(|x| x.1 == "::") {
            *j += 1;
            continue;
        }
        let mut alias = None;
        if t.get(*j).is_some_and(|x| x.1 == "as") {
            alias = t.get(*j + 1).map(|x| x.1.clone());
            *j += 2;
        }
        leaves.push((path, alias));
        return;
    }
}

fn is_ident(s: &str) -> bool {
    s.bytes().next().is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b'$')
}

/// Paths outside `use` declarations that start a chain of `::` (the
/// caller keeps those that lead into the crate).
fn bare_paths(s: &str) -> Vec<ModPath> {
    let t = tokens(s);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i].1 == "use" {
            skip_to_semicolon(&t, &mut i);
            continue;
        }
        let starts = is_ident(&t[i].1) && t.get(i + 1).is_some_and(|x| x.1 == "::") && (i == 0 || t[i - 1].1 != "::");
        if !starts {
            i += 1;
            continue;
        }
        let mut p = vec![t[i].1.clone()];
        let mut j = i + 1;
        while t.get(j).is_some_and(|x| x.1 == "::") && t.get(j + 1).is_some_and(|x| is_ident(&x.1)) {
            p.push(t[j + 1].1.clone());
            j += 2;
        }
        // (`x.y::<T>()`: a turbofish, not a path.)
        if p.len() >= 2 {
            out.push(p);
        }
        i = j;
    }
    out
}

/// Workspace crates (directory names under `crates/`) that build a C
/// library (`cdylib` or `staticlib`) and that another workspace crate
/// depends on: each such dependency links a copy of the C library's crate
/// that has no hash in its name.
pub fn c_libraries_depended_on(crates_dir: &Path) -> Vec<(String, String)> {
    let mut manifests = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(crates_dir) {
        for e in rd.flatten() {
            if let Ok(text) = std::fs::read_to_string(e.path().join("Cargo.toml")) {
                manifests.insert(e.file_name().to_string_lossy().into_owned(), text);
            }
        }
    }
    let builds_c = |text: &str| text.lines().any(|l| l.trim_start().starts_with("crate-type") && (l.contains("cdylib") || l.contains("staticlib")));
    let mut out = Vec::new();
    for (name, text) in &manifests {
        for l in text.lines() {
            let Some(at) = l.find("path = \"../") else { continue };
            let dep = l[at + "path = \"../".len()..].split('"').next().unwrap_or_default().to_string();
            if manifests.get(&dep).is_some_and(|t| builds_c(t)) {
                out.push((name.clone(), dep));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_are_read_leaf_by_leaf() {
        let t = clean("pub(crate) use crate::a::{b::{C, self}, d as e, f::*};\nuse std::x;\n// use crate::z;\nlet s = \"crate::q\";");
        let u = uses(&t);
        let leaves: Vec<(String, Option<String>, bool)> = u.into_iter().map(|(p, a, public)| (p.join("::"), a, public)).collect();
        assert_eq!(
            leaves,
            vec![
                ("crate::a::b::C".into(), None, true),
                ("crate::a::b".into(), None, true),
                ("crate::a::d".into(), Some("e".into()), true),
                ("crate::a::f".into(), None, true),
                ("std::x".into(), None, false),
            ]
        );
    }

    #[test]
    fn bare_paths_and_test_items() {
        let t = skip_test_items(&clean("fn f() { crate::a::b(); super::c::D::new(); x.y::<T>(); }\n#[cfg(test)]\nmod tests { use crate::z; }\n"));
        let p: Vec<String> = bare_paths(&t).into_iter().map(|p| p.join("::")).collect();
        assert_eq!(p, vec!["crate::a::b", "super::c::D::new"]);
    }
}
