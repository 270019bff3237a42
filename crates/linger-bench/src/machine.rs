//! What the numbers were measured on.

use std::ffi::CStr;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub kernel: String,
    pub glibc: String,
    pub rustc: String,
    pub date: String,
    pub commit: String,
    pub loadavg: String,
    pub max_map_count: String,
    pub linger_signal: i32,
    pub stack_size: usize,
    pub env: Vec<String>,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

pub fn loadavg() -> String {
    read("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_default()
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub fn utc_now() -> String {
    let s = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (y, mo, d) = civil(s.div_euclid(86_400));
    let t = s.rem_euclid(86_400);
    format!("{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02} UTC", t / 3600, t / 60 % 60, t % 60)
}

fn git_commit(root: &Path) -> String {
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    match run(&["rev-parse", "--short=12", "HEAD"]) {
        Some(h) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.trim().is_empty());
            format!("{}{}", h.trim(), if dirty { " (with uncommitted changes)" } else { "" })
        }
        None => "unknown".into(),
    }
}

pub fn collect(root: &Path) -> Machine {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned()))
        .unwrap_or_else(|| "unknown".into());
    // SAFETY: a zeroed utsname is valid; uname fills it with NUL-terminated strings.
    let kernel = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) == 0 {
            format!(
                "{} {} ({})",
                CStr::from_ptr(u.sysname.as_ptr()).to_string_lossy(),
                CStr::from_ptr(u.release.as_ptr()).to_string_lossy(),
                CStr::from_ptr(u.machine.as_ptr()).to_string_lossy()
            )
        } else {
            "unknown".into()
        }
    };
    // SAFETY: glibc returns a pointer to a static NUL-terminated string.
    let glibc = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) }.to_string_lossy().into_owned();
    let cfg = linger::Config::from_env().unwrap_or_default();
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        kernel,
        glibc,
        rustc: env!("BENCH_RUSTC_VERSION").to_owned(),
        date: utc_now(),
        commit: git_commit(root),
        loadavg: loadavg(),
        max_map_count: read("/proc/sys/vm/max_map_count").map(|s| s.trim().to_owned()).unwrap_or_default(),
        linger_signal: cfg.signal_number(),
        stack_size: cfg.default_stack_size(),
        env: std::env::vars().filter(|(k, _)| k.starts_with("LINGER_")).map(|(k, v)| format!("{k}={v}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil(0), (1970, 1, 1));
        assert_eq!(super::civil(19_782), (2024, 2, 29));
        assert_eq!(super::civil(-1), (1969, 12, 31));
    }
}
