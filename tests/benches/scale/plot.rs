//! The per-second worst count partition key of each design against the partition limit, as
//! an SVG. Log scale: the naive counter sits two orders of magnitude above the design.

use std::path::Path;

use plotters::prelude::*;

use crate::report::{Column, WCU_PER_PARTITION_SECOND};

pub fn worst_key_wcu(columns: &[Column], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let seconds = columns
        .iter()
        .map(|c| c.counts_wcu.worst.len())
        .max()
        .unwrap_or(1) as f64;
    let top = columns
        .iter()
        .map(|c| c.counts_wcu.peak().0)
        .chain([WCU_PER_PARTITION_SECOND])
        .max()
        .unwrap_or(1) as f64
        // Headroom above the highest line, for the legend.
        * 30.0;
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Worst count partition key per second (simulated AWS topology)",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..seconds, (1.0..top).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("simulated second")
        .y_desc("WCU/s on one partition key")
        .x_label_formatter(&|s| format!("{s:.0}"))
        .y_label_formatter(&|wcu| format!("{wcu:.0}"))
        .draw()?;
    let palette = [BLUE, RED, GREEN];
    for (column, color) in columns.iter().zip(palette) {
        let points = column
            .counts_wcu
            .worst_units()
            .into_iter()
            .enumerate()
            // A second without writes has no place on a log scale: draw it on the floor.
            .map(|(s, wcu)| (s as f64, (wcu as f64).max(1.0)));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(column.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    let limit = WCU_PER_PARTITION_SECOND as f64;
    chart
        .draw_series(LineSeries::new(
            [(0.0, limit), (seconds, limit)],
            BLACK.stroke_width(1),
        ))?
        .label("limit: 1000 WCU/s per partition")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
