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
