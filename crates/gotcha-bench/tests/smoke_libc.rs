//! The `--libc` variant's path, briefly: with libc isolated too, the
//! isolated way still stops the bomb and decodes the same pixels.

use gotcha_bench::bomb::{self, Outcome, Runner, Way};
use gotcha_bench::png::Png;

#[test]
fn with_libc_isolated_the_bomb_stops_and_the_pixels_match() {
    let report = gotcha_bench::isolate("libpng16,libz,libc").unwrap();
    assert!(report.libraries.iter().any(|l| l.contains("libc.so")), "{report:?}");
    for (way, same) in bomb::check_pixels(&Runner::new(std::time::Duration::from_secs(60)), Png::benign(320, 240)).unwrap() {
        assert!(same, "{way:?} decoded other pixels than a direct call");
    }
    let bomb_png = Png::bomb(4000, 4000);
    let runner = Runner::new(bomb::TIMEOUT);
    let mut buf = vec![0xAAu8; bomb_png.rgb_bytes()];
    for _ in 0..10 {
        *buf.last_mut().unwrap() = 0xAA;
        let s = runner.run(Way::Isolated, bomb_png, &mut buf).unwrap();
        assert!(matches!(s.outcome, Outcome::Stopped { .. }), "{s:?}");
        assert_eq!(*buf.last().unwrap(), 0xAA, "the isolated decode ran to its end");
    }
    assert_eq!(runner.finish().len(), 10, "every isolated continuation reached the reaper");
}
