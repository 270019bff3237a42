//! green-bench: issue 12's benchmarks (see the library's documentation).
//!
//! ```text
//! green-bench [--quick] [--seconds S] [--runs N] [--conns 100,1000,...]
//!             [--rate R] [--timeout-ms T] [--slice-us U] [--only web|micro]
//!             [--no-go] [--write-docs]
//! green-bench serve KIND PORT SLICE_US LONG_ITERS   (a server, for the runs)
//! green-bench micro KIND WHAT ARGS...               (a microbenchmark)
//! green-bench load PORT CONNS SECS [RATE [PERMILLE]] (the load generator
//!     alone against a running server, for profiling; no RATE: closed loop)
//! ```
//!
//! Prints markdown; with `--write-docs` replaces section 9 of
//! `docs/benchmarks.md` and writes `docs/plots/green-*.svg`.

mod harness;
mod plot;
mod report;

use std::path::Path;
use std::time::{Duration, Instant};

use green_bench::client::{self, Load, Plan};
use green_bench::http::Handler;
use green_bench::servers::{self, Kind};
use harness::{ServerSetup, CLIENT_CPU, SERVER_CPU};
use report::{Key, MicroResults, Results, Sample, Sweep};

/// Everything a run is told.
#[derive(Clone, Debug)]
pub struct Opts {
    pub quick: bool,
    pub seconds: f64,
    pub warmup: f64,
    pub runs: usize,
    pub conns: Vec<usize>,
    /// Connections of the head-of-line sweep.
    pub hol_conns: Vec<usize>,
    /// Requests per second of the head-of-line sweep (open loop).
    pub rate: f64,
    pub timeout_ms: u64,
    pub slice_us: u64,
    pub long_ms: f64,
    pub web: bool,
    pub micro: bool,
    pub go: bool,
    pub write_docs: bool,
}

impl Opts {
    fn full() -> Opts {
        Opts {
            quick: false,
            seconds: 5.0,
            warmup: 1.0,
            runs: 3,
            conns: vec![100, 1000, 3000, 10_000],
            hol_conns: vec![100, 1000, 3000, 10_000],
            rate: 2000.0,
            timeout_ms: 2000,
            slice_us: 2000,
            long_ms: 20.0,
            web: true,
            micro: true,
            go: true,
            write_docs: false,
        }
    }

    fn quick(mut self) -> Opts {
        self.quick = true;
        self.seconds = 1.0;
        self.warmup = 0.3;
        self.runs = 1;
        self.conns = vec![100, 1000];
        self.hol_conns = vec![100];
        self
    }
}

fn list(s: &str) -> Option<Vec<usize>> {
    s.split(',').map(|x| x.trim().replace('_', "").parse().ok()).collect()
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = if args.iter().any(|a| a == "--quick") { Opts::full().quick() } else { Opts::full() };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value"));
        let num = |v: String| v.parse::<f64>().map_err(|_| format!("not a number: {v}"));
        match a.as_str() {
            "--quick" => {}
            "--write-docs" => o.write_docs = true,
            "--no-go" => o.go = false,
            "--seconds" => o.seconds = num(val(a)?)?,
            "--warmup" => o.warmup = num(val(a)?)?,
            "--runs" => o.runs = num(val(a)?)?.max(1.0) as usize,
            "--rate" => o.rate = num(val(a)?)?,
            "--timeout-ms" => o.timeout_ms = num(val(a)?)? as u64,
            "--slice-us" => o.slice_us = num(val(a)?)? as u64,
            "--long-ms" => o.long_ms = num(val(a)?)?,
            "--conns" => o.conns = list(&val(a)?).ok_or("--conns takes numbers separated by commas")?,
            "--hol-conns" => o.hol_conns = list(&val(a)?).ok_or("--hol-conns takes numbers separated by commas")?,
            "--only" => match val(a)?.as_str() {
                "web" => o.micro = false,
                "micro" => o.web = false,
                x => return Err(format!("--only web or micro, not {x}")),
            },
            "-h" | "--help" => {
                println!(
                    "usage: green-bench [--quick] [--seconds S] [--warmup S] [--runs N] [--conns 100,1000,3000,10000] [--hol-conns ...] \
                     [--rate R] [--timeout-ms T] [--slice-us U] [--long-ms L] [--only web|micro] [--no-go] [--write-docs]"
                );
                std::process::exit(0);
            }
            x => return Err(format!("unknown argument {x:?} (try --help)")),
        }
    }
    Ok(o)
}

/// `green-bench serve KIND PORT SLICE_US LONG_ITERS`: runs until killed.
fn serve(args: &[String]) -> Result<(), String> {
    let kind = args.first().and_then(|k| Kind::parse(k)).ok_or("serve: unknown server kind")?;
    let num = |i: usize| args.get(i).and_then(|s| s.parse::<u64>().ok()).ok_or(format!("serve: argument {} missing", i + 1));
    let (port, slice_us, long_iters) = (num(1)? as u16, num(2)?, num(3)?);
    bench_util::pin(SERVER_CPU);
    bench_util::raise_nofile(0);
    let o = servers::Options { slice: Duration::from_micros(slice_us), handler: Handler { long_iters } };
    let l = servers::listener(port).map_err(|e| format!("listen on {port}: {e}"))?;
    println!("ready");
    servers::run(kind, l, &o).map_err(|e| e.to_string())
}

/// `green-bench load PORT CONNS SECS [RATE [PERMILLE]]`.
fn load(args: &[String]) -> Result<(), String> {
    let num = |i: usize| args.get(i).map(|s| s.parse::<f64>().map_err(|_| format!("load: not a number: {s}"))).transpose();
    let (Some(port), Some(conns), Some(secs)) = (num(0)?, num(1)?, num(2)?) else {
        return Err("usage: green-bench load PORT CONNS SECS [RATE [PERMILLE]]".into());
    };
    bench_util::pin(CLIENT_CPU);
    bench_util::raise_nofile(0);
    let plan = Plan {
        conns: conns as usize,
        load: num(3)?.map_or(Load::Closed, |rate| Load::Open { rate }),
        permille: num(4)?.unwrap_or(0.0) as u32,
        warmup: Duration::from_millis(500),
        measure: Duration::from_secs_f64(secs),
        timeout: Duration::from_secs(2),
        server_pid: None,
        max_answers: None,
    };
    let o = client::run(std::net::SocketAddr::from(([127, 0, 0, 1], port as u16)), &plan).map_err(|e| e.to_string())?;
    let q = |h: &hdrhistogram::Histogram<u64>, p| report::ms(h.value_at_quantile(p) as f64);
    println!(
        "{} requests/s, short p50 {} ms p99 {} ms, long p50 {} ms, {} timeouts, {} errors, client CPU {:.2}",
        report::count(o.throughput),
        q(&o.short, 0.5),
        q(&o.short, 0.99),
        q(&o.long, 0.5),
        o.timeouts,
        o.errors,
        o.client_cpu
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => {
            if let Err(e) = serve(&args[1..]) {
                eprintln!("green-bench: {e}");
                std::process::exit(1);
            }
        }
        Some("load") => {
            if let Err(e) = load(&args[1..]) {
                eprintln!("green-bench: {e}");
                std::process::exit(1);
            }
        }
        Some("micro") if args.len() >= 3 => {
            let nums: Vec<u64> = args[3..].iter().filter_map(|a| a.parse().ok()).collect();
            green_bench::micro::main(&args[1], &args[2], &nums);
        }
        _ => {
            let o = match parse_args(&args) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("green-bench: {e}");
                    std::process::exit(2);
                }
            };
            if let Err(e) = run(&o) {
                eprintln!("green-bench: {e}");
                std::process::exit(1);
            }
        }
    }
}

/// Where the hand-written notes after the section start: kept.
const NOTES: &str = "<!-- green-bench notes: written by hand (profiles of one run); green-bench --write-docs keeps what follows -->";

/// Writes the section and its plots.
fn write_docs(dir: &Path, md: &str, r: &Results) -> Result<(), Box<dyn std::error::Error>> {
    use bench_util::docs::{replace_section, GREEN_MARKER};
    let path = dir.join("benchmarks.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, replace_section(&old, GREEN_MARKER, md, &[NOTES]))?;
    std::fs::create_dir_all(dir.join("plots"))?;
    if !r.web.is_empty() {
        plot::closed(&dir.join("plots/green-throughput.svg"), r, false)?;
        plot::closed(&dir.join("plots/green-p99.svg"), r, true)?;
        plot::hol(&dir.join("plots/green-hol.svg"), r)?;
    }
    Ok(())
}

fn progress(len: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg} (eta {eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Descriptors a run needs: the load generator holds a connection each;
/// the green server two per waiting connection (the park hook registers a
/// duplicate of the descriptor with the reactor for each wait).
/// One descriptor per connection on each side (each side is its own
/// process), plus room for the runtime's own.
fn descriptors_needed(o: &Opts) -> u64 {
    let most = o.conns.iter().chain(&o.hol_conns).copied().max().unwrap_or(0) as u64;
    most + 1024
}

fn run(o: &Opts) -> Result<(), String> {
    let started = Instant::now();
    let ticks = report::cpu_ticks();
    let mut r = Results::new(o);
    // Calibrate where the servers run, then go to the client's CPU. Set
    // here, the descriptor limit is inherited by every server.
    bench_util::pin(SERVER_CPU);
    // The fastest of five calibrations: the one least disturbed by the
    // machine's other work (a slow one would shorten every long request).
    r.per_us = (0..5).map(|_| bench_util::calibrate()).fold(0.0, f64::max);
    bench_util::pin(CLIENT_CPU);
    r.nofile = (nofile_hard(), bench_util::raise_nofile(descriptors_needed(o)), descriptors_needed(o));
    let exe_dir = std::env::current_exe().map_err(|e| e.to_string())?.parent().map(Path::to_path_buf).ok_or("no exe dir")?;
    let go = if o.go {
        match harness::build_go(&exe_dir) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("green-bench: Go skipped: {e}");
                r.go_note = Some(e);
                None
            }
        }
    } else {
        r.go_note = Some("skipped (--no-go)".into());
        None
    };
    let kinds: Vec<Kind> = Kind::ALL.into_iter().filter(|&k| k != Kind::Go || go.is_some()).collect();
    if o.web {
        web(o, &kinds, go.as_deref(), &mut r)?;
    }
    if o.micro {
        r.micro = Some(micro(o, go.as_deref()));
    }
    r.load_end = bench_util::loadavg();
    r.seconds = started.elapsed().as_secs_f64();
    r.others = report::others(ticks, report::cpu_ticks(), r.seconds);
    let md = report::markdown(o, &r);
    println!("{md}");
    if o.write_docs {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        write_docs(&docs, &md, &r).map_err(|e| format!("writing the docs: {e}"))?;
        eprintln!("wrote docs/benchmarks.md (section 9) and docs/plots/green-*.svg");
    }
    Ok(())
}

fn nofile_hard() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    r.rlim_max
}

/// The two web sweeps, runs interleaved: for each connection count, round
/// after round, every server in turn (the order rotating each round), so
/// that a change in the machine's load falls on all of them.
fn web(o: &Opts, kinds: &[Kind], go: Option<&Path>, r: &mut Results) -> Result<(), String> {
    let mut plan: Vec<Key> = Vec::new();
    for (sweep, conns, permilles) in [(Sweep::Closed, &o.conns, &[0u32][..]), (Sweep::Hol, &o.hol_conns, &[0u32, 10][..])] {
        for &c in conns.iter() {
            for run in 0..o.runs {
                for k in 0..kinds.len() {
                    let kind = kinds[(k + run) % kinds.len()];
                    for &permille in permilles {
                        plan.push(Key { sweep, conns: c, kind, permille });
                    }
                }
            }
        }
    }
    // The Rust servers spin the same calibrated count; Go calibrates its own loop.
    let setup = ServerSetup { slice_us: o.slice_us, long_ms: o.long_ms, long_iters: (r.per_us * o.long_ms * 1000.0) as u64, go };
    let bar = progress(plan.len() as u64);
    for (n, key) in plan.iter().enumerate() {
        bar.set_message(format!("{} {} connections{}", key.kind.label(), key.conns, if key.permille > 0 { ", 1% long" } else { "" }));
        // A port of its own for every point, below the ephemeral range.
        let port = 21_000 + (n % 8000) as u16;
        let sample = point(o, key, port, &setup);
        if let Err(e) = &sample {
            bar.println(format!("green-bench: {} at {} connections: {e}", key.kind.label(), key.conns));
        }
        r.web.entry(*key).or_default().push(sample.unwrap_or_else(|e| Sample::failed(e)));
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

fn point(o: &Opts, key: &Key, port: u16, setup: &ServerSetup) -> Result<Sample, String> {
    let srv = harness::start(key.kind, port, setup)?;
    let plan = Plan {
        conns: key.conns,
        load: if key.sweep == Sweep::Closed { Load::Closed } else { Load::Open { rate: o.rate } },
        permille: key.permille,
        warmup: Duration::from_secs_f64(o.warmup),
        measure: Duration::from_secs_f64(o.seconds),
        timeout: Duration::from_millis(o.timeout_ms),
        server_pid: Some(srv.pid()),
        max_answers: None,
    };
    let out = client::run(srv.addr, &plan).map_err(|e| e.to_string())?;
    let log = srv.finish();
    let mut sample = Sample::from(&out);
    sample.read_log(&log);
    Ok(sample)
}

/// The microbenchmarks, green threads, Go and pthreads in turn for each.
fn micro(o: &Opts, go: Option<&Path>) -> MicroResults {
    let q = o.quick;
    let budget_kib = report::alive_budget_kib();
    let alive = |cap: u64, secs: u64| vec!["alive".to_string(), cap.to_string(), secs.to_string(), budget_kib.to_string()];
    let arg = |what: &str, n: u64| vec![what.to_string(), n.to_string()];
    // (measurement, green/Go arguments, pthread arguments)
    let steps: Vec<(&str, Vec<String>, Vec<String>)> = vec![
        ("spawn", arg("spawn", if q { 2_000 } else { 20_000 }), arg("spawn", if q { 200 } else { 2_000 })),
        ("chan", arg("chan", if q { 20_000 } else { 200_000 }), arg("chan", if q { 2_000 } else { 20_000 })),
        ("io", arg("io", if q { 5_000 } else { 50_000 }), arg("io", if q { 2_000 } else { 20_000 })),
        ("idle", arg("idle", if q { 2_000 } else { 10_000 }), arg("idle", if q { 2_000 } else { 10_000 })),
        ("alive", alive(if q { 20_000 } else { 1_000_000 }, report::alive_secs(q)), alive(if q { 2_000 } else { report::PTHREAD_CAP }, report::alive_secs(q))),
    ];
    let kinds: Vec<&str> = if go.is_some() { vec!["green", "go", "pthread"] } else { vec!["green", "pthread"] };
    let bar = progress((steps.len() * kinds.len()) as u64);
    let mut m = MicroResults::default();
    for (what, args, pthread_args) in &steps {
        for &k in &kinds {
            bar.set_message(format!("{what}: {k}"));
            let a = if k == "pthread" { pthread_args } else { args };
            let limit = Duration::from_secs(if q { 30 } else { 180 });
            let out = harness::micro(k, a, go, limit);
            if let Err(e) = &out {
                bar.println(format!("green-bench: micro {what} {k}: {e}"));
            }
            m.insert(k, what, out);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    m
}
