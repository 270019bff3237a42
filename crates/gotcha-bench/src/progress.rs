//! Progress on stderr: an indicatif bar per phase on a terminal, a line per
//! tenth otherwise. Advanced only between measurements, never inside one.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Phase {
    bar: Option<ProgressBar>,
    name: String,
    done: u64,
    total: u64,
    start: Instant,
}

impl Phase {
    /// A phase of `total` steps; `quiet` prints nothing (tests).
    pub fn new(name: &str, total: u64, quiet: bool) -> Phase {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{elapsed_precise:.dim} [{bar:30}] {pos}/{len} {msg} (eta {eta})")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b.set_message(name.to_owned());
            b
        });
        if bar.is_none() && !quiet {
            eprintln!("gotcha-bench: {name}: {total} steps");
        }
        let quiet_total = if quiet { 0 } else { total };
        Phase { bar, name: name.to_owned(), done: 0, total: quiet_total, start: Instant::now() }
    }

    pub fn inc(&mut self, n: u64) {
        self.done += n;
        match &self.bar {
            Some(b) => b.set_position(self.done),
            None if self.total > 0 => {
                let tenth = self.total.div_ceil(10);
                if (self.done - n) / tenth != self.done / tenth {
                    eprintln!("gotcha-bench: {}: {}/{} ({:.0} s)", self.name, self.done, self.total, self.start.elapsed().as_secs_f64());
                }
            }
            None => {}
        }
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if self.total > 0 {
            eprintln!("gotcha-bench: {} done in {:.1} s", self.name, self.start.elapsed().as_secs_f64());
        }
    }
}
