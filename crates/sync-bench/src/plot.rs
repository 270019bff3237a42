//! Horizontal bar charts: one bar per row, its median, a whisker over its
//! spread (SVG, text left to the viewer).

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

/// A bar: label, median, low and high end of the spread.
pub type Bar = (String, f64, f64, f64);

/// Draws `bars` (top to bottom) against `unit`, on a log axis when `log`.
pub fn bars(path: &Path, title: &str, unit: &str, bars: &[Bar], log: bool) -> Result<(), Box<dyn Error>> {
    if bars.is_empty() {
        return Ok(());
    }
    let hi = bars.iter().map(|b| b.3.max(b.1)).fold(0f64, f64::max).max(1e-3);
    let lo = bars.iter().map(|b| b.2.min(b.1)).fold(f64::MAX, f64::min).max(1e-3);
    let height = 80 + 26 * bars.len() as u32;
    let root = SVGBackend::new(path, (860, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = bars.len() as f64;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 16)).margin(10).x_label_area_size(35).y_label_area_size(10);
    let color = RGBColor(31, 119, 180).mix(0.35);
    // Row i (from the top) spans y in [n-1-i, n-i]; its label is written
    // over its bar, from the left.
    let y = |i: usize| n - 1.0 - i as f64;
    macro_rules! draw {
        ($chart:expr, $x0:expr) => {{
            let mut chart = $chart;
            chart.configure_mesh().disable_y_axis().disable_y_mesh().x_desc(unit).draw()?;
            chart.draw_series(bars.iter().enumerate().map(|(i, b)| Rectangle::new([($x0, y(i) + 0.15), (b.1, y(i) + 0.85)], color.filled())))?;
            chart.draw_series(bars.iter().enumerate().map(|(i, b)| PathElement::new(vec![(b.2, y(i) + 0.5), (b.3, y(i) + 0.5)], BLACK.stroke_width(2))))?;
            chart.draw_series(bars.iter().enumerate().map(|(i, b)| Text::new(b.0.clone(), ($x0, y(i) + 0.75), ("sans-serif", 13))))?;
        }};
    }
    if log {
        let x0 = lo / 2.0;
        draw!(b.build_cartesian_2d((x0..hi * 3.0).log_scale(), 0f64..n)?, x0);
    } else {
        draw!(b.build_cartesian_2d(0f64..hi * 1.1, 0f64..n)?, 0.0);
    }
    root.present()?;
    Ok(())
}

/// A point of [`curves`]: x, median, low and high end of the spread.
pub type Point = (f64, f64, f64, f64);

/// Each curve's points (label, points) joined by a line with whiskers over
/// their spread, and horizontal reference lines (`levels`: label, value),
/// on a log y axis up to a little over the highest median or level
/// (whiskers are cut there).
pub fn curves(path: &Path, title: &str, x_desc: &str, y_desc: &str, curves: &[(String, Vec<Point>)], levels: &[(String, f64)]) -> Result<(), Box<dyn Error>> {
    let all = || curves.iter().flat_map(|c| c.1.iter());
    if all().next().is_none() {
        return Ok(());
    }
    let x_hi = all().map(|p| p.0).fold(0f64, f64::max) + 0.5;
    let y_hi = all().map(|p| p.1).chain(levels.iter().map(|l| l.1)).fold(0f64, f64::max).max(1e-9) * 1.5;
    let y_lo = all().map(|p| p.2.min(p.1)).chain(levels.iter().map(|l| l.1)).fold(f64::MAX, f64::min).max(y_hi * 1e-6) / 1.5;
    let root = SVGBackend::new(path, (860, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root).caption(title, ("sans-serif", 16)).margin(10).x_label_area_size(35).y_label_area_size(60).build_cartesian_2d(-0.5f64..x_hi, (y_lo..y_hi).log_scale())?;
    let short = |v: &f64| format!("{v:.3}").trim_end_matches('0').trim_end_matches('.').to_string();
    chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).x_label_formatter(&|v| format!("{v:.0}")).y_label_formatter(&short).draw()?;
    let palette = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];
    for (i, (label, points)) in curves.iter().enumerate() {
        let c = palette[i % palette.len()];
        chart.draw_series(std::iter::once(PathElement::new(points.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), c.stroke_width(2))))?.label(label.clone()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(points.iter().map(|p| Circle::new((p.0, p.1), 3, c.filled())))?;
        chart.draw_series(points.iter().map(|p| PathElement::new(vec![(p.0, p.2.min(y_hi)), (p.0, p.3.min(y_hi))], c.stroke_width(1))))?;
    }
    for (i, (label, v)) in levels.iter().enumerate() {
        let c = palette[(curves.len() + i) % palette.len()];
        chart.draw_series(std::iter::once(PathElement::new(vec![(-0.5, *v), (x_hi, *v)], c.stroke_width(1))))?.label(label.clone()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(1)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw()?;
    root.present()?;
    Ok(())
}
