//! turquoise's own path rules (`src/base/rules.rs`) name its modules by
//! path, and a module that moves must take its rule with it: a rule that
//! names no code defers nothing, and a poll stopped in that module with a
//! lock held then hangs its worker (the hazard tests hung this way when the
//! modules first moved into layer folders). Every `turquoise::` rule must
//! match a function of this test's own executable, which links turquoise's
//! scheduler, tasks and runtime.

#[allow(dead_code)]
#[path = "../src/base/rules.rs"]
mod rules;

use object::{Object, ObjectSymbol};

#[test]
fn every_turquoise_rule_names_code_that_exists() {
    // Link the modules the rules name (a runtime, a task, a worker).
    let rt = turquoise::Builder::new().worker_threads(1).enable_all().build().unwrap();
    assert_eq!(rt.block_on(async { turquoise::spawn(async { 2 }).await.unwrap() }), 2);
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let file = object::File::parse(&*exe).unwrap();
    let names: Vec<String> = file
        .symbols()
        .filter_map(|s| s.name().ok())
        .filter_map(|n| rustc_demangle::try_demangle(n).ok().map(|d| format!("{d:#}")))
        .filter(|n| n.starts_with("turquoise::"))
        .collect();
    assert!(names.len() > 30, "too few turquoise symbols read: {}", names.len());
    let ours: Vec<&str> = rules::RULES.iter().map(|r| r.0).filter(|p| p.starts_with("turquoise::")).collect();
    assert!(ours.len() >= 5, "{ours:?}");
    for prefix in ours {
        assert!(
            names.iter().any(|n| n.starts_with(prefix) || n.contains(&format!("<{prefix}"))),
            "the rule {prefix} names no code: did its module move?"
        );
    }
}
