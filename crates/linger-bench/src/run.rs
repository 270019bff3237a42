//! Real, unmodified programs run plain and under `linger-run` (no slice, and
//! 1 ms, 100 us and 20 us slices), the modes interleaved round-robin: what
//! preemption costs a whole program. Every run's output must be identical.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::progress::Progress;
use crate::stats::median;
use crate::Scale;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The program on its own.
    Plain,
    /// `linger-run -- PROGRAM`: main() in a preemptible function with no time limit.
    NoSlice,
    /// `linger-run --slice N -- PROGRAM`, N in microseconds.
    Slice(u64),
}

pub const MODES: [Mode; 5] = [Mode::Plain, Mode::NoSlice, Mode::Slice(1000), Mode::Slice(100), Mode::Slice(20)];

impl Mode {
    /// The duration as given on the command line: "1ms", "100us".
    fn arg(us: u64) -> String {
        if us.is_multiple_of(1000) {
            format!("{}ms", us / 1000)
        } else {
            format!("{us}us")
        }
    }

    pub fn label(self) -> String {
        match self {
            Mode::Plain => "plain".into(),
            Mode::NoSlice => "linger-run --".into(),
            Mode::Slice(us) => format!("--slice {}", Mode::arg(us)),
        }
    }
}

/// The `--stats` line linger-run appends at exit.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunStats {
    pub preemptions: u64,
    pub deferred: u64,
    pub deferrals: u64,
    pub worst_overrun_us: u64,
}

fn parse_stats(text: &str) -> Option<RunStats> {
    let line = text.lines().rev().find(|l| l.contains("stats:"))?;
    let mut s = RunStats::default();
    let mut seen = 0;
    for kv in line.split_once("stats:")?.1.split_whitespace() {
        let (k, v) = kv.split_once('=')?;
        // Other fields (`worst_overrun_in=`, `copy_relocated=`) are names.
        let field = match k {
            "preemptions" => &mut s.preemptions,
            "deferred" => &mut s.deferred,
            "deferrals" => &mut s.deferrals,
            "worst_overrun_us" => &mut s.worst_overrun_us,
            _ => continue,
        };
        *field = v.parse().ok()?;
        seen += 1;
    }
    (seen == 4).then_some(s)
}

/// One run of one program in one mode.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// From just before spawning to the end of wait4, ns.
    pub wall_ns: f64,
    /// The child's user + system time (wait4's rusage), ns.
    pub cpu_ns: f64,
    /// linger-run's counters (not for plain runs).
    pub stats: Option<RunStats>,
}

pub struct ModeResult {
    pub mode: Mode,
    pub samples: Vec<Sample>,
}

impl ModeResult {
    fn walls(&self) -> Vec<f64> {
        self.samples.iter().map(|s| s.wall_ns).collect()
    }
    pub fn wall(&self) -> f64 {
        median(&self.walls())
    }
    pub fn wall_min(&self) -> f64 {
        self.walls().into_iter().fold(f64::INFINITY, f64::min)
    }
    pub fn wall_max(&self) -> f64 {
        self.walls().into_iter().fold(f64::NEG_INFINITY, f64::max)
    }
    pub fn cpu(&self) -> f64 {
        median(&self.samples.iter().map(|s| s.cpu_ns).collect::<Vec<_>>())
    }
    fn per_run(&self, f: fn(&RunStats) -> u64) -> Option<Vec<f64>> {
        self.samples.iter().map(|s| s.stats.as_ref().map(|x| f(x) as f64)).collect()
    }
    /// Median preemptions per run.
    pub fn preemptions(&self) -> Option<f64> {
        self.per_run(|s| s.preemptions).map(|v| median(&v))
    }
    /// Median over runs of preemptions per second of wall time.
    pub fn preemptions_per_s(&self) -> Option<f64> {
        let v: Option<Vec<f64>> =
            self.samples.iter().map(|s| s.stats.map(|x| x.preemptions as f64 / (s.wall_ns / 1e9))).collect();
        v.map(|v| median(&v))
    }
    pub fn deferrals(&self) -> Option<f64> {
        self.per_run(|s| s.deferrals).map(|v| median(&v))
    }
    /// Worst overrun of any taken preemption over all runs, us.
    pub fn worst_overrun_us(&self) -> Option<u64> {
        self.samples.iter().map(|s| s.stats.map(|x| x.worst_overrun_us)).collect::<Option<Vec<_>>>()?.into_iter().max()
    }
}

pub struct ProgResult {
    /// Short name for tables and the plot: "gzip".
    pub name: String,
    /// The command line, for the docs.
    pub shown: String,
    /// What it computes.
    pub what: String,
    /// Anything special about how it runs (environment).
    pub note: Option<String>,
    /// The output every run produced.
    pub output: String,
    /// Lines some run wrote to stderr (first one per mode).
    pub stderr: Vec<String>,
    /// In `MODES` order.
    pub modes: Vec<ModeResult>,
}

impl ProgResult {
    pub fn plain(&self) -> &ModeResult {
        &self.modes[0]
    }
    /// Median wall time of `m` / median plain wall time.
    pub fn ratio(&self, m: &ModeResult) -> f64 {
        m.wall() / self.plain().wall()
    }
    /// Extra wall time per preemption, ns (None without preemptions).
    pub fn extra_per_preemption(&self, m: &ModeResult) -> Option<f64> {
        let p = m.preemptions().filter(|&p| p > 0.0)?;
        Some((m.wall() - self.plain().wall()) / p)
    }
}

pub struct RunBench {
    pub reps: usize,
    pub programs: Vec<ProgResult>,
    /// Programs left out and why.
    pub skipped: Vec<String>,
}

pub enum Outcome {
    Done(RunBench),
    /// The section could not run at all (no linger-run, no programs).
    Skipped(String),
    /// A run failed or gave different output: a bug, reported loudly.
    Failed(String),
}

/// A program to run, found on this machine.
struct Spec {
    name: &'static str,
    path: PathBuf,
    args: Vec<OsString>,
    env: Vec<(&'static str, &'static str)>,
    shown: String,
    what: String,
    note: Option<String>,
}

/// The scratch directory; removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What `run` will do, decided before the progress bar starts.
pub struct Plan {
    linger_run: PathBuf,
    dir: TempDir,
    input: PathBuf,
    input_bytes: usize,
    specs: Vec<Spec>,
    skipped: Vec<String>,
    reps: usize,
}

impl Plan {
    pub fn steps(&self) -> u64 {
        (1 + self.specs.len() * (1 + self.reps * MODES.len())) as u64
    }
}

/// The pure-Python workload: an n-body simulation (five bodies, plain floats
/// and lists, math.sqrt from libm, which linger treats as preemptible),
/// written the ordinary way with a function doing the stepping.
const NBODY: &str = "import math

def advance(bodies, pairs, dt, steps):
    for _ in range(steps):
        for (p, q) in pairs:
            dx = p[0] - q[0]
            dy = p[1] - q[1]
            dz = p[2] - q[2]
            d2 = dx * dx + dy * dy + dz * dz
            mag = dt / (d2 * math.sqrt(d2))
            mp = p[6] * mag
            mq = q[6] * mag
            p[3] -= dx * mq
            p[4] -= dy * mq
            p[5] -= dz * mq
            q[3] += dx * mp
            q[4] += dy * mp
            q[5] += dz * mp
        for p in bodies:
            p[0] += dt * p[3]
            p[1] += dt * p[4]
            p[2] += dt * p[5]

bodies = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 39.478],
          [4.841, -1.160, -0.103, 0.606, 2.812, -0.025, 0.0377],
          [8.343, 4.124, -0.403, -1.010, 1.825, 0.008, 0.0113],
          [12.894, -15.111, -0.223, 1.082, 0.868, -0.011, 0.0017],
          [15.379, -25.919, 0.179, 0.979, 0.594, -0.035, 0.0020]]
pairs = [(bodies[i], bodies[j]) for i in range(5) for j in range(i + 1, 5)]
advance(bodies, pairs, 0.01, STEPS)
print(' '.join('%.9f' % v for p in bodies for v in p[:3]))
";

/// The SQL workload: a recursive CTE hashing a counter, entirely in the
/// library's virtual machine.
fn cte(rows: u64) -> String {
    format!(
        "WITH RECURSIVE c(i, h) AS (SELECT 1, 0 UNION ALL SELECT i + 1, (h * 31 + i) % 1000003 FROM c \
         WHERE i < {rows}) SELECT count(*), sum(h), max(h) FROM c;"
    )
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// `ldd PROGRAM`, or why not.
fn ldd(p: &Path) -> Result<String, String> {
    let o = Command::new("ldd").arg(p).output().map_err(|e| format!("cannot run ldd: {e}"))?;
    if !o.status.success() {
        return Err(format!("ldd {} failed", p.display()));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn linger_run() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    let lr = exe.with_file_name("linger-run");
    let lib = exe.with_file_name("liblinger_run.so");
    for f in [&lr, &lib] {
        if !f.is_file() {
            return Err(format!(
                "{} is missing; build it with `cargo build --release -p linger-run` (`make bench` does)",
                f.display()
            ));
        }
    }
    Ok(lr)
}

/// Finds linger-run and the programs. `Err` skips the section.
pub fn plan(sc: Scale) -> Result<Plan, String> {
    let linger_run = linger_run()?;
    let dir = std::env::temp_dir().join(format!("linger-bench-run.{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dir = TempDir(dir);
    let input = dir.0.join("input.txt");
    let input_bytes = sc.n(16, 8) << 20;
    let mut specs = Vec::new();
    let mut skipped = Vec::new();

    match find_in_path("gzip") {
        Some(path) => specs.push(Spec {
            name: "gzip",
            args: vec!["-6".into(), "-c".into(), input.clone().into()],
            shown: "gzip -6 -c INPUT".into(),
            what: format!(
                "compresses {} MiB of generated pseudo-text (deflate runs in the executable)",
                input_bytes >> 20
            ),
            note: None,
            env: Vec::new(),
            path,
        }),
        None => skipped.push("gzip: not found on PATH".into()),
    }

    let python = PathBuf::from("/usr/bin/python3.11");
    let steps = sc.n(100_000, 50_000);
    match python.is_file().then(|| ldd(&python)) {
        None => skipped.push(format!(
            "python: {} not found (Debian's python3.11 is used: its interpreter is linked into the executable)",
            python.display()
        )),
        Some(Err(e)) => skipped.push(format!("python: {e}")),
        Some(Ok(l)) if l.contains("libpython") => skipped.push(format!(
            "python: {} links libpython dynamically, so the interpreter would be library code, never preempted",
            python.display()
        )),
        Some(Ok(_)) => specs.push(Spec {
            name: "python3.11",
            args: vec!["-S".into(), "-s".into(), "-c".into(), NBODY.replace("STEPS", &steps.to_string()).into()],
            shown: "/usr/bin/python3.11 -S -s -c SCRIPT".into(),
            what: format!(
                "pure-Python n-body simulation, 5 bodies, {steps} steps (interpreter in the executable, \
                 libpython linked statically)"
            ),
            note: None,
            env: Vec::new(),
            path: python,
        }),
    }

    let rows = sc.n(1_500_000, 750_000);
    match find_in_path("sqlite3") {
        None => skipped.push("sqlite3: not found on PATH".into()),
        Some(path) => {
            let query = cte(rows as u64);
            let shared = ldd(&path).map(|l| l.contains("libsqlite3")).unwrap_or(false);
            specs.push(Spec {
                name: "sqlite3",
                args: vec!["-batch".into(), "-init".into(), "/dev/null".into(), ":memory:".into(), query.into()],
                shown: "sqlite3 -batch -init /dev/null :memory: QUERY".into(),
                what: format!("recursive CTE over {rows} rows hashing a counter, in memory"),
                note: shared.then(|| {
                    "LINGER_PREEMPTIBLE_LIBS=libsqlite3 in every mode: the engine is in libsqlite3.so, which \
                     linger would otherwise never preempt"
                        .into()
                }),
                env: if shared { vec![("LINGER_PREEMPTIBLE_LIBS", "libsqlite3")] } else { Vec::new() },
                path,
            });
        }
    }

    if specs.is_empty() {
        return Err(format!("none of the programs is available ({})", skipped.join("; ")));
    }
    Ok(Plan { linger_run, dir, input, input_bytes, specs, skipped, reps: sc.n(9, 3) })
}

/// Deterministic pseudo-text: lines of words drawn with a skewed (roughly
/// Zipf-like) distribution from a generated vocabulary, so that it
/// compresses about as well as ordinary text.
fn generate_text(bytes: usize) -> Vec<u8> {
    let mut state = 0x5EED_1234_ABCD_0042u64;
    let mut next = move || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    const LETTERS: &[u8] = b"etaoinshrdlcumwfgypbvkjxqz";
    let vocab: Vec<Vec<u8>> = (0..8192)
        .map(|_| {
            let len = 2 + (next() % 9) as usize;
            // Skewed letter choice: frequent letters come up more often.
            (0..len).map(|_| LETTERS[((next() % 26) * (next() % 26) / 25) as usize]).collect()
        })
        .collect();
    let mut out = Vec::with_capacity(bytes + 128);
    while out.len() < bytes {
        let words = 6 + next() % 10;
        for w in 0..words {
            let (a, b) = (next() % 8192, next() % 8192);
            out.extend_from_slice(&vocab[(a * b / 8192) as usize]);
            out.push(if w + 1 == words { b'.' } else if next() % 12 == 0 { b',' } else { b' ' });
        }
        out.push(b'\n');
    }
    out.truncate(bytes);
    out
}

/// FNV-1a, 64 bits: enough to tell outputs apart.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3))
}

/// How one run's output is compared and shown.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Output {
    len: usize,
    hash: u64,
    /// The text itself when short and printable.
    text: Option<String>,
}

impl Output {
    fn of(data: &[u8]) -> Output {
        let text = std::str::from_utf8(data)
            .ok()
            .filter(|t| t.len() <= 200 && t.chars().all(|c| !c.is_control() || c == '\n'))
            .map(|t| t.trim_end().to_owned());
        Output { len: data.len(), hash: fnv1a(data), text }
    }

    fn show(&self) -> String {
        match &self.text {
            Some(t) => format!("`{t}`"),
            None => format!("{} bytes, FNV-1a {:016x}", self.len, self.hash),
        }
    }
}

fn wait4(pid: libc::pid_t) -> std::io::Result<(libc::c_int, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid out pointers; pid is our own unreaped child.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn tv_ns(t: libc::timeval) -> f64 {
    t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3
}

/// Runs `spec` once in `mode`; returns the sample, its output and its stderr.
fn run_once(plan: &Plan, spec: &Spec, mode: Mode) -> Result<(Sample, Output, String), String> {
    let dir = &plan.dir.0;
    let (out_path, err_path, stats_path) = (dir.join("stdout"), dir.join("stderr"), dir.join("stats"));
    let _ = std::fs::remove_file(&stats_path);
    let mut cmd = match mode {
        Mode::Plain => Command::new(&spec.path),
        Mode::NoSlice | Mode::Slice(_) => {
            let mut c = Command::new(&plan.linger_run);
            if let Mode::Slice(us) = mode {
                c.arg("--slice").arg(Mode::arg(us));
            }
            let mut st = OsString::from("--stats=");
            st.push(&stats_path);
            c.arg(st).arg("--").arg(&spec.path);
            c
        }
    };
    let create = |p: &Path| File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()));
    cmd.args(&spec.args)
        .envs(spec.env.iter().copied())
        .stdin(Stdio::null())
        .stdout(create(&out_path)?)
        .stderr(create(&err_path)?);
    let t0 = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", spec.path.display()))?;
    let (status, ru) = wait4(child.id() as libc::pid_t).map_err(|e| format!("wait4: {e}"))?;
    let wall_ns = t0.elapsed().as_nanos() as f64;
    // The child is reaped; std's handle must not wait for it again.
    drop(child);
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let desc = format!("{} ({})", spec.name, mode.label());
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let how = if libc::WIFEXITED(status) {
            format!("exit status {}", libc::WEXITSTATUS(status))
        } else {
            format!("signal {}", libc::WTERMSIG(status))
        };
        return Err(format!("{desc} failed with {how}; stderr: {:?}", stderr.lines().take(5).collect::<Vec<_>>()));
    }
    let data = std::fs::read(&out_path).map_err(|e| format!("reading {}: {e}", out_path.display()))?;
    let stats = match mode {
        Mode::Plain => None,
        _ => {
            let text = std::fs::read_to_string(&stats_path).unwrap_or_default();
            Some(parse_stats(&text).ok_or_else(|| {
                format!("{desc}: linger-run wrote no readable --stats line to {} (got {text:?})", stats_path.display())
            })?)
        }
    };
    let cpu_ns = tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
    Ok((Sample { wall_ns, cpu_ns, stats }, Output::of(&data), stderr))
}

pub fn run(plan: Plan, p: &mut Progress) -> Outcome {
    p.step("run: generating the gzip input");
    if plan.specs.iter().any(|s| s.name == "gzip") {
        let text = generate_text(plan.input_bytes);
        if let Err(e) = File::create(&plan.input).and_then(|mut f| f.write_all(&text)) {
            return Outcome::Failed(format!("cannot write {}: {e}", plan.input.display()));
        }
    }
    // A plain warm-up run of each program (page cache, and the reference output).
    let mut reference = Vec::new();
    let mut results: Vec<ProgResult> = Vec::new();
    for spec in &plan.specs {
        p.step(&format!("run: {} warm-up", spec.name));
        match run_once(&plan, spec, Mode::Plain) {
            Ok((_, out, _)) => reference.push(out.clone()),
            Err(e) => return Outcome::Failed(e),
        }
        results.push(ProgResult {
            name: spec.name.into(),
            shown: spec.shown.clone(),
            what: spec.what.clone(),
            note: spec.note.clone(),
            output: reference.last().map(Output::show).unwrap_or_default(),
            stderr: Vec::new(),
            modes: MODES.iter().map(|&mode| ModeResult { mode, samples: Vec::new() }).collect(),
        });
    }
    for r in 0..plan.reps {
        for (i, spec) in plan.specs.iter().enumerate() {
            for (k, &mode) in MODES.iter().enumerate() {
                p.step(&format!("run: round {}/{}, {}, {}", r + 1, plan.reps, spec.name, mode.label()));
                let (sample, out, stderr) = match run_once(&plan, spec, mode) {
                    Ok(x) => x,
                    Err(e) => return Outcome::Failed(e),
                };
                if out != reference[i] {
                    return Outcome::Failed(format!(
                        "{} ({}) gave different output in round {}: {} instead of {}",
                        spec.name,
                        mode.label(),
                        r + 1,
                        out.show(),
                        reference[i].show()
                    ));
                }
                let res = &mut results[i];
                if let Some(line) = stderr.lines().next() {
                    let line = format!("{}: {line}", mode.label());
                    if !res.stderr.contains(&line) {
                        res.stderr.push(line);
                    }
                }
                res.modes[k].samples.push(sample);
            }
        }
    }
    Outcome::Done(RunBench { reps: plan.reps, programs: results, skipped: plan.skipped })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_line() {
        let s = parse_stats("linger-run: stats: preemptions=12 deferred=1 deferrals=3 worst_overrun_us=45 waits_left=0 worst_overrun_in=libz.so.1\n").unwrap();
        assert_eq!((s.preemptions, s.deferred, s.deferrals, s.worst_overrun_us), (12, 1, 3, 45));
        assert!(parse_stats("nothing").is_none());
        assert!(parse_stats("linger-run: stats: preemptions=1").is_none());
    }

    #[test]
    fn text_is_deterministic_and_sized() {
        let a = generate_text(100_000);
        assert_eq!(a.len(), 100_000);
        assert_eq!(a, generate_text(100_000));
        assert!(a.iter().all(|&b| b.is_ascii()));
    }

    #[test]
    fn mode_args() {
        assert_eq!(Mode::Slice(1000).label(), "--slice 1ms");
        assert_eq!(Mode::Slice(100).label(), "--slice 100us");
    }
}
