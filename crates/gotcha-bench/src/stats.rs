//! Median and spread of a set of samples.

/// Order statistics of samples (any unit; the benchmarks use nanoseconds).
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p1: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// The `q` quantile (0..=1) of sorted samples, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

impl Summary {
    /// None for no samples.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Summary {
            n: s.len(),
            min: s[0],
            p1: quantile(&s, 0.01),
            p25: quantile(&s, 0.25),
            p50: quantile(&s, 0.50),
            p75: quantile(&s, 0.75),
            p99: quantile(&s, 0.99),
            max: s[s.len() - 1],
            mean: s.iter().sum::<f64>() / s.len() as f64,
        })
    }
}

/// A duration in nanoseconds, with a unit that keeps three digits or so.
pub fn ns(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2} ms", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1} us", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.2} us", v / 1e3)
    } else if a >= 10.0 {
        format!("{v:.1} ns")
    } else {
        format!("{v:.2} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.min, s.p1, s.p25, s.p50, s.p75, s.p99, s.max), (1.0, 1.0, 25.0, 50.0, 75.0, 99.0, 100.0));
        assert!(Summary::of(&[]).is_none());
        assert_eq!(ns(1234.0), "1.23 us");
        assert_eq!(ns(10_200_000.0), "10.20 ms");
    }
}
