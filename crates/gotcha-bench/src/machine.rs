//! The machine a run measured: printed with every result, since the numbers
//! mean little without it (a shared 2-core VM here).

use std::ffi::CStr;
use std::path::Path;
use std::process::Command;

#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub glibc: String,
    pub rustc: String,
    pub libraries: String,
    pub date: String,
    pub commit: String,
    /// Environment that changes what is measured (`GLIBC_TUNABLES`, `LINGER_*`).
    pub env: Vec<String>,
}

pub use bench_util::loadavg;

fn now_utc() -> String {
    // SAFETY: time(NULL) and gmtime_r into a zeroed struct we own; strftime
    // writes at most the buffer's length.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::gmtime_r(&t, &mut tm);
        let mut buf = [0u8; 64];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c"%Y-%m-%d %H:%M:%S UTC".as_ptr(), &tm);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let o = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

pub fn collect(root: &Path) -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned())))
        .unwrap_or_else(|| "unknown".into());
    let proc = |f: &str| std::fs::read_to_string(format!("/proc/sys/kernel/{f}")).map(|s| s.trim().to_owned()).unwrap_or_else(|_| "?".into());
    let kernel = format!("{} {} ({})", proc("ostype"), proc("osrelease"), std::env::consts::ARCH);
    // SAFETY: glibc returns a static NUL-terminated string.
    let glibc = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy().into_owned();
    let commit = match git(root, &["rev-parse", "--short=12", "HEAD"]) {
        Some(h) => {
            let dirty = git(root, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{h} (with uncommitted changes)")
            } else {
                h
            }
        }
        None => "unknown".into(),
    };
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        kernel,
        glibc,
        rustc: env!("BENCH_RUSTC_VERSION").to_owned(),
        libraries: crate::png::versions(),
        date: now_utc(),
        commit,
        env: std::env::vars()
            .filter(|(k, _)| k == "GLIBC_TUNABLES" || k.starts_with("LINGER_"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    }
}
