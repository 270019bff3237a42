//! Configuration through the environment and the builder: documented
//! defaults, clear errors for bad values, no aborts. Each case runs in a
//! child process because the configuration is frozen once per process.

use std::process::Command;
use std::time::Duration;

use linger::{launch, Config, Error};

fn child_case() -> Option<String> {
    std::env::var("LINGER_CONFIG_CASE").ok()
}

fn run_case(case: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "config_cases", "--nocapture", "--test-threads=1"]).env("LINGER_CONFIG_CASE", case);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "case {case} failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn spin() -> u64 {
    let mut x = 0u64;
    loop {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
    }
}

#[test]
fn config_cases() {
    match child_case().as_deref() {
        None => {}
        Some("bad-signal") => {
            let e = launch(|| 1, Duration::MAX).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{e}");
            println!("CASE-OK {e}");
            return;
        }
        Some("bad-size") => {
            let e = launch(|| 1, Duration::MAX).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{e}");
            // Said once, however often the frozen configuration is asked.
            let again = launch(|| 1, Duration::MAX).unwrap_err().to_string();
            assert_eq!(again.matches("bad configuration").count(), 1, "{again}");
            println!("CASE-OK {e}");
            return;
        }
        Some("custom") => {
            let c = Config::from_env().unwrap();
            assert_eq!(c.signal_number(), libc::SIGRTMIN() + 4);
            assert_eq!(c.default_stack_size(), 128 * 1024);
            let l = launch(spin, Duration::from_millis(1)).unwrap();
            assert!(l.is_continuation());
            // Frozen once started.
            assert!(matches!(Config::default().install(), Err(Error::Config(_))));
            println!("CASE-OK");
            return;
        }
        Some("signal-shadowed") => {
            // Through libc's API the program only changes a shadow of the
            // preemption signal's disposition: preemption keeps working.
            extern "C" fn other(_: libc::c_int) {}
            let h = other as *const () as libc::sighandler_t;
            unsafe { libc::signal(libc::SIGRTMAX() - 3, h) };
            let mut l = launch(|| -> () { loop { std::hint::black_box(0u8); } }, Duration::from_millis(2)).unwrap();
            assert!(l.is_continuation());
            assert_eq!(l.cancel(), linger::Cancelled::Reclaimed);
            let mut q: libc::sigaction = unsafe { std::mem::zeroed() };
            unsafe { libc::sigaction(libc::SIGRTMAX() - 3, std::ptr::null(), &mut q) };
            assert_eq!(q.sa_sigaction, h, "the query reports the program's own handler");
            println!("CASE-OK");
            return;
        }
        Some("signal-taken") => {
            // Behind libc's back (a raw system call) the signal really is
            // taken: the launch reports it instead of fighting over it.
            extern "C" fn other(_: libc::c_int) {}
            let mut sa: [u64; 4] = [other as *const () as u64, 0x0400_0000 /* SA_RESTORER */, 0, 0];
            extern "C" fn restorer() {}
            sa[2] = restorer as *const () as u64;
            let r = unsafe { libc::syscall(libc::SYS_rt_sigaction, libc::SIGRTMAX() - 3, sa.as_ptr(), 0usize, 8usize) };
            assert_eq!(r, 0);
            let e = launch(|| 1, Duration::MAX).unwrap_err();
            assert!(matches!(e, Error::Config(_)), "{e}");
            println!("CASE-OK {e}");
            return;
        }
        Some("builder") => {
            let c = Config::default().stack_size(1).unwrap().retry(Duration::from_micros(20));
            assert_eq!(c.default_stack_size(), linger::MIN_STACK_SIZE);
            assert!(Config::default().signal(libc::SIGINT).is_err());
            c.install().unwrap();
            let l = launch(|| 7, Duration::MAX).unwrap();
            assert_eq!(l.completion(), Some(7));
            println!("CASE-OK");
            return;
        }
        Some(other) => panic!("unknown case {other}"),
    }
    let out = run_case("bad-signal", &[("LINGER_SIGNAL", "not-a-number")]);
    assert!(out.contains("CASE-OK") && out.contains("LINGER_SIGNAL"), "{out}");
    let out = run_case("bad-signal", &[("LINGER_SIGNAL", "2")]);
    assert!(out.contains("CASE-OK") && out.contains("real-time"), "{out}");
    let out = run_case("bad-size", &[("LINGER_STACK_SIZE", "lots")]);
    assert!(out.contains("CASE-OK") && out.contains("LINGER_STACK_SIZE"), "{out}");
    let sig = (libc::SIGRTMIN() + 4).to_string();
    assert!(run_case("custom", &[("LINGER_SIGNAL", &sig), ("LINGER_STACK_SIZE", "128K")]).contains("CASE-OK"));
    // The same by name, and a size in a unit of its own (0.125M = 128K).
    assert!(run_case("custom", &[("LINGER_SIGNAL", "SIGRTMIN+4"), ("LINGER_STACK_SIZE", "0.125M")]).contains("CASE-OK"));
    for (var, value) in [("LINGER_RETURN_TRAP", "maybe"), ("LINGER_FD_MODES", "2"), ("LINGER_RETRY_US", "-1"), ("LINGER_TIMEKEEPING", "sundial")] {
        let out = run_case("bad-signal", &[(var, value)]);
        assert!(out.contains("CASE-OK") && out.contains(var) && out.contains(value), "{var}={value}: {out}");
    }
    assert!(run_case("signal-shadowed", &[]).contains("CASE-OK"));
    let out = run_case("signal-taken", &[]);
    assert!(out.contains("CASE-OK") && out.contains("already has a handler"), "{out}");
    assert!(run_case("builder", &[]).contains("CASE-OK"));
}

#[test]
fn errors_say_each_part_once_and_convert_to_io_errors() {
    let e = Config::default().stack_size(1 << 40).unwrap_err();
    assert_eq!(e.to_string(), "bad configuration: stack size 1099511627776 is larger than 64 GiB");
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    let inner = io.get_ref().and_then(|i| i.downcast_ref::<Error>()).expect("the linger error inside");
    assert!(matches!(inner, Error::Config(_)));

    // A wrapping error: its cause is in its message, once, and is not also
    // its source (an error-chain printer would say it twice).
    let os = std::io::Error::from_raw_os_error(libc::ENOMEM);
    let e = Error::StackAllocation(std::io::Error::from_raw_os_error(libc::ENOMEM));
    assert_eq!(e.to_string(), format!("cannot allocate a stack for a preemptible function: {os}"));
    assert!(std::error::Error::source(&e).is_none());
    assert_eq!(std::io::Error::from(e).kind(), std::io::ErrorKind::OutOfMemory);
}
