//! The wrapper's cost per poll: tasks that do nothing but yield, under
//! tokio's current-thread runtime plain and with every task wrapped in
//! `turquoise::preemptible`, and under `turquoise::Runtime` (one worker).

use std::time::{Duration, Instant};

use turquoise::PreemptibleExt;

/// One way of running the no-op tasks, and its cost per poll (ns): the
/// median of 7 runs, with the smallest and largest.
pub struct PollCost {
    pub name: &'static str,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

const TASKS: u64 = 100;

async fn noop(yields: u64) {
    for _ in 0..yields {
        tokio::task::yield_now().await;
    }
}

fn tokio_run(yields: u64, wrap: bool) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
    rt.block_on(async {
        let t = Instant::now();
        let hs: Vec<_> = (0..TASKS)
            .map(|_| if wrap { tokio::spawn(async move { noop(yields).preemptible(turquoise::DEFAULT_SLICE).await }) } else { tokio::spawn(noop(yields)) })
            .collect();
        for h in hs {
            h.await.expect("task");
        }
        t.elapsed()
    })
}

fn turquoise_run(yields: u64) -> Duration {
    let rt = turquoise::Builder::new().worker_threads(1).build().expect("turquoise runtime");
    rt.block_on(async {
        let t = Instant::now();
        let hs: Vec<_> = (0..TASKS).map(|_| turquoise::spawn(noop(yields))).collect();
        for h in hs {
            h.await.expect("task");
        }
        t.elapsed()
    })
}

fn stats(name: &'static str, mut ns: Vec<f64>) -> PollCost {
    ns.sort_by(|a, b| a.total_cmp(b));
    PollCost { name, median: ns[ns.len() / 2], min: ns[0], max: ns[ns.len() - 1] }
}

/// Each way, `yields` polls per task, 7 interleaved runs.
pub fn measure(yields: u64) -> Vec<PollCost> {
    let polls = (TASKS * (yields + 1)) as f64;
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        a.push(tokio_run(yields, false).as_nanos() as f64 / polls);
        b.push(tokio_run(yields, true).as_nanos() as f64 / polls);
        c.push(turquoise_run(yields).as_nanos() as f64 / polls);
    }
    vec![stats("tokio current-thread", a), stats("tokio, every task wrapped", b), stats("turquoise::Runtime, 1 worker", c)]
}

pub fn markdown(p: &[PollCost]) -> String {
    let mut s = String::from(
        "\n**Cost per poll** of 100 tasks that only `yield_now()` (median of 7 runs, [min, max]; the target for the wrapper: <= 100 ns over tokio):\n\n| runtime | ns per poll |\n|---|---:|\n",
    );
    for c in p {
        s.push_str(&format!("| {} | {:.0} [{:.0}, {:.0}] |\n", c.name, c.median, c.min, c.max));
    }
    if let (Some(a), Some(b)) = (p.first(), p.get(1)) {
        s.push_str(&format!("\nThe wrapper adds {:.0} ns per poll.\n", b.median - a.median));
    }
    s
}
