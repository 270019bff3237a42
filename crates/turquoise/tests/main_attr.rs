//! `#[turquoise::main]` builds a runtime and runs the body on it.

#[turquoise::main(worker_threads = 2, slice_us = 500)]
async fn run() -> u64 {
    let on_worker = turquoise::spawn(async { std::thread::current().name().map(str::to_owned) }).await.unwrap();
    assert!(on_worker.unwrap_or_default().starts_with("turquoise-worker"));
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    turquoise::spawn(async { 7 }).await.unwrap()
}

#[turquoise::main]
async fn defaults() -> bool {
    turquoise::Handle::try_current().is_some()
}

#[test]
fn the_main_attribute_runs_the_body_on_a_runtime() {
    assert_eq!(run(), 7);
    assert!(defaults());
}
