//! The bomb benchmark's path, briefly: behaviour only, never speed.

use gotcha_bench::bomb::{self, Outcome, Runner, Way};
use gotcha_bench::png::Png;

#[test]
fn the_isolated_way_stops_the_bomb_and_decodes_the_same_pixels() {
    gotcha_bench::isolate("libpng16,libz").unwrap();
    let benign = Png::benign(320, 240);
    // About 50 MB of pixels: tens of milliseconds to decode, several
    // times the 10 ms budget.
    let bomb_png = Png::bomb(4000, 4000);
    let runner = Runner::new(bomb::TIMEOUT);

    // The same pixels from every in-process way as from a direct call.
    for (way, same) in bomb::check_pixels(&Runner::new(std::time::Duration::from_secs(60)), benign).unwrap() {
        assert!(same, "{way:?} decoded other pixels than a direct call");
    }

    // The bomb fills its buffer with zeros from the top: a buffer whose
    // last byte is still 0xAA was never finished.
    let mut buf = vec![0xAAu8; bomb_png.rgb_bytes()];
    for _ in 0..5 {
        *buf.last_mut().unwrap() = 0xAA;
        let s = runner.run(Way::Isolated, bomb_png, &mut buf).unwrap();
        assert!(matches!(s.outcome, Outcome::Stopped { .. }), "{s:?}");
        assert_eq!(*buf.last().unwrap(), 0xAA, "the isolated decode ran to its end");
    }
    // Without isolation the deadline waits for libpng to return.
    *buf.last_mut().unwrap() = 0xAA;
    let s = runner.run(Way::Linger, bomb_png, &mut buf).unwrap();
    assert!(matches!(s.outcome, Outcome::Stopped { deferred: true, .. } | Outcome::Completed), "{s:?}");
    assert_eq!(*buf.last().unwrap(), 0, "the shared libpng was stopped before it returned");
    // The forked child is killed; the parent's buffer is never written.
    *buf.last_mut().unwrap() = 0xAA;
    let s = runner.run(Way::Fork, bomb_png, &mut buf).unwrap();
    assert_eq!(s.outcome, Outcome::Killed);
    assert_eq!(*buf.last().unwrap(), 0xAA);

    let reaped = runner.finish();
    assert_eq!(reaped.len(), 5, "every isolated continuation reached the reaper");
    assert!(gotcha::stats().resets >= 5);
}
