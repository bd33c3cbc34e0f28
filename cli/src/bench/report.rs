//! The bench's figures as JSON (`bench.json`) and its latency distributions drawn as an SVG
//! (`bench.svg`, with plotters): one panel per document, each compile a dot, the median a bar,
//! for the service beside the floor and the peer, and for second compiles.

use super::percentile_ms;
use plotters::prelude::*;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// Where plotters finds a font to measure and draw labels with (Debian's fonts-dejavu-core).
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const COLORS: [RGBColor; 5] = [BLUE, RED, GREEN, MAGENTA, CYAN];

/// One panel of the SVG: its title and its rows, each a name and its samples.
type Panel = (String, Vec<(&'static str, Vec<f64>)>);

#[derive(Default, Serialize)]
pub struct Figures {
    pub machine: Value,
    pub latency: Vec<Latency>,
    pub throughput: Vec<Value>,
    pub second: Vec<Value>,
    pub ingest: Value,
    pub queue: Value,
    pub rss_mib: Value,
    pub sync: Value,
    /// A large project sent by hash and whole.
    pub large_project: Value,
    /// Null unless `--reference-image` was given.
    pub image_comparison: Value,
}

/// End-to-end milliseconds of one document's compiles.
#[derive(Serialize)]
pub struct Latency {
    pub document: &'static str,
    pub service_ms: Vec<f64>,
    pub floor_ms: Vec<f64>,
    pub peer_ms: Vec<f64>,
    /// One engine pass in the floor's container, as the driver timed it.
    pub engine_pass_ms: Vec<f64>,
    pub resubmission_ms: Vec<f64>,
}

impl Figures {
    /// Writes `bench.json` and `bench.svg` into `folder`.
    pub fn write(&self, folder: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(folder)?;
        std::fs::write(folder.join("bench.json"), serde_json::to_vec_pretty(self)?)?;
        let svg = folder.join("bench.svg");
        match std::fs::read(FONT) {
            Ok(font) => self.draw(&svg, font)?,
            Err(error) => println!("no SVG: {FONT}: {error}"),
        }
        println!("\nfigures written to {}", folder.display());
        Ok(())
    }

    fn panels(&self) -> Vec<Panel> {
        let mut panels: Vec<_> = self
            .latency
            .iter()
            .map(|latency| {
                (
                    format!("{}: end to end", latency.document),
                    vec![
                        ("service", latency.service_ms.clone()),
                        ("floor", latency.floor_ms.clone()),
                        ("peer (docker run --rm)", latency.peer_ms.clone()),
                        ("one engine pass", latency.engine_pass_ms.clone()),
                    ],
                )
            })
            .collect();
        for second in &self.second {
            let samples = |key: &str| -> Vec<f64> {
                second[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .collect()
            };
            panels.push((
                format!(
                    "{}: second compile of an edited copy",
                    second["document"].as_str().unwrap_or("")
                ),
                vec![
                    ("service", samples("service_ms")),
                    ("floor's second run", samples("floor_second_run_ms")),
                ],
            ));
        }
        panels
    }

    fn draw(&self, path: &Path, font: Vec<u8>) -> anyhow::Result<()> {
        plotters::style::register_font("sans-serif", FontStyle::Normal, font.leak())
            .map_err(|_| anyhow::anyhow!("{FONT} is not a font plotters reads"))?;
        let panels = self.panels();
        let root =
            SVGBackend::new(path, (900, 200 * panels.len().max(1) as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        for (area, (title, series)) in root
            .split_evenly((panels.len().max(1), 1))
            .iter()
            .zip(&panels)
        {
            let largest = series
                .iter()
                .flat_map(|(_, samples)| samples)
                .fold(1.0_f64, |a, &b| a.max(b));
            let rows = series.len();
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 16))
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(170)
                .build_cartesian_2d(0.0..largest * 1.1, -0.5..(rows as f64 - 0.5))?;
            let label = |y: &f64| match (y - y.round()).abs() < 0.01 {
                true => series
                    .get(y.round() as usize)
                    .map_or(String::new(), |s| s.0.to_string()),
                false => String::new(),
            };
            chart
                .configure_mesh()
                .y_labels(rows * 2 + 1)
                .y_label_formatter(&label)
                .disable_y_mesh()
                .x_desc("milliseconds")
                .draw()?;
            for (row, (_, samples)) in series.iter().enumerate() {
                let color = COLORS[row % COLORS.len()];
                let y = row as f64;
                chart.draw_series(
                    samples
                        .iter()
                        .map(|&x| Circle::new((x, y), 3, color.mix(0.6).filled())),
                )?;
                if !samples.is_empty() {
                    let median = percentile_ms(samples, 0.5);
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(median, y - 0.3), (median, y + 0.3)],
                        BLACK.stroke_width(2),
                    )))?;
                }
            }
        }
        root.present()?;
        Ok(())
    }
}
