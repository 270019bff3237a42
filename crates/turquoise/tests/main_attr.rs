//! `#[turquoise::main]` builds a runtime and runs the body on it;
//! `#[turquoise::test]` does the same for a test.

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

// `#[turquoise::test]`: an async test on a runtime of its own.
#[turquoise::test(worker_threads = 1, slice_us = 200)]
async fn the_test_attribute_runs_an_async_test_on_a_runtime() {
    assert!(turquoise::Handle::try_current().is_some());
    // A spinner that never awaits cannot hold the one worker.
    let spinner = turquoise::spawn(async { loop { std::hint::spin_loop() } });
    assert_eq!(turquoise::spawn(async { 42 }).await.unwrap(), 42);
    spinner.abort();
}

#[turquoise::test]
async fn a_test_may_return_a_result() -> Result<(), std::io::Error> {
    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    Ok(())
}
