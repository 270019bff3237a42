//! The one reader of configuration values: sizes, durations, signals,
//! counts and switches, for the environment variables of linger,
//! linger-run and turquoise and for their command lines
//! (`docs/configuration.md` lists every variable). Each function takes the
//! text as written and returns the value or a message that quotes it and
//! says what would be accepted; the caller adds the variable's name.
//!
//! Written by hand: the crates that parse sizes and durations
//! (`humantime`, `bytesize`, `parse-size`) each take a different set of
//! units, and these must be the same everywhere here, match what
//! `ulimit`, `sleep` and `kill -l` users type, and refuse a bare number
//! for a duration.

use std::time::Duration;

/// A size in bytes: a number, optionally followed by `K`, `M` or `G`
/// (powers of 1024; also `k`/`m`/`g`, `KB`..., `KiB`...): `65536`, `64K`,
/// `8M`, `1G`, `1.5M`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let (num, unit) = number_and_unit(s);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        u => return Err(format!("{s:?} has an unknown unit {u:?} (use K, M or G)")),
    };
    let v = num.ok_or_else(|| format!("{s:?} is not a size (such as 65536, 64K, 8M or 1G)"))?;
    let bytes = (v * (1u64 << shift) as f64).round();
    if bytes >= usize::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(bytes as usize)
}

/// A duration: a number and a unit, `ns`, `us` (or `µs`), `ms` or `s`:
/// `50us`, `1.5ms`, `2s`. A bare number is an error, so that `100` cannot
/// silently mean 100 ns or 100 s; zero is an error too (it would mean "set
/// up but never run" for a slice).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse_duration_in(s, None, false)
}

/// [`parse_duration`], where a bare number counts in `bare` (for the
/// variables whose names say their unit, such as `TURQ_SLICE_US`), and
/// zero is allowed when `zero_ok` (a setting that zero turns off).
pub fn parse_duration_in(s: &str, bare: Option<Duration>, zero_ok: bool) -> Result<Duration, String> {
    let (num, unit) = number_and_unit(s);
    let scale: f64 = match (unit, bare) {
        ("ns", _) => 1.0,
        ("us" | "\u{b5}s", _) => 1e3,
        ("ms", _) => 1e6,
        ("s", _) => 1e9,
        ("", Some(b)) => b.as_nanos() as f64,
        ("", None) => return Err(format!("duration {s:?} needs a unit (ns, us, ms or s)")),
        (u, _) => return Err(format!("duration {s:?} has an unknown unit {u:?} (use ns, us, ms or s)")),
    };
    let v = num.ok_or_else(|| format!("duration {s:?} is not a number followed by a unit"))?;
    let ns = (v * scale).round();
    if ns < 1.0 {
        return if zero_ok { Ok(Duration::ZERO) } else { Err(format!("duration {s:?} is zero")) };
    }
    if ns >= u64::MAX as f64 {
        return Err(format!("duration {s:?} is too large (at most {} s)", u64::MAX / 1_000_000_000));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// `s` as a decimal number (digits, at most one point between them: no
/// sign, no exponent) and the unit after it, trimmed; the number is `None`
/// when it is not one.
fn number_and_unit(s: &str) -> (Option<f64>, &str) {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let well_formed = !num.is_empty() && num.matches('.').count() <= 1 && !num.starts_with('.') && !num.ends_with('.');
    (well_formed.then(|| num.parse().ok()).flatten(), unit.trim())
}

/// A signal: a number, or a name with or without `SIG` in any case
/// (`SIGUSR1`, `USR1`, `sigquit`), or a real-time signal relative to
/// either end (`SIGRTMIN+2`, `RTMAX-3`, `SIGRTMIN`).
pub fn parse_signal(s: &str) -> Result<i32, String> {
    signal_number(s.as_bytes()).ok_or_else(|| {
        format!(
            "{s:?} is not a signal (a number in 1..={}, a name such as SIGUSR1 or USR1, or SIGRTMIN+N, SIGRTMAX-N within {}..={})",
            libc::SIGRTMAX(),
            libc::SIGRTMIN(),
            libc::SIGRTMAX()
        )
    })
}

/// [`parse_signal`] without allocating (it is read from signal handlers
/// and before the allocator may be used): `None` for anything else.
pub(crate) fn signal_number(s: &[u8]) -> Option<i32> {
    let t = s.trim_ascii();
    if let Some(n) = decimal(t) {
        return (1..=libc::SIGRTMAX()).contains(&n).then_some(n);
    }
    let name = match t.get(..3) {
        Some(p) if p.eq_ignore_ascii_case(b"SIG") => &t[3..],
        _ => t,
    };
    for (base, at) in [(&b"RTMIN"[..], libc::SIGRTMIN()), (&b"RTMAX"[..], libc::SIGRTMAX())] {
        let Some(p) = name.get(..5).filter(|p| p.eq_ignore_ascii_case(base)) else { continue };
        let rest = &name[p.len()..];
        let n = match rest.split_first() {
            None => at,
            Some((b'+', d)) => at.checked_add(decimal(d)?)?,
            Some((b'-', d)) => at.checked_sub(decimal(d)?)?,
            Some(_) => return None,
        };
        return (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n).then_some(n);
    }
    const NAMES: [(&[u8], i32); 23] = [
        (b"HUP", libc::SIGHUP), (b"INT", libc::SIGINT), (b"QUIT", libc::SIGQUIT), (b"ILL", libc::SIGILL),
        (b"TRAP", libc::SIGTRAP), (b"ABRT", libc::SIGABRT), (b"BUS", libc::SIGBUS), (b"FPE", libc::SIGFPE),
        (b"USR1", libc::SIGUSR1), (b"SEGV", libc::SIGSEGV), (b"USR2", libc::SIGUSR2), (b"PIPE", libc::SIGPIPE),
        (b"ALRM", libc::SIGALRM), (b"TERM", libc::SIGTERM), (b"CHLD", libc::SIGCHLD), (b"CONT", libc::SIGCONT),
        (b"TSTP", libc::SIGTSTP), (b"TTIN", libc::SIGTTIN), (b"TTOU", libc::SIGTTOU), (b"URG", libc::SIGURG),
        (b"PROF", libc::SIGPROF), (b"WINCH", libc::SIGWINCH), (b"PWR", libc::SIGPWR),
    ];
    NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, v)| v)
}

/// Up to four decimal digits, as a number.
fn decimal(d: &[u8]) -> Option<i32> {
    if d.is_empty() || d.len() > 4 || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(d.iter().fold(0, |n, c| n * 10 + i32::from(c - b'0')))
}

/// A count of at least 1 (`TURQ_WORKERS=4`); 0, negative and fractional
/// values are errors.
pub fn parse_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err(format!("{s:?} is zero (at least 1)")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number of at least 1")),
    }
}

/// A switch: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (in
/// any case).
pub fn parse_flag(s: &str) -> Result<bool, String> {
    flag_value(s.as_bytes()).ok_or_else(|| format!("{s:?} is neither 1 nor 0 (nor true/false, yes/no, on/off)"))
}

/// [`parse_flag`] without allocating: `None` for anything else.
pub(crate) fn flag_value(s: &[u8]) -> Option<bool> {
    let t = s.trim_ascii();
    let is = |words: [&[u8]; 4]| words.iter().any(|w| w.eq_ignore_ascii_case(t));
    if is([b"1", b"true", b"yes", b"on"]) {
        Some(true)
    } else if is([b"0", b"false", b"no", b"off"]) {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size(" 2 MiB "), Ok(2 << 20));
        assert_eq!(parse_size("1.5M"), Ok(3 << 19));
        for bad in ["", "abc", "1Q", "-1", "1..2K", ".5K"] {
            assert!(parse_size(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn durations_need_units_unless_the_name_gives_one() {
        assert_eq!(parse_duration("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration(" 2s "), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("800ns"), Ok(Duration::from_nanos(800)));
        assert_eq!(parse_duration("7\u{b5}s"), Ok(Duration::from_micros(7)));
        for bad in ["", "us", "100", "0us", "0.0001ns", "1.2.3ms", ".5ms", "5.ms", "-5ms", "5 minutes", "1e3us", "99999999999999s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        let us = Some(Duration::from_micros(1));
        assert_eq!(parse_duration_in("200", us, false), Ok(Duration::from_micros(200)));
        assert_eq!(parse_duration_in("2ms", us, false), Ok(Duration::from_millis(2)));
        assert_eq!(parse_duration_in("0", us, true), Ok(Duration::ZERO));
        assert!(parse_duration_in("0", us, false).is_err());
        assert!(parse_duration_in("-5", us, true).is_err());
    }

    #[test]
    fn signals_by_number_name_or_realtime_offset() {
        assert_eq!(parse_signal("10"), Ok(libc::SIGUSR1));
        assert_eq!(parse_signal("SIGUSR1"), Ok(libc::SIGUSR1));
        assert_eq!(parse_signal("usr2"), Ok(libc::SIGUSR2));
        assert_eq!(parse_signal("SIGRTMIN+2"), Ok(libc::SIGRTMIN() + 2));
        assert_eq!(parse_signal("RTMAX-3"), Ok(libc::SIGRTMAX() - 3));
        assert_eq!(parse_signal("SIGRTMIN"), Ok(libc::SIGRTMIN()));
        for bad in ["0", "999", "SIGNOPE", "SIGRTMAX+1", "RTMIN+x", ""] {
            assert!(parse_signal(bad).is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn counts_and_flags_refuse_what_they_do_not_know() {
        assert_eq!(parse_count("4"), Ok(4));
        for bad in ["0", "-1", "1.5", "many"] {
            assert!(parse_count(bad).is_err(), "{bad:?} was taken");
        }
        assert_eq!(parse_flag("yes"), Ok(true));
        assert_eq!(parse_flag("0"), Ok(false));
        assert!(parse_flag("2").is_err());
    }
}
