//! The stampede report's plots: SVG files drawn with `plotters` from the report's
//! [`Timeline`], written beside the JSON report.
//!
//! - `<report>-answers.svg`: final answers per second over time, one line per answerer and
//!   result (`edge/sold_out`, `origin/claimed`, …);
//! - `<report>-latency.svg`: latency p50 and p99 of the final answers over time, ms;
//! - `<report>-remaining.svg`: the remaining stock over time, as the crowd saw it;
//! - `<report>-queue.svg` (with `--waiting-room`): customers waiting (the queue length) and
//!   admitted in all (now serving) over time, as the crowd saw them.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use plotters::prelude::*;

use super::report::series::Timeline;

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Size of every plot, pixels.
const SIZE: (u32, u32) = (960, 480);

/// One line of a plot: its label and its value per bucket (`None`: no value there).
struct Line<'a> {
    label: String,
    values: Box<dyn Iterator<Item = Option<f64>> + 'a>,
}

/// Draws the plots of `timeline` beside `report` (a path ending in `.json` or not); returns
/// the paths written. Errors: a file that cannot be written.
pub fn write_all(report: &Path, timeline: &Timeline) -> anyhow::Result<Vec<PathBuf>> {
    if timeline.is_empty() {
        return Ok(Vec::new());
    }
    let stem = report.with_extension("");
    let path = |name: &str| PathBuf::from(format!("{}-{name}.svg", stem.display()));
    let mut written = Vec::new();

    let answers = timeline
        .answers_per_s
        .iter()
        .map(|(label, v)| Line {
            label: label.clone(),
            values: Box::new(v.iter().map(|&x| Some(x))),
        })
        .collect();
    let p = path("answers");
    draw(
        &p,
        timeline,
        "final answers per second",
        "answers/s",
        answers,
    )?;
    written.push(p);

    let latency = vec![
        Line {
            label: "p50".into(),
            values: Box::new(timeline.latency_p50_ms.iter().copied()),
        },
        Line {
            label: "p99".into(),
            values: Box::new(timeline.latency_p99_ms.iter().copied()),
        },
    ];
    let p = path("latency");
    draw(&p, timeline, "latency of the final answers", "ms", latency)?;
    written.push(p);

    let remaining = vec![Line {
        label: "remaining".into(),
        values: Box::new(timeline.remaining.iter().map(|&r| Some(r as f64))),
    }];
    let p = path("remaining");
    draw(&p, timeline, "remaining stock", "units", remaining)?;
    written.push(p);

    if let (Some(waiting), Some(admitted)) = (&timeline.queue_waiting, &timeline.queue_admitted) {
        let queue = vec![
            Line {
                label: "waiting (queue length)".into(),
                values: Box::new(waiting.iter().map(|&x| Some(x as f64))),
            },
            Line {
                label: "admitted in all (now serving)".into(),
                values: Box::new(admitted.iter().map(|&x| Some(x as f64))),
            },
        ];
        let p = path("queue");
        draw(&p, timeline, "waiting room", "customers", queue)?;
        written.push(p);
    }
    Ok(written)
}

/// One plot of `lines` over the timeline's buckets, written as SVG to `path`.
fn draw(
    path: &Path,
    t: &Timeline,
    title: &str,
    y_desc: &str,
    lines: Vec<Line<'_>>,
) -> anyhow::Result<()> {
    let points: Vec<(String, Vec<(f64, f64)>)> = lines
        .into_iter()
        .map(|l| {
            let pts = l
                .values
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (t.at_s(i), v)))
                .collect();
            (l.label, pts)
        })
        .collect();
    render(path, t, title, y_desc, &points)
        .map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))
}

fn render(
    path: &Path,
    t: &Timeline,
    title: &str,
    y_desc: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> DrawResult {
    let x_max = t.at_s(t.len()).max(0.1);
    let y_max = lines
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|&(_, y)| y))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.05;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds after the start")
        .y_desc(y_desc)
        .draw()?;
    for (i, (label, pts)) in lines.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stampede::report::series::timeline;

    #[test]
    fn writes_one_svg_per_series_beside_the_report() {
        let dir = std::env::temp_dir().join(format!("fg-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report = dir.join("run.json");
        let mut t = timeline(3, &[]);
        assert!(
            write_all(&report, &t).unwrap().is_empty(),
            "no answers, no plots"
        );
        t.bucket_ms = 100;
        t.answers_per_s
            .insert("edge/sold_out".into(), vec![0.0, 40.0, 10.0]);
        t.latency_p50_ms = vec![Some(1.0), None, Some(2.0)];
        t.latency_p99_ms = vec![Some(3.0), None, Some(9.0)];
        t.remaining = vec![2, 0, 0];
        let written = write_all(&report, &t).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["run-answers.svg", "run-latency.svg", "run-remaining.svg"]
        );
        let svg = std::fs::read_to_string(&written[0]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.contains("edge/sold_out"), "the legend names the series");

        // With the waiting room's series, a fourth plot: the queue length and now serving.
        t.queue_waiting = Some(vec![5, 3, 0]);
        t.queue_admitted = Some(vec![0, 2, 5]);
        let written = write_all(&report, &t).unwrap();
        assert_eq!(written.len(), 4);
        assert!(written[3].ends_with("run-queue.svg"), "{:?}", written[3]);
        let svg = std::fs::read_to_string(&written[3]).unwrap();
        assert!(svg.contains("waiting (queue length)"), "legend");
        assert!(svg.contains("admitted in all (now serving)"), "legend");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
