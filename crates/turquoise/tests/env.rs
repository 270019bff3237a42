//! The default runtime's variables (`docs/configuration.md`): read with
//! units, and a bad value refused by the spawn that would start the runtime,
//! naming the variable. Each case in a child process: the default runtime
//! starts once per process.

use std::process::Command;

fn child_case() -> Option<String> {
    std::env::var("TURQ_ENV_CASE").ok()
}

/// Runs the case in a child with `vars` set; its stdout.
fn run_case(case: &str, vars: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "env_cases", "--nocapture", "--test-threads=1"]).env("TURQ_ENV_CASE", case);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "case {case}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn env_cases() {
    match child_case().as_deref() {
        None => {}
        Some("refused") => {
            let e = turquoise::thread::Builder::new().spawn(|| 1).map(|_| ()).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
            println!("REFUSED {e}");
        }
        Some("taken") => {
            assert_eq!(turquoise::thread::spawn(|| 7).join().unwrap(), 7);
            println!("TAKEN");
        }
        Some(other) => panic!("unknown case {other}"),
    }
}

#[test]
fn bad_values_are_refused_naming_the_variable() {
    for (var, value) in [
        ("TURQ_WORKERS", "-1"),
        ("TURQ_WORKERS", "0"),
        ("TURQ_WORKERS", "two"),
        ("TURQ_SLICE_US", "0"),
        ("TURQ_SLICE_US", "2 fortnights"),
        ("TURQ_GRANULARITY_US", "-3"),
        ("TURQ_DUMP_SIGNAL", "SIGNOPE"),
    ] {
        let out = run_case("refused", &[(var, value)]);
        assert!(out.contains("REFUSED") && out.contains(var) && out.contains(value), "{var}={value}: {out}");
    }
}

#[test]
fn good_values_are_taken_with_or_without_units() {
    for vars in [
        &[("TURQ_WORKERS", "1"), ("TURQ_SLICE_US", "500")][..],
        &[("TURQ_SLICE_US", "2ms"), ("TURQ_GRANULARITY_US", "0")][..],
        &[("TURQ_GRANULARITY_US", "100us"), ("TURQ_DUMP_SIGNAL", "SIGRTMIN+1")][..],
        &[("TURQ_DUMP_SIGNAL", "usr2")][..],
    ] {
        assert!(run_case("taken", vars).contains("TAKEN"), "{vars:?}");
    }
}
