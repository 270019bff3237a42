//! `linger-bench`: latency, timeout accuracy, throughput and memory of linger's
//! preemptible functions, each next to baselines measured in the same run
//! (threads, fork, plain calls, bare coroutine switches, raw signals and
//! timers), and the overhead of `linger-run` on real programs. Writes
//! markdown to stdout and, with `--write-docs`, to `docs/benchmarks.md` plus
//! SVG plots in `docs/plots/`.

mod accuracy;
mod libloops;
mod latency;
mod machine;
mod memory;
mod plots;
mod progress;
mod report;
mod run;
mod sig;
mod stats;
mod throughput;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// Run length: full (default) or `--quick`.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub quick: bool,
}

impl Scale {
    /// Sample count for a full or a quick run.
    pub fn n(self, full: usize, quick: usize) -> usize {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

const SECTIONS: [&str; 5] = ["latency", "accuracy", "throughput", "memory", "run"];

struct Opts {
    scale: Scale,
    write_docs: bool,
    docs: PathBuf,
    only: Vec<String>,
}

const USAGE: &str = "usage: linger-bench [--quick] [--write-docs] [--docs-dir DIR] [--only SECTION[,SECTION...]]

  --quick         short run (about a minute), fewer samples
  --write-docs    also write DIR/benchmarks.md and DIR/plots/*.svg
  --docs-dir DIR  where to write (default: the workspace's docs/)
  --only LIST     run only some of: latency, accuracy, throughput, memory,
                  run (not together with --write-docs)

The run section needs linger-run next to this binary
(cargo build --release -p linger-run; make bench does it).

Markdown goes to stdout, progress to stderr.";

fn parse() -> Result<Opts, String> {
    let root = workspace_root();
    let mut o = Opts { scale: Scale { quick: false }, write_docs: false, docs: root.join("docs"), only: Vec::new() };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.scale.quick = true,
            "--write-docs" => o.write_docs = true,
            "--docs-dir" => o.docs = args.next().ok_or("--docs-dir needs a value")?.into(),
            "--only" => {
                for s in args.next().ok_or("--only needs a value")?.split(',') {
                    if !SECTIONS.contains(&s) {
                        return Err(format!("unknown section {s:?}"));
                    }
                    o.only.push(s.to_owned());
                }
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.write_docs && !o.only.is_empty() {
        return Err("--only cannot be combined with --write-docs (the docs describe a complete run)".into());
    }
    Ok(o)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| PathBuf::from("."))
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("linger-bench: {e}\n");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(if e.is_empty() { 0 } else { 2 });
        }
    };
    let on = |s: &str| o.only.is_empty() || o.only.iter().any(|x| x == s);
    let sc = o.scale;

    let machine = machine::collect(&workspace_root());
    let sigs = match sig::Signals::install(machine.linger_signal) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("linger-bench: cannot install the baseline signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Start linger's runtime (handler, range table, this thread's timer)
    // before anything is timed.
    if let Err(e) = linger::launch(|| (), std::time::Duration::from_micros(100)) {
        eprintln!("linger-bench: linger does not start: {e}");
        return ExitCode::FAILURE;
    }

    let run_plan = on("run").then(|| run::plan(sc));
    if let Some(Err(why)) = &run_plan {
        eprintln!("linger-bench: skipping the run section: {why}");
    }
    let steps = [
        on("latency").then_some(8),
        on("accuracy").then_some(accuracy::TIMEOUTS_US.len() as u64 + 1),
        on("throughput").then(|| throughput::steps(sc)),
        on("memory").then_some(3),
        run_plan.as_ref().and_then(|r| r.as_ref().ok()).map(run::Plan::steps),
    ];
    let mut p = progress::Progress::new(steps.iter().flatten().sum());
    let start = Instant::now();
    // fork() is timed in the latency section: run it first, while the process is small.
    let latency = on("latency").then(|| latency::run(sc, &sigs, &mut p));
    let accuracy = on("accuracy").then(|| accuracy::run(sc, &sigs, &mut p));
    let libloops = on("accuracy").then(|| libloops::run(sc, &mut p));
    let throughput = on("throughput").then(|| throughput::run(sc, &sigs, &mut p));
    let memory = on("memory").then(|| memory::run(sc, &mut p));
    let run = run_plan.map(|r| match r {
        Ok(plan) => run::run(plan, &mut p),
        Err(why) => run::Outcome::Skipped(why),
    });
    p.finish();
    let run_failed = match &run {
        Some(run::Outcome::Failed(e)) => {
            eprintln!("linger-bench: the run section failed: {e}");
            true
        }
        _ => false,
    };

    let results = report::Results {
        machine,
        quick: sc.quick,
        secs: start.elapsed().as_secs_f64(),
        load_end: machine::loadavg(),
        latency,
        accuracy,
        libloops,
        throughput,
        memory,
        run,
    };
    let md = report::markdown(&results, o.write_docs);
    print!("{md}");
    if run_failed {
        if o.write_docs {
            eprintln!("linger-bench: not writing the docs after a failed run section");
        }
        return ExitCode::FAILURE;
    }
    if o.write_docs {
        if let Err(e) = write_docs(&o.docs, &md, &results) {
            eprintln!("linger-bench: writing {}: {e}", o.docs.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {}", o.docs.join("benchmarks.md").display());
    }
    ExitCode::SUCCESS
}

fn write_docs(dir: &Path, md: &str, r: &report::Results) -> Result<(), Box<dyn std::error::Error>> {
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots)?;
    if let Some(l) = &r.latency {
        plots::latency(&plots.join("latency.svg"), l)?;
    }
    if let Some(a) = &r.accuracy {
        plots::accuracy(&plots.join("accuracy.svg"), a)?;
    }
    if let Some(l) = &r.libloops {
        plots::libloops(&plots.join("library-loops.svg"), l)?;
    }
    if let Some(t) = &r.throughput {
        plots::throughput(&plots.join("throughput.svg"), t)?;
    }
    if let Some(run::Outcome::Done(b)) = &r.run {
        plots::run_overhead(&plots.join("run-overhead.svg"), b)?;
    }
    // The sections other benchmarks write (turquoise-bench's) come after
    // their marker, and are kept.
    let path = dir.join("benchmarks.md");
    let tail = std::fs::read_to_string(&path)
        .ok()
        .and_then(|old| old.find("<!-- turquoise-bench:").map(|i| old[i..].to_owned()))
        .unwrap_or_default();
    let sep = if tail.is_empty() { "" } else { "\n" };
    std::fs::write(path, format!("{md}{sep}{tail}"))?;
    Ok(())
}
