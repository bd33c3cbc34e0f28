//! Two sandbox images side by side in one run (`--reference-image`): the floor and one engine
//! pass of each document in the image the stack runs and in the reference (an earlier build,
//! still in the engine's cache), alternating, so that a change of the image (a bigger TeX
//! tree, another TeX Live) is measured on the same cores in the same minutes.

use super::floor::{self, durations, floor_job, Run};
use super::{percentile_ms, Document};
use serde_json::{json, Value};
use texfleet_core::Config;
use texfleet_scheduler::{Sandbox, Sandboxes};

/// The floor and engine pass of each document in both images, printed as ratios.
pub async fn compare(
    config: &Config,
    sandbox: &Sandbox,
    reference_image: &str,
    documents: &[&Document],
    runs: usize,
) -> anyhow::Result<Value> {
    let reference_config = Config {
        sandbox_images: [(config.default_texlive.clone(), reference_image.to_string())].into(),
        ..config.clone()
    };
    let references = Sandboxes::connect(&reference_config, "bench-reference", "bench").await?;
    let reference = references.engine();
    println!("\nthis image against the reference image {reference_image} (floor and one engine pass, p50):");
    let mut compared = Vec::new();
    for document in documents {
        let (mut this, mut earlier) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let job = floor_job(document, None);
            this.push(floor::floor(config, sandbox, &job, Default::default()).await?);
            let job = floor_job(document, None);
            earlier
                .push(floor::floor(&reference_config, reference, &job, Default::default()).await?);
        }
        let p50 = |samples: &[f64]| percentile_ms(samples, 0.5);
        let pass =
            |runs: &[Run]| -> Vec<f64> { runs.iter().filter_map(Run::first_pass_ms).collect() };
        let (floor_now, floor_then) = (p50(&durations(&this)), p50(&durations(&earlier)));
        let (pass_now, pass_then) = (p50(&pass(&this)), p50(&pass(&earlier)));
        println!(
            "  {:<8} floor {floor_now:>6.0} ms vs {floor_then:>6.0} ms ({:.2}x) | one engine pass {pass_now:>5.0} ms vs {pass_then:>5.0} ms ({:.2}x)",
            document.name,
            floor_now / floor_then,
            pass_now / pass_then
        );
        compared.push(json!({
            "document": document.name, "floor_ms": floor_now, "reference_floor_ms": floor_then,
            "engine_pass_ms": pass_now, "reference_engine_pass_ms": pass_then,
        }));
    }
    reference.settle().await;
    Ok(json!({ "reference_image": reference_image, "documents": compared }))
}
