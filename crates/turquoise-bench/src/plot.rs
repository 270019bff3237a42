//! The Figure 4 plot: short-request p99 against the share of long
//! requests, one line per server (SVG, text left to the viewer).

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::Row;

const COLORS: [RGBColor; 3] = [RGBColor(214, 39, 40), RGBColor(255, 127, 14), RGBColor(31, 119, 180)];

pub fn p99(path: &Path, rows: &[Row]) -> Result<(), Box<dyn Error>> {
    let servers = ["tokio", "tokio, wrapped", "turquoise 2 ms"];
    let max = rows.iter().map(|r| r.short_p99).max().unwrap_or(1).max(1) as f64 / 1000.0;
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Short-request p99 vs. long requests (hyper, 1 core)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..2.05f64, (0.3f64..(max * 1.5)).log_scale())?;
    chart.configure_mesh().x_desc("long requests (%)").y_desc("short p99 (ms)").draw()?;
    for (i, name) in servers.iter().enumerate() {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.server == *name)
            .map(|r| (r.permille as f64 / 10.0, (r.short_p99 as f64 / 1000.0).max(0.3)))
            .collect();
        let c = COLORS[i];
        chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?.label(*name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).position(SeriesLabelPosition::UpperLeft).draw()?;
    root.present()?;
    Ok(())
}
