//! SVG plots (plotters' SVG backend without font features: text is written as
//! SVG `<text>` and rendered by the viewer, so no system fonts are needed).

use std::error::Error;
use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::accuracy::Point;
use crate::latency::{Key, Latency};
use crate::run::{Mode as RunMode, RunBench, MODES};
use crate::throughput::{Mode, Throughput, SLICES_US};

type Res = Result<(), Box<dyn Error>>;

const LINGER: RGBColor = RGBColor(31, 119, 180);
const LINGER_LIGHT: RGBColor = RGBColor(120, 175, 220);
const LINGER_DARK: RGBColor = RGBColor(10, 50, 110);
const BASE: RGBColor = RGBColor(214, 39, 40);
const BASE_DARK: RGBColor = RGBColor(130, 20, 20);
const BASE_LIGHT: RGBColor = RGBColor(240, 150, 150);
const GREY: RGBColor = RGBColor(150, 150, 150);
const FONT: &str = "sans-serif";

fn short(k: Key) -> &'static str {
    match k {
        Key::Clock => "clock_gettime",
        Key::Call => "plain call",
        Key::LaunchReturn => "launch + return",
        Key::CLaunchReturn => "C: launch + return",
        Key::CoroutineLaunch => "bare coroutine create+run",
        Key::LaunchPause => "launch until pause()",
        Key::ResumePause => "resume until pause()",
        Key::CResumePause => "C: resume until pause()",
        Key::PauseRoundTrip => "pause() round trip",
        Key::CoroutineSwitch => "bare coroutine switch",
        Key::PreemptResume => "preempt + resume (beyond 5 us)",
        Key::RawTimerCycle => "raw timer cycle (beyond 5 us)",
        Key::PreemptExpired => "preempt + resume, passed deadline",
        Key::RawTimerExpired => "raw timer, passed deadline",
        Key::Tgkill => "raw signal round trip",
        Key::ArmNear => "raw timer_settime, 100 us ahead",
        Key::ArmFar => "raw timer_settime, 10 ms ahead",
        Key::CancelPaused => "cancel paused fn",
        Key::CancelPreempted => "cancel preempted fn",
        Key::Thread => "thread spawn + join",
        Key::Fork => "fork + exit + waitpid",
    }
}

/// Tick label for a power of ten nanoseconds: "1 ns", "10 us", ...
fn decade(ns: f64) -> String {
    let (v, unit) = if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "us")
    } else {
        (ns, "ns")
    };
    format!("{} {unit}", (v * 100.0).round() / 100.0)
}

fn legend_line(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
}

/// Draws the legend box the same way on every plot.
fn finish<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>, at: SeriesLabelPosition) -> Res
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(at)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .label_font((FONT, 13))
        .draw()?;
    Ok(())
}

/// Horizontal dot plot of medians with p10-p90 bars, log time axis.
pub fn latency(path: &Path, l: &Latency) -> Res {
    let rows: Vec<_> = l.rows.iter().rev().collect();
    let n = rows.len() as i32;
    let lo = rows.iter().map(|r| r.s.p10).fold(f64::INFINITY, f64::min).max(0.5) / 2.0;
    let hi = rows.iter().map(|r| r.s.p90).fold(0.0, f64::max) * 2.0;
    let root = SVGBackend::new(path, (960, 40 + 34 * n as u32 + 80)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency per operation (median, p10-p90)", (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(250)
        .build_cartesian_2d((lo..hi).log_scale(), (0..n - 1).into_segmented())?;
    let names: Vec<&str> = rows.iter().map(|r| short(r.key)).collect();
    chart
        .configure_mesh()
        .x_desc("time per operation (log scale)")
        .y_labels(n as usize)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).copied().unwrap_or("").to_owned(),
            _ => String::new(),
        })
        .x_label_formatter(&|x| decade(*x))
        .label_style((FONT, 13))
        .draw()?;
    for (i, r) in rows.iter().enumerate() {
        let c = if r.baseline { BASE } else { LINGER };
        let y = SegmentValue::CenterOf(i as i32);
        chart.draw_series(std::iter::once(ErrorBar::new_horizontal(
            y.clone(),
            r.s.p10,
            r.s.p50,
            r.s.p90,
            c.stroke_width(2),
            10,
        )))?;
        chart.draw_series(std::iter::once(Circle::new((r.s.p50, y), 5, c.filled())))?;
    }
    chart
        .draw_series(std::iter::empty::<Circle<(f64, SegmentValue<i32>), i32>>())?
        .label("linger")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, LINGER.filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, SegmentValue<i32>), i32>>())?
        .label("baseline")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, BASE.filled()));
    finish(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

/// Overrun percentiles vs timeout, log-log.
pub fn accuracy(path: &Path, a: &[Point]) -> Res {
    let us = |ns: f64| (ns / 1000.0).max(0.05);
    let lo = a.iter().map(|p| us(p.linger.p50).min(us(p.raw.p50))).fold(f64::INFINITY, f64::min).min(1.0) / 2.0;
    let hi = a.iter().map(|p| us(p.linger.max).max(us(p.raw.max))).fold(0.0, f64::max).max(25.0) * 2.0;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Time from deadline to caller regaining control", (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((30f64..15_000f64).log_scale(), (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("timeout (us, log scale)")
        .y_desc("overrun (us, log scale)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| if *y < 1.0 { format!("{y:.1}") } else { format!("{y:.0}") })
        .label_style((FONT, 13))
        .draw()?;
    let x = |p: &Point| p.timeout_ns as f64 / 1000.0;
    type Pick = fn(&Point) -> f64;
    let series: [(&str, RGBColor, Pick); 6] = [
        ("linger p50", LINGER, |p| p.linger.p50),
        ("linger p99", LINGER_DARK, |p| p.linger.p99),
        ("linger max", LINGER_LIGHT, |p| p.linger.max),
        ("raw timer p50", BASE, |p| p.raw.p50),
        ("raw timer p99", BASE_DARK, |p| p.raw.p99),
        ("raw timer max", BASE_LIGHT, |p| p.raw.max),
    ];
    for (name, c, f) in series {
        let pts: Vec<(f64, f64)> = a.iter().map(|p| (x(p), us(f(p)))).collect();
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?.label(name).legend(legend_line(c));
        chart.draw_series(pts.iter().map(|&pt| Circle::new(pt, 3, c.filled())))?;
    }
    chart
        .draw_series(
            [5.0, 20.0].map(|goal| PathElement::new(vec![(30.0, goal), (15_000.0, goal)], GREY.stroke_width(2))),
        )?
        .label("targets: p50 5 us, p99 20 us")
        .legend(legend_line(GREY));
    finish(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

/// Throughput ratio vs slice length for linger and raw periodic signals.
pub fn throughput(path: &Path, tp: &Throughput) -> Res {
    let pts = |m: fn(u64) -> Mode| -> Vec<(f64, f64)> {
        SLICES_US.iter().filter_map(|&us| tp.find(m(us)).map(|c| (us as f64, tp.ratio(c)))).collect()
    };
    let lin = pts(Mode::Linger);
    let raw = pts(Mode::Signals);
    let lo = lin.iter().chain(&raw).map(|p| p.1).fold(1.0, f64::min).min(0.9);
    let lo = (lo * 20.0).floor() / 20.0;
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput of CPU-bound work vs direct call", (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((10f64..2_000f64).log_scale(), lo..1.02f64)?;
    chart
        .configure_mesh()
        .x_desc("slice / signal interval (us, log scale)")
        .y_desc("throughput relative to direct call")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
        .label_style((FONT, 13))
        .draw()?;
    for (name, c, p) in [("linger slices", LINGER, &lin), ("raw periodic timer signal", BASE, &raw)] {
        chart.draw_series(LineSeries::new(p.clone(), c.stroke_width(2)))?.label(name).legend(legend_line(c));
        chart.draw_series(p.iter().map(|&pt| Circle::new(pt, 4, c.filled())))?;
    }
    chart
        .draw_series([(100.0, 0.95), (1000.0, 0.99)].map(|pt| Cross::new(pt, 6, BLACK.stroke_width(2))))?
        .label("targets (95% at 100 us, 99% at 1 ms)")
        .legend(|(x, y)| Cross::new((x + 10, y), 5, BLACK.stroke_width(2)));
    chart.draw_series(LineSeries::new(vec![(10.0, 1.0), (2000.0, 1.0)], GREY.stroke_width(1)))?;
    finish(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

fn run_color(m: RunMode) -> RGBColor {
    match m {
        RunMode::Plain => GREY,
        RunMode::NoSlice => RGBColor(185, 210, 235),
        RunMode::Slice(us) if us >= 1000 => LINGER_LIGHT,
        RunMode::Slice(us) if us >= 100 => LINGER,
        RunMode::Slice(_) => LINGER_DARK,
    }
}

/// Grouped bars: each program's median wall time per mode relative to its
/// plain median, with the min - max of the runs as error bars.
pub fn run_overhead(path: &Path, b: &RunBench) -> Res {
    let n = b.programs.len();
    let width = 0.8 / MODES.len() as f64;
    let hi = b
        .programs
        .iter()
        .flat_map(|p| p.modes.iter().map(move |m| m.wall_max() / p.plain().wall()))
        .fold(1.0, f64::max)
        * 1.35; // headroom for the value labels and the legend
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Real programs under linger-run: run time relative to the plain run", (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(65)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..hi)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("wall time / plain median (bars: median, whiskers: min - max)")
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style((FONT, 13))
        .draw()?;
    let value = TextStyle::from((FONT, 11)).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (i, p) in b.programs.iter().enumerate() {
        let plain = p.plain().wall();
        for (k, m) in p.modes.iter().enumerate() {
            let x0 = i as f64 - 0.4 + k as f64 * width;
            let xc = x0 + width / 2.0;
            let r = m.wall() / plain;
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0 + width * 0.08, 0.0), (x0 + width * 0.92, r)],
                run_color(m.mode).filled(),
            )))?;
            let (lo, top) = (m.wall_min() / plain, m.wall_max() / plain);
            chart.draw_series(std::iter::once(ErrorBar::new_vertical(xc, lo, r, top, BLACK.stroke_width(1), 6)))?;
            chart.draw_series(std::iter::once(Text::new(format!("{r:.2}"), (xc, top + hi * 0.01), value.clone())))?;
        }
        let (px, py) = chart.backend_coord(&(i as f64, 0.0));
        root.draw(&Text::new(
            p.name.clone(),
            (px, py + 10),
            TextStyle::from((FONT, 15)).pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    chart.draw_series(LineSeries::new(vec![(-0.5, 1.0), (n as f64 - 0.5, 1.0)], GREY.stroke_width(1)))?;
    for m in MODES {
        let c = run_color(m);
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
            .label(m.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], c.filled()));
    }
    finish(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::run::{ModeResult, ProgResult, RunBench, RunStats, Sample, MODES};

    #[test]
    fn run_overhead_plot_renders() {
        let prog = |name: &str, scale: f64| ProgResult {
            name: name.into(),
            shown: String::new(),
            what: String::new(),
            note: None,
            output: String::new(),
            stderr: Vec::new(),
            modes: MODES
                .iter()
                .enumerate()
                .map(|(k, &mode)| ModeResult {
                    mode,
                    samples: (0..3)
                        .map(|i| Sample {
                            wall_ns: 1e9 * (1.0 + scale * k as f64) + i as f64 * 2e7,
                            cpu_ns: 1e9,
                            stats: (k > 0).then(RunStats::default),
                        })
                        .collect(),
                })
                .collect(),
        };
        let b = RunBench { reps: 3, programs: vec![prog("gzip", 0.5), prog("python3.11", 0.1)], skipped: Vec::new() };
        let path = std::env::temp_dir().join(format!("linger-bench-test-{}.svg", std::process::id()));
        super::run_overhead(&path, &b).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("python3.11") && svg.contains("--slice 100us"));
    }
}

/// Library-heavy loops: overrun p50 and p99 per loop (log axis), with the
/// target line at the spin loop's p99 + 50 us.
pub fn libloops(path: &Path, rows: &[crate::libloops::LoopRow]) -> Res {
    let us = |ns: f64| (ns / 1000.0).max(1.0);
    let rows_rev: Vec<_> = rows.iter().rev().collect();
    let n = rows_rev.len() as i32;
    let goal = us(rows.first().map_or(0.0, |r| r.overrun.p99) + crate::report::LIBLOOP_SLACK_NS);
    let hi = rows.iter().map(|r| us(r.overrun.max)).fold(goal, f64::max) * 2.0;
    let root = SVGBackend::new(path, (960, 40 + 40 * n as u32 + 80)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Overrun of library-heavy loops, 100 us timeouts (p50, p99, max)", (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(260)
        .build_cartesian_2d((0.5f64..hi).log_scale(), (0..n - 1).into_segmented())?;
    let names: Vec<&str> = rows_rev.iter().map(|r| r.name).collect();
    chart
        .configure_mesh()
        .x_desc("overrun (us, log scale)")
        .y_labels(n as usize)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).map(|s| s.replace('`', "")).unwrap_or_default(),
            _ => String::new(),
        })
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style((FONT, 13))
        .draw()?;
    type Pick = fn(&crate::libloops::LoopRow) -> f64;
    let series: [(&str, RGBColor, Pick); 3] =
        [("p50", LINGER_LIGHT, |r| r.overrun.p50), ("p99", LINGER, |r| r.overrun.p99), ("max", LINGER_DARK, |r| r.overrun.max)];
    for (name, c, f) in series {
        chart
            .draw_series(
                rows_rev.iter().enumerate().map(|(i, r)| Circle::new((us(f(r)), SegmentValue::CenterOf(i as i32)), 5, c.filled())),
            )?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
    }
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(goal, SegmentValue::Exact(0)), (goal, SegmentValue::Last)],
            GREY.stroke_width(2),
        )))?
        .label("target: spin p99 + 50 us")
        .legend(legend_line(GREY));
    finish(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}
