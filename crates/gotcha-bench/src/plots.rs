//! SVG plots: regain-control time per way (a percentile box plot) and RSS
//! over the isolated bomb loop.

use std::error::Error;
use std::path::Path;

use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::bomb::{RssPoint, Sample, Way, TIMEOUT, WAYS};
use crate::stats::Summary;

type Res = Result<(), Box<dyn Error>>;

const BOX: RGBColor = RGBColor(31, 119, 180);
const ISOLATED: RGBColor = RGBColor(44, 160, 44);
const DEADLINE: RGBColor = RGBColor(214, 39, 40);
const FONT: &str = "sans-serif";

/// What one panel shows: which ways, and each sample's value.
struct View<'a> {
    title: &'a str,
    ways: &'a [Way],
    /// From a sample to the plotted value.
    value: fn(&Sample) -> f64,
    log: bool,
    y_desc: &'a str,
    /// A horizontal reference line (the deadline), in plotted units.
    line: Option<f64>,
}

fn summaries(v: &View, samples: &[Sample]) -> Vec<(usize, Way, Summary)> {
    v.ways
        .iter()
        .enumerate()
        .filter_map(|(i, &w)| {
            let vals: Vec<f64> = samples.iter().filter(|s| s.way == w).map(v.value).collect();
            Summary::of(&vals).map(|s| (i, w, s))
        })
        .collect()
}

fn label(x: f64) -> String {
    if x >= 100.0 || x == x.round() {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// One panel: p25-p75 box, p1-p99 whiskers, median bar, min and max dots.
fn panel<DB: DrawingBackend>(area: &DrawingArea<DB, plotters::coord::Shift>, v: &View, samples: &[Sample]) -> Res
where
    DB::ErrorType: 'static,
{
    let sums = summaries(v, samples);
    let line = v.line.into_iter();
    let lo = sums.iter().map(|x| x.2.min).chain(line.clone()).fold(f64::INFINITY, f64::min);
    let hi = sums.iter().map(|x| x.2.max).chain(line).fold(f64::NEG_INFINITY, f64::max);
    let n = v.ways.len() as f64;
    let xs = -0.5f64..(n - 0.5);
    let ways = v.ways;
    let name = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < ways.len() {
            ways[i as usize].short().to_owned()
        } else {
            String::new()
        }
    };
    let mut b = ChartBuilder::on(area);
    b.caption(v.title, (FONT, 16)).margin(10).x_label_area_size(40).y_label_area_size(60);
    if v.log {
        let mut chart = b.build_cartesian_2d(xs, (lo * 0.8..hi * 1.25).log_scale())?;
        mesh(&mut chart, v, &name)?;
        draw(&mut chart, v, &sums)
    } else {
        let pad = (hi - lo.min(0.0)) * 0.05;
        let mut chart = b.build_cartesian_2d(xs, lo.min(0.0)..hi + pad)?;
        mesh(&mut chart, v, &name)?;
        draw(&mut chart, v, &sums)
    }
}

type Chart<'a, DB, Y> = ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>;

/// Axes: the ways below, the values at the left.
fn mesh<'a, DB, Y>(chart: &mut Chart<'a, DB, Y>, v: &View, name: &dyn Fn(&f64) -> String) -> Res
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(v.ways.len())
        .x_label_formatter(name)
        .y_desc(v.y_desc)
        .y_label_formatter(&|y| label(*y))
        .label_style((FONT, 13))
        .draw()?;
    Ok(())
}

fn draw<'a, DB, Y>(chart: &mut Chart<'a, DB, Y>, v: &View, sums: &[(usize, Way, Summary)]) -> Res
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    let n = v.ways.len() as f64;
    if let Some(y) = v.line {
        chart
            .draw_series(std::iter::once(PathElement::new(vec![(-0.5, y), (n - 0.5, y)], DEADLINE.stroke_width(1))))?
            .label("deadline")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], DEADLINE.stroke_width(1)));
    }
    for (i, w, s) in sums {
        let x = *i as f64;
        let c = if *w == Way::Isolated { ISOLATED } else { BOX };
        chart.draw_series(std::iter::once(Rectangle::new([(x - 0.25, s.p25), (x + 0.25, s.p75)], c.mix(0.35).filled())))?;
        chart.draw_series([
            PathElement::new(vec![(x, s.p1), (x, s.p25)], c.stroke_width(1)),
            PathElement::new(vec![(x, s.p75), (x, s.p99)], c.stroke_width(1)),
            PathElement::new(vec![(x - 0.1, s.p1), (x + 0.1, s.p1)], c.stroke_width(1)),
            PathElement::new(vec![(x - 0.1, s.p99), (x + 0.1, s.p99)], c.stroke_width(1)),
            PathElement::new(vec![(x - 0.25, s.p50), (x + 0.25, s.p50)], BLACK.stroke_width(2)),
        ])?;
        chart.draw_series([s.min, s.max].map(|y| Circle::new((x, y), 2, c.filled())))?;
    }
    if v.line.is_some() {
        // Below the boxes on a linear axis (they start well above 0), in
        // the empty decades between the ways on a log one.
        let at = if v.log { SeriesLabelPosition::MiddleRight } else { SeriesLabelPosition::LowerRight };
        chart.configure_series_labels().position(at).border_style(BLACK).background_style(WHITE.mix(0.9)).label_font((FONT, 12)).draw()?;
    }
    Ok(())
}

/// Regain-control time of each way: the benign image, the bomb, and the
/// bomb's two interruptible ways beyond the deadline.
pub fn regain(path: &Path, benign: &[Sample], bomb: &[Sample]) -> Res {
    let root = SVGBackend::new(path, (1350, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((1, 3));
    let ms = |s: &Sample| s.ns / 1e6;
    let deadline_ms = TIMEOUT.as_secs_f64() * 1e3;
    panel(
        &areas[0],
        &View { title: "benign image (box p25-p75, whiskers p1-p99)", ways: &WAYS, value: ms, log: false, y_desc: "time to regain control (ms)", line: Some(deadline_ms) },
        benign,
    )?;
    panel(
        &areas[1],
        &View { title: "decompression bomb, 10 ms budget", ways: &WAYS, value: ms, log: true, y_desc: "time to regain control (ms, log)", line: Some(deadline_ms) },
        bomb,
    )?;
    panel(
        &areas[2],
        &View {
            title: "bomb: control back after the deadline",
            ways: &[Way::Fork, Way::Isolated],
            // Clamped to 1 us for the log scale: a stop can come a few us
            // before the benchmark's clock sees 10 ms (linger keeps its own).
            value: |s| (s.ns / 1e3 - TIMEOUT.as_secs_f64() * 1e6).max(1.0),
            log: true,
            y_desc: "beyond the 10 ms deadline (us, log)",
            line: None,
        },
        bomb,
    )?;
    root.present()?;
    Ok(())
}

/// RSS (and linger's abandoned stack bytes) over the isolated bomb loop.
pub fn rss(path: &Path, points: &[RssPoint]) -> Res {
    let root = SVGBackend::new(path, (800, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mib = |k: u64| k as f64 / 1024.0;
    let xmax = points.iter().map(|p| p.iteration).max().unwrap_or(1).max(1) as f64;
    let ymax = points.iter().map(|p| mib(p.rss_kib.max(p.abandoned_kib))).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("memory over isolated bomb decodes, each cancelled", (FONT, 18))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("isolated bomb decodes cancelled")
        .y_desc("MiB")
        .label_style((FONT, 13))
        .draw()?;
    chart
        .draw_series(LineSeries::new(points.iter().map(|p| (p.iteration as f64, mib(p.rss_kib))), BOX.stroke_width(2)))?
        .label("process RSS (/proc/self/statm)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BOX.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(points.iter().map(|p| (p.iteration as f64, mib(p.abandoned_kib))), ISOLATED.stroke_width(2)))?
        .label("stack bytes linger abandoned (still mapped)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], ISOLATED.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .label_font((FONT, 12))
        .draw()?;
    root.present()?;
    Ok(())
}
