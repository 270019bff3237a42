//! Order statistics over sorted sample vectors, and number formatting.

/// Percentiles of a set of samples (all in nanoseconds unless said otherwise).
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub n: usize,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Nearest-rank percentile of an ascending slice (`q` in 0..=1).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn summarize(mut v: Vec<f64>) -> Summary {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return Summary {
            n: 0,
            p10: f64::NAN,
            p50: f64::NAN,
            p90: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
            mean: f64::NAN,
        };
    }
    v.sort_by(f64::total_cmp);
    Summary {
        n: v.len(),
        p10: percentile(&v, 0.10),
        p50: percentile(&v, 0.50),
        p90: percentile(&v, 0.90),
        p99: percentile(&v, 0.99),
        max: v[v.len() - 1],
        mean: v.iter().sum::<f64>() / v.len() as f64,
    }
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 0.5)
}

/// Microseconds, as whole milliseconds where they are.
pub fn fmt_us(us: u64) -> String {
    if us >= 1000 && us.is_multiple_of(1000) {
        format!("{} ms", us / 1000)
    } else {
        format!("{us} us")
    }
}

/// A duration in nanoseconds with a unit that keeps 3 significant digits.
pub fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "n/a".into();
    }
    let a = ns.abs();
    if a < 10.0 {
        format!("{ns:.1} ns")
    } else if a < 1_000.0 {
        format!("{ns:.0} ns")
    } else if a < 10_000.0 {
        format!("{:.2} us", ns / 1e3)
    } else if a < 1_000_000.0 {
        format!("{:.1} us", ns / 1e3)
    } else if a < 10_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.1} ms", ns / 1e6)
    }
}

pub fn fmt_bytes(b: f64) -> String {
    if !b.is_finite() {
        return "n/a".into();
    }
    let a = b.abs();
    if a < 10.0 * 1024.0 {
        format!("{b:.0} B")
    } else if a < 10.0 * 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if a < 10.0 * 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", b / 1024.0 / 1024.0 / 1024.0)
    }
}

pub fn fmt_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", x * 100.0)
    } else {
        "n/a".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let s = summarize((1..=100).map(f64::from).rev().collect());
        assert_eq!(s.n, 100);
        assert_eq!(s.p10, 10.0);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p90, 90.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.max, 100.0);
        assert!(summarize(vec![]).p50.is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_ns(5.25), "5.2 ns");
        assert_eq!(fmt_ns(950.0), "950 ns");
        assert_eq!(fmt_ns(1_234.0), "1.23 us");
        assert_eq!(fmt_ns(123_456.0), "123.5 us");
        assert_eq!(fmt_ns(4_767_700.0), "4.77 ms");
        assert_eq!(fmt_bytes(16.0 * 1024.0), "16.0 KiB");
        assert_eq!(fmt_pct(0.955), "95.5%");
    }
}
