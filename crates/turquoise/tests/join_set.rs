//! `JoinSet`: tasks and green threads joined as they finish; aborted all
//! at once, or by dropping the set.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use turquoise::{thread, JoinSet};

fn runtime() -> turquoise::Runtime {
    turquoise::Builder::new().worker_threads(2).slice(Duration::from_micros(200)).enable_all().build().unwrap()
}

#[test]
fn values_come_in_the_order_they_finish() {
    let rt = runtime();
    rt.block_on(async {
        let mut set = JoinSet::new();
        set.spawn_thread(|| {
            thread::sleep(Duration::from_millis(30));
            "slow thread"
        });
        set.spawn(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            "task"
        });
        set.spawn_thread(|| "quick thread");
        assert_eq!(set.len(), 3);
        let mut order = Vec::new();
        while let Some(v) = set.join_next().await {
            order.push(v.unwrap());
        }
        assert_eq!(order, ["quick thread", "task", "slow thread"]);
        assert!(set.is_empty());
    });
}

#[test]
fn abort_all_and_drop_cancel_what_still_runs() {
    let rt = runtime();
    let ended = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let mut set = JoinSet::new();
        for _ in 0..50 {
            set.spawn_thread(|| thread::sleep(Duration::from_secs(3600)));
            set.spawn(async { tokio::time::sleep(Duration::from_secs(3600)).await });
        }
        set.abort_all();
        let mut cancelled = 0;
        while let Some(r) = set.join_next().await {
            assert!(r.unwrap_err().is_cancelled());
            cancelled += 1;
        }
        assert_eq!(cancelled, 100);

        // Dropped: its green threads are cancelled and unwound (their
        // destructors run).
        struct Count(Arc<AtomicUsize>);
        impl Drop for Count {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let mut set = JoinSet::new();
        for _ in 0..20 {
            let c = Count(ended.clone());
            set.spawn_thread(move || {
                let _c = c;
                thread::sleep(Duration::from_secs(3600));
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(set);
        for _ in 0..500 {
            if ended.load(Ordering::SeqCst) == 20 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    assert_eq!(ended.load(Ordering::SeqCst), 20, "dropping the set left green threads running");
}

#[test]
fn a_green_thread_joins_a_set_by_blocking() {
    let total = thread::spawn(|| {
        let mut set = JoinSet::new();
        for i in 1..=10u32 {
            set.spawn_thread(move || i);
        }
        let mut total = 0;
        while let Some(v) = set.join_next_blocking() {
            total += v.unwrap();
        }
        total
    });
    assert_eq!(total.join().unwrap(), 55);
}
