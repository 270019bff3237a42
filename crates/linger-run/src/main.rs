//! `linger-run [--slice DURATION] [--stats[=FILE]] [--children] [--preempt-blocked] [--argv0 NAME] [--] PROGRAM [ARGS...]`
//!
//! Runs PROGRAM with its `main()` inside a preemptible function: sets
//! `LD_PRELOAD` to `liblinger_run.so` (found next to this binary, or at
//! `$LINGER_RUN_LIB`) plus the `LINGER_RUN_*` variables, and execs PROGRAM in
//! place, so its pid, exit status, signals and standard streams are its own.
//!
//! `#![no_main]`: Rust's normal start-up sets SIGPIPE to "ignore", and that
//! disposition would be inherited by PROGRAM through exec. With our own C
//! `main` nothing about the process changes before the exec. The arguments
//! are parsed by hand: six options with exact exit-status rules, and the
//! program's own arguments passed on byte for byte.

#![no_main]

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use libc::{c_char, c_int};

const USAGE: &str =
    "usage: linger-run [--slice DURATION] [--stats[=FILE]] [--children] [--preempt-blocked] [--isolate LIBS] [--argv0 NAME] [--] PROGRAM [ARGS...]";

const HELP: &str = "\
Runs PROGRAM with its main() inside a linger preemptible function.

Options:
  --slice DURATION  run main() in slices of DURATION (such as 20us, 1ms, 2s),
                    resuming it at once after every preemption, so that it is
                    stopped at arbitrary points all through its run; without
                    it there is no time limit
  --stats[=FILE]    at exit, print how many preemptions happened, how many
                    were deferred, the worst overrun and how many deadlines
                    found main waiting and left it so (to stderr, or appended
                    to FILE: use a FILE for programs that close stderr before
                    they exit, as coreutils do)
  --children        run the programs PROGRAM starts (fork+exec, posix_spawn,
                    system) under linger-run too; by default they run normally
  --preempt-blocked stop main() at the end of a slice even while it waits in
                    a system call (read, poll, sleep...); by default a wait is
                    left alone until it returns, so that a sleeping program
                    costs no CPU time
  --isolate LIBS    run main() (and the threads it starts) with its own copies
                    of the libraries LIBS (`all`, or names such as
                    libz,libexpat), so that main() is stopped inside them
                    too instead of only once their calls return (also:
                    LINGER_ISOLATE=LIBS); `all` leaves libc shared, naming
                    libc (libc,libz) copies it too, except what is
                    process-wide (the heap, threads, exit...); libc's
                    variables the executable took by COPY relocation (a
                    PIE built without -fpic: stdout, optind...) stay the
                    program's, listed by --stats as copy_relocated=
  --argv0 NAME      run PROGRAM with NAME as its argv[0] (as `exec -a NAME`
                    does; by default argv[0] is PROGRAM as given)
  -h, --help        show this help
  -V, --version     show linger-run's version
Each option that takes a value also takes it as --option=VALUE.

Without the command: LD_PRELOAD=.../liblinger_run.so LINGER_RUN_SLICE=20us \\
  [LINGER_RUN_STATS=1|FILE] [LINGER_RUN_CHILDREN=1] [LINGER_RUN_PREEMPT_BLOCKED=1]
  [LINGER_RUN_STACK=8M] [LINGER_ISOLATE=LIBS] PROGRAM
The stack of main() is the soft `ulimit -s` (8 MiB by default).
PROGRAM must be dynamically linked. Exit status: PROGRAM's own; 2 for bad
arguments; 125 if linger-run itself fails; 126 if PROGRAM cannot be run
(not executable, statically linked); 127 if it is not found (as env,
timeout and nice do).
";

/// The reference of the variables (`docs/configuration.md`), its linger
/// and linger-run rows, for `--help`: the one table, not a copy of it.
const CONFIGURATION: &str = include_str!("../../../docs/configuration.md");

/// "Environment:" and a line per `LINGER_*` variable: name, default, meaning.
fn environment() -> String {
    let mut out = String::from("Environment (all of them, with turquoise's: docs/configuration.md):\n");
    for line in CONFIGURATION.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | `NAME` | kind | default | meaning | (option) |
        let [_, name, kind, default, meaning, ..] = cells[..] else { continue };
        let Some(name) = name.strip_prefix("`LINGER_").and_then(|n| n.strip_suffix('`')) else { continue };
        if kind == "(internal)" {
            continue;
        }
        let default = if default.is_empty() { String::new() } else { format!(", default {}", default.replace('`', "")) };
        out.push_str(&format!("  LINGER_{name} ({}{default}): {}\n", kind.replace('`', ""), meaning.replace('`', "")));
    }
    out
}

/// Exit statuses for a PROGRAM that cannot be run, as `env`, `timeout` and
/// `nice` have them.
const CANNOT_RUN: c_int = 126;
const NOT_FOUND: c_int = 127;

fn usage_error(msg: &str) -> c_int {
    eprintln!("linger-run: {msg} ({USAGE})");
    2
}

struct Args {
    slice: Option<String>,
    stats: Option<OsString>,
    children: bool,
    preempt_blocked: bool,
    isolate: Option<String>,
    /// The program's argv[0], if not PROGRAM.
    argv0: Option<CString>,
    /// Index of PROGRAM in argv.
    program: usize,
}

enum Parsed {
    Run(Args),
    Help,
    Version,
    Error(String),
}

fn parse(argv: &[&[u8]]) -> Parsed {
    let mut a = Args { slice: None, stats: None, children: false, preempt_blocked: false, isolate: None, argv0: None, program: 0 };
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i];
        let s = String::from_utf8_lossy(arg);
        if arg == b"--" {
            i += 1;
            break;
        } else if arg == b"-h" || arg == b"--help" {
            return Parsed::Help;
        } else if arg == b"-V" || arg == b"--version" {
            return Parsed::Version;
        } else if arg == b"--slice" {
            let Some(v) = argv.get(i + 1) else { return Parsed::Error("--slice needs a duration".into()) };
            a.slice = Some(String::from_utf8_lossy(v).into_owned());
            i += 2;
            continue;
        } else if arg == b"--argv0" {
            let Some(v) = argv.get(i + 1) else { return Parsed::Error("--argv0 needs a name".into()) };
            a.argv0 = Some(CString::new(*v).expect("argv entries have no NUL"));
            i += 2;
            continue;
        } else if arg == b"--isolate" {
            let Some(v) = argv.get(i + 1) else { return Parsed::Error("--isolate needs libraries (or all)".into()) };
            a.isolate = Some(String::from_utf8_lossy(v).into_owned());
            i += 2;
            continue;
        } else if let Some(v) = arg.strip_prefix(b"--argv0=") {
            a.argv0 = Some(CString::new(v).expect("argv entries have no NUL"));
        } else if let Some(v) = s.strip_prefix("--isolate=") {
            a.isolate = Some(v.to_owned());
        } else if let Some(v) = s.strip_prefix("--slice=") {
            a.slice = Some(v.to_owned());
        } else if arg == b"--stats" {
            a.stats = Some("1".into());
        } else if let Some(v) = arg.strip_prefix(b"--stats=") {
            if v.is_empty() {
                return Parsed::Error("--stats= needs a file name".into());
            }
            a.stats = Some(OsStr::from_bytes(v).to_owned());
        } else if arg == b"--children" {
            a.children = true;
        } else if arg == b"--preempt-blocked" {
            a.preempt_blocked = true;
        } else if arg.starts_with(b"-") {
            return Parsed::Error(format!("unknown option {s:?}"));
        } else {
            break;
        }
        i += 1;
    }
    if i >= argv.len() {
        return Parsed::Error("no PROGRAM given".into());
    }
    if let Some(v) = &a.slice {
        if let Err(e) = linger::parse_duration(v) {
            return Parsed::Error(format!("--slice: {e}"));
        }
    }
    if let Some(v) = &a.isolate {
        if let Err(e) = linger::Selection::parse(v) {
            return Parsed::Error(format!("--isolate: {e}"));
        }
    }
    a.program = i;
    Parsed::Run(a)
}

/// Finds PROGRAM the way execvp will: as a path if it has a slash, else on $PATH.
fn resolve(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else { return false };
    // SAFETY: valid NUL-terminated path.
    p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
}

/// An ELF executable without an interpreter is statically linked: the
/// dynamic loader never runs, so LD_PRELOAD cannot reach it.
fn is_static_elf(p: &Path) -> bool {
    use object::read::elf::{FileHeader, ProgramHeader};
    let Ok(data) = std::fs::read(p) else { return false };
    let Ok(hdr) = object::elf::FileHeader64::<object::Endianness>::parse(&*data) else { return false };
    let Ok(endian) = hdr.endian() else { return false };
    let Ok(phdrs) = hdr.program_headers(endian, &*data) else { return false };
    !phdrs.iter().any(|ph| ph.p_type(endian) == object::elf::PT_INTERP)
}

fn library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("LINGER_RUN_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    let lib = exe.with_file_name("liblinger_run.so");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!("{} is missing (build it with: cargo build --release -p linger-run)", lib.display()))
    }
}

fn run(argv: &[&[u8]], raw_argv: *const *const c_char) -> c_int {
    let a = match parse(argv) {
        Parsed::Help => {
            println!("{USAGE}\n\n{HELP}\n{}", environment());
            return 0;
        }
        Parsed::Version => {
            println!("linger-run {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Parsed::Error(m) => return usage_error(&m),
        Parsed::Run(a) => a,
    };
    let program = OsStr::from_bytes(argv[a.program]);
    let Some(path) = resolve(program) else {
        eprintln!("linger-run: {}: command not found", program.to_string_lossy());
        return NOT_FOUND;
    };
    if !path.exists() {
        eprintln!("linger-run: {}: no such file", path.display());
        return NOT_FOUND;
    }
    if !is_executable(&path) {
        eprintln!("linger-run: {}: not an executable file", path.display());
        return CANNOT_RUN;
    }
    if is_static_elf(&path) {
        eprintln!("linger-run: {} is statically linked; LD_PRELOAD cannot reach its main()", path.display());
        return CANNOT_RUN;
    }
    let lib = match library() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("linger-run: {e}");
            return 125;
        }
    };
    let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
    let mut preload = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    // SAFETY (of the environment updates): single-threaded, before exec.
    std::env::set_var("LD_PRELOAD", preload);
    match &a.slice {
        Some(s) => std::env::set_var("LINGER_RUN_SLICE", s.trim()),
        None => std::env::remove_var("LINGER_RUN_SLICE"),
    }
    match &a.stats {
        Some(s) => std::env::set_var("LINGER_RUN_STATS", s),
        None => std::env::remove_var("LINGER_RUN_STATS"),
    }
    for (on, var) in [(a.children, "LINGER_RUN_CHILDREN"), (a.preempt_blocked, "LINGER_RUN_PREEMPT_BLOCKED")] {
        if on {
            std::env::set_var(var, "1");
        } else {
            std::env::remove_var(var);
        }
    }
    if let Some(libs) = &a.isolate {
        std::env::set_var("LINGER_ISOLATE", libs);
    }
    // Isolating (here or through LINGER_ISOLATE): 15 libsets instead of 11,
    // a tunable only the loader's start reads. The program gets its own
    // value back (see options.rs).
    if std::env::var_os("LINGER_ISOLATE").is_some_and(|v| !v.is_empty()) {
        let was = std::env::var("GLIBC_TUNABLES").ok();
        if !was.as_deref().is_some_and(|t| t.contains("glibc.rtld.nns=")) {
            std::env::set_var("LINGER_RUN_TUNABLES", was.as_deref().unwrap_or("-"));
            let t = match &was {
                Some(t) if !t.is_empty() => format!("{t}:glibc.rtld.nns=16"),
                _ => "glibc.rtld.nns=16".to_owned(),
            };
            std::env::set_var("GLIBC_TUNABLES", t);
        }
    }
    let file = CString::new(OsString::from(program).into_vec()).expect("argv entries have no NUL");
    // The program's argv: ours from PROGRAM on, with NAME in its place.
    // SAFETY: `raw_argv` is main's NULL-terminated argv of argv.len()
    // entries, and `program` indexes into it.
    let mut args: Vec<*const c_char> = (a.program..=argv.len()).map(|i| unsafe { *raw_argv.add(i) }).collect();
    if let Some(name) = &a.argv0 {
        args[0] = name.as_ptr();
    }
    // SAFETY: NUL-terminated file name and a NULL-terminated argv whose
    // strings outlive the call; execvp only returns on failure.
    unsafe { libc::execvp(file.as_ptr(), args.as_ptr()) };
    let e = std::io::Error::last_os_error();
    eprintln!("linger-run: cannot run {}: {e}", program.to_string_lossy());
    if e.kind() == std::io::ErrorKind::NotFound { NOT_FOUND } else { CANNOT_RUN }
}

/// # Safety
/// Called by glibc's start-up with the process's argv.
#[no_mangle]
pub unsafe extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    let argv_slices: Vec<&[u8]> = (0..argc.max(0) as usize)
        // SAFETY: argv has argc valid NUL-terminated entries.
        .map(|i| unsafe { CStr::from_ptr(*argv.add(i)) }.to_bytes())
        .collect();
    run(&argv_slices, argv)
}
