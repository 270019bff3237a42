//! The quick mode's cheapest parts still run: increments with no waiter,
//! and the yield-check loop in an activity (`make test` runs this; the
//! whole quick mode is `sync-bench --quick`).

use sync_bench::{activities, ec, Sizes};

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

#[test]
fn yield_check_loop_runs_in_an_activity() {
    let rows = activities::check(Sizes { batches: 2, n: 10_000, ..Sizes::QUICK });
    assert_eq!(rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), activities::CHECK_ROWS);
    for r in &rows {
        assert!(r.samples.len() == 2 && r.samples.iter().all(|v| v.is_finite() && *v > 0.0), "{}: {:?}", r.name, r.samples);
    }
}

#[test]
fn byte_cmp_is_strcmp_with_or_without_checks() {
    let (a, mut b) = activities::strings();
    for k in [None, Some(0), Some(14)] {
        assert_eq!(activities::byte_cmp(&a, &b, k), 0);
    }
    assert_eq!((activities::block_cmp(&a, &b, 0), activities::block_cmp(&a, &b, 14)), (0, 0));
    b[activities::STRCMP_BYTES / 2] = b'A';
    assert!(activities::byte_cmp(&a, &b, Some(3)) > 0 && activities::byte_cmp(&b, &a, None) < 0);
    assert!(activities::block_cmp(&a, &b, 3) > 0 && activities::block_cmp(&b, &a, 20) < 0);
}

#[test]
fn idle_lines_parse() {
    let [rss, pte] = activities::idle_rows("x", "idle 1000 100 5100 10 30").unwrap();
    assert_eq!((rss.what.as_str(), rss.samples, pte.what.as_str(), pte.samples), ("act_memory", vec![5120.0], "act_pte", vec![20.48]));
    assert!(activities::idle_rows("x", "alive 3 1 2").is_none());
}
