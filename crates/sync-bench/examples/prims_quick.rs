//! The primitives part of `sync-bench --quick` alone (locks and channel
//! round trips), as `what name median [samples]` lines.

use sync_bench::{prims, Sizes};

fn main() {
    let s = Sizes::QUICK;
    let mut rows = prims::lock_unlock(s);
    rows.extend(prims::pingpong_os(s));
    rows.extend(prims::pingpong_green(s));
    for r in rows {
        let mut v = r.samples.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        println!("{:<18} {:<70} {:>10.1}  {:?}", r.what, r.name, v[v.len() / 2], r.samples.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>());
    }
}
