//! A `tracing` span per green thread and per task: what their code traces
//! carries it. Alone in its binary: the subscriber is the process's global
//! default (the workers' threads would not see a scoped one).
#![cfg(feature = "tracing")]

mod common;
use common::Buffer;

#[test]
fn green_threads_and_tasks_trace_inside_their_spans() {
    let buf = Buffer::default();
    tracing::subscriber::set_global_default(buf.subscriber(tracing::Level::TRACE)).unwrap();
    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().unwrap();
    let h = turquoise::thread::Builder::new()
        .name("spanned")
        .spawn_on(rt.handle(), || {
            tracing::info!("from the green thread");
            turquoise::thread::yield_now();
            tracing::info!("after a switch");
        })
        .unwrap();
    h.join().unwrap();
    rt.block_on(async {
        turquoise::spawn(async { tracing::info!("from the task") }).await.unwrap();
    });
    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let line = |what: &str| out.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no {what:?} in {out}")).to_owned();
    for what in ["from the green thread", "after a switch"] {
        let l = line(what);
        assert!(l.contains("green_thread{") && l.contains("name=\"spanned\""), "{l}");
    }
    assert!(line("from the task").contains("task{id="), "{out}");
    // Outside them, no span.
    tracing::info!("outside");
    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let l = out.lines().find(|l| l.contains("outside")).unwrap();
    assert!(!l.contains("green_thread{") && !l.contains("task{"), "{l}");
}
