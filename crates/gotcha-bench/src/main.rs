//! `gotcha-bench [--quick] [--write-docs] [--docs-dir DIR]`: runs the call
//! costs (Table 3) and the decompression bomb (Figure 5) benchmarks and
//! prints section 8 of `docs/benchmarks.md`; `--write-docs` writes it there
//! with its plots.

use std::path::PathBuf;
use std::time::Instant;

use gotcha_bench::png::Png;
use gotcha_bench::report::{self, Run};
use gotcha_bench::{bomb, calls, machine};

const USAGE: &str = "usage: gotcha-bench [--quick] [--write-docs] [--docs-dir DIR]
  --quick        a few hundred iterations (well under a minute) instead of the full run
  --write-docs   replace section 8 of DIR/benchmarks.md and write DIR/plots/gotcha-*.svg
  --docs-dir     where the docs are (default: the workspace's docs/)";

struct Options {
    quick: bool,
    write_docs: bool,
    docs: PathBuf,
}

fn options() -> Result<Options, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut o = Options { quick: false, write_docs: false, docs: root.join("docs") };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => o.quick = true,
            "--write-docs" => o.write_docs = true,
            "--docs-dir" => o.docs = args.next().ok_or("--docs-dir needs a directory")?.into(),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    Ok(o)
}

fn main() {
    let o = options().unwrap_or_else(|e| {
        eprintln!("gotcha-bench: {e}");
        std::process::exit(2);
    });
    if let Err(e) = run(&o) {
        eprintln!("gotcha-bench: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Options) -> Result<(), Box<dyn std::error::Error>> {
    // Before any other thread exists: the fork way waits for SIGCHLD.
    bomb::block_sigchld();
    let start = Instant::now();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let machine = machine::collect(&root);
    let load_start = machine::loadavg();
    eprintln!("gotcha-bench: making the images");
    let benign = Png::benign(832, 624);
    let bomb_png = Png::bomb(6000, 6000);

    let cplan = calls::Plan {
        batch: if o.quick { 2000 } else { 10_000 },
        launch_batch: 64,
        reps: if o.quick { 40 } else { 300 },
        resets: if o.quick { 200 } else { 2000 },
        quiet: false,
    };
    let before = calls::before(&cplan);
    let isolated = gotcha_bench::isolate(gotcha_bench::SELECTION)?;
    // Every libset the loader allows, made now rather than in a timed launch.
    let libsets = gotcha::Lease::prepare(15)?;
    let after = calls::after(&cplan, benign)?;

    let bplan = bomb::Plan {
        benign: if o.quick { 100 } else { 1000 },
        bomb: if o.quick { 300 } else { 10_000 },
        bomb_slow: if o.quick { 3 } else { 30 },
        rss_every: if o.quick { 20 } else { 100 },
        warmup: if o.quick { 5 } else { 20 },
        quiet: false,
    };
    let decomp = bomb::run(bplan, benign, bomb_png)?;
    let r = Run {
        machine,
        load_start,
        load_end: machine::loadavg(),
        quick: o.quick,
        duration: start.elapsed(),
        isolated,
        libsets,
        before,
        after,
        decomp,
    };
    let md = report::markdown(&r);
    println!("{md}");
    if o.write_docs {
        report::write_docs(&o.docs, &md, &r)?;
        eprintln!("gotcha-bench: wrote {}", o.docs.join("benchmarks.md").display());
    }
    Ok(())
}
