//! The section's plots, as the seed's figures: throughput and p99 against
//! concurrent connections, one line per server; short-request p99 with and
//! without long requests (SVG, text left to the viewer).

use std::error::Error;
use std::path::Path;

use plotters::coord::ranged1d::{Ranged, SegmentValue, SegmentedCoord};
use plotters::coord::types::RangedCoordu32;
use plotters::prelude::*;

use green_bench::servers::Kind;

use crate::report::{Key, Results, Sample, Sweep};

fn color(k: Kind) -> RGBColor {
    match k {
        Kind::Green => RGBColor(44, 160, 44),
        Kind::GreenWhole => RGBColor(140, 200, 120),
        Kind::GreenFine => RGBColor(23, 190, 207),
        Kind::Epoll => RGBColor(31, 119, 180),
        Kind::Tokio => RGBColor(255, 127, 14),
        Kind::Go => RGBColor(148, 103, 189),
        Kind::Pthread => RGBColor(214, 39, 40),
    }
}

/// The x axis: one evenly spaced slot per connection count, labelled.
type X = SegmentedCoord<RangedCoordu32>;

fn x_axis(conns: &[usize]) -> X {
    // The range's end is a slot too.
    (0..conns.len().max(2) as u32 - 1).into_segmented()
}

fn x_label(conns: &[usize]) -> impl Fn(&SegmentValue<u32>) -> String + '_ {
    move |v| match v {
        SegmentValue::CenterOf(i) => conns.get(*i as usize).map(|c| crate::report::count(*c as f64)).unwrap_or_default(),
        _ => String::new(),
    }
}

/// Labels of a log axis of milliseconds.
fn ms_label(v: &f64) -> String {
    if *v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// One line per server of `f`'s median over runs, against the slot of
/// each connection count.
fn lines(r: &Results, sweep: Sweep, permille: u32, f: &dyn Fn(&Sample) -> f64) -> Vec<(Kind, Vec<(u32, f64)>)> {
    let (kinds, conns) = r.axes(sweep);
    kinds
        .into_iter()
        .map(|kind| {
            let pts = conns.iter().enumerate().filter_map(|(i, &conns)| r.stat(&Key { sweep, conns, kind, permille }, f).map(|t| (i as u32, t.0))).collect();
            (kind, pts)
        })
        .collect()
}

fn at(pts: &[(u32, f64)]) -> Vec<(SegmentValue<u32>, f64)> {
    pts.iter().map(|&(i, y)| (SegmentValue::CenterOf(i), y)).collect()
}

/// Draws each server's line with its points and legend entry.
fn draw<DB, Y>(chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>, data: &[(Kind, Vec<(u32, f64)>)]) -> Result<(), Box<dyn Error>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64>,
{
    for (k, pts) in data {
        let c = color(*k);
        chart.draw_series(LineSeries::new(at(pts), c.stroke_width(2)))?.label(k.label()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(at(pts).into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    Ok(())
}

/// Throughput (`p99` false) or p99 latency against connections, closed loop.
pub fn closed(path: &Path, r: &Results, p99: bool) -> Result<(), Box<dyn Error>> {
    let (_, conns) = r.axes(Sweep::Closed);
    let f: &dyn Fn(&Sample) -> f64 = if p99 { &|s| s.p99 as f64 / 1000.0 } else { &|s| s.throughput };
    let data = lines(r, Sweep::Closed, 0, f);
    let ys = data.iter().flat_map(|(_, p)| p.iter().map(|q| q.1));
    let (lo, hi) = ys.fold((f64::MAX, 0f64), |(a, b), y| (a.min(y), b.max(y)));
    let root = SVGBackend::new(path, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut b = ChartBuilder::on(&root);
    b.margin(12).x_label_area_size(40).y_label_area_size(70);
    let xl = x_label(&conns);
    if p99 {
        let mut chart = b
            .caption("p99 latency vs. concurrent connections (closed loop, 1 server core)", ("sans-serif", 17))
            .build_cartesian_2d(x_axis(&conns), ((lo / 1.5).max(0.001)..(hi * 6.0).max(0.01)).log_scale())?;
        chart.configure_mesh().x_desc("concurrent connections").y_desc("p99 (ms)").x_label_formatter(&xl).y_label_formatter(&ms_label).draw()?;
        draw(&mut chart, &data)?;
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperLeft).draw()?;
    } else {
        let mut chart = b.caption("Throughput vs. concurrent connections (closed loop, 1 server core)", ("sans-serif", 17)).build_cartesian_2d(x_axis(&conns), 0f64..(hi * 1.5).max(1.0))?;
        let yl = |v: &f64| crate::report::count(*v);
        chart.configure_mesh().x_desc("concurrent connections").y_desc("requests/s").x_label_formatter(&xl).y_label_formatter(&yl).draw()?;
        draw(&mut chart, &data)?;
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw()?;
    }
    root.present()?;
    Ok(())
}

/// Short-request p99 with (solid) and without (dashed) 1% long requests.
pub fn hol(path: &Path, r: &Results) -> Result<(), Box<dyn Error>> {
    let (_, conns) = r.axes(Sweep::Hol);
    if conns.is_empty() {
        return Ok(());
    }
    let p99 = |s: &Sample| s.p99 as f64 / 1000.0;
    let without = lines(r, Sweep::Hol, 0, &p99);
    let with = lines(r, Sweep::Hol, 10, &p99);
    let ys = without.iter().chain(&with).flat_map(|(_, p)| p.iter().map(|q| q.1));
    let (lo, hi) = ys.fold((f64::MAX, 0f64), |(a, b), y| (a.min(y), b.max(y)));
    let root = SVGBackend::new(path, (720, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Short-request p99, with (solid) and without (dashed) 1% 20 ms requests", ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_axis(&conns), ((lo / 1.5).max(0.001)..(hi * 8.0).max(0.01)).log_scale())?;
    let xl = x_label(&conns);
    chart.configure_mesh().x_desc("concurrent connections (open loop)").y_desc("short p99 (ms)").x_label_formatter(&xl).y_label_formatter(&ms_label).draw()?;
    draw(&mut chart, &with)?;
    for (k, pts) in without {
        let c = color(k);
        chart.draw_series(DashedLineSeries::new(at(&pts), 6, 4, c.stroke_width(2)))?;
        chart.draw_series(at(&pts).into_iter().map(|p| Circle::new(p, 3, c.stroke_width(1))))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperLeft).draw()?;
    root.present()?;
    Ok(())
}
