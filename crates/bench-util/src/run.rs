//! Peers built at run time (Go with `go build`, C with `cc`), the versions
//! and commit a run records, and the median and spread of samples.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `cmd args`' standard output, trimmed, if it ran and succeeded.
pub fn command(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

/// The workspace's commit (12 digits), "(with uncommitted changes)" when
/// tracked files differ from it.
pub fn commit() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.to_string_lossy();
    let commit = command("git", &["-C", &root, "rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = command("git", &["-C", &root, "status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit} (with uncommitted changes)")
    } else {
        commit
    }
}

/// `rustc --version`.
pub fn rustc() -> String {
    command("rustc", &["--version"]).unwrap_or_else(|| "?".into())
}

/// "2026-11-26 08:47:58 UTC".
pub fn date() -> String {
    command("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_default()
}

/// The Go program `src` (one file, standard library only) built as `out`,
/// or why it cannot be: no `go`, or the build failed.
pub fn build_go(src: &Path, out: &Path) -> Result<PathBuf, String> {
    let o = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(out)
        .arg(src)
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| format!("`go` cannot be run ({e})"))?;
    if !o.status.success() {
        return Err(format!("`go build` failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
    }
    Ok(out.to_owned())
}

/// `go version`, or why there is none.
pub fn go_version() -> String {
    Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().trim_start_matches("go version ").to_owned())
        .unwrap_or_else(|| "not installed".into())
}

/// The C program `src` built as `out` with `cc -O2 -pthread` and `libs`
/// (e.g. `-lck`) after it, or why it cannot be (no `cc`, or the build
/// failed: its last line of errors).
pub fn build_c(src: &Path, out: &Path, libs: &[&str]) -> Result<PathBuf, String> {
    let o = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(out)
        .arg(src)
        .args(libs)
        .output()
        .map_err(|e| format!("`cc` cannot be run ({e})"))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        return Err(format!("`cc` failed: {}", err.lines().find(|l| l.contains("error")).unwrap_or(err.trim())));
    }
    Ok(out.to_owned())
}

/// Median and spread of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub p10: f64,
    pub p90: f64,
    pub max: f64,
}

impl Spread {
    /// None for no samples (NaNs are left out).
    pub fn of(samples: &[f64]) -> Option<Spread> {
        let mut s: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        // Nearest rank.
        let q = |q: f64| s[((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Spread { n: s.len(), median: q(0.5), min: s[0], p10: q(0.1), p90: q(0.9), max: s[s.len() - 1] })
    }
}

#[cfg(test)]
mod tests {
    use super::Spread;

    #[test]
    fn nearest_rank_spread() {
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let s = Spread::of(&v).unwrap();
        assert_eq!((s.n, s.median, s.min, s.p10, s.p90, s.max), (10, 5.0, 1.0, 1.0, 9.0, 10.0));
        assert!(Spread::of(&[f64::NAN]).is_none());
    }
}
