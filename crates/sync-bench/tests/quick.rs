//! The quick mode's cheapest part still runs: increments with no waiter
//! (`make test` runs this; the whole quick mode is `sync-bench --quick`).

use sync_bench::{ec, Sizes};

#[test]
fn increments_run_and_cost_something() {
    let rows = ec::increments(Sizes { batches: 2, n: 10_000, ..Sizes::QUICK });
    assert_eq!(rows.len(), 8, "ns and cycles of four increments");
    for r in &rows {
        assert_eq!(r.samples.len(), 2, "{}: {}", r.what, r.name);
        assert!(r.samples.iter().all(|v| v.is_finite() && *v > 0.0), "{}: {} {:?}", r.what, r.name, r.samples);
    }
}

#[test]
fn peer_lines_parse() {
    let r = sync_bench::Row::parse("inc_ns ck_ec32_inc sp 0.25 0.24").unwrap();
    assert_eq!((r.what.as_str(), r.name.as_str(), r.samples), ("inc_ns", "ck_ec32_inc sp", vec![0.25, 0.24]));
    assert!(sync_bench::Row::parse("lonely 1 2").is_none());
}
