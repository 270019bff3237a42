//! Progress on stderr: an indicatif bar on a terminal, plain lines otherwise.
//! Never redrawn from a timing loop: only between measurements.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    done: u64,
    total: u64,
}

impl Progress {
    pub fn new(total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{elapsed_precise:.dim} [{bar:30}] {pos}/{len} {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b
        });
        Progress { bar, start: Instant::now(), done: 0, total }
    }

    /// Starts the next measurement step.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        match &self.bar {
            Some(b) => {
                b.set_position(self.done - 1);
                b.set_message(what.to_owned());
            }
            None => eprintln!("[{:>3}/{}] {:>6.1}s {what}", self.done, self.total, self.start.elapsed().as_secs_f64()),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        eprintln!("benchmarks done in {:.1} s", self.start.elapsed().as_secs_f64());
    }
}
