//! What the API and the scheduler share of their Prometheus metrics: the registry (the
//! prometheus crate's default one), the text encoding served on `/metrics`, and build info.
//! Each process defines its own metrics beside the code that moves them.

use prometheus::{Encoder, IntGaugeVec, Opts, TextEncoder};

/// `texfleet_build_info{version, process} 1`, the conventional way to export a version.
pub fn register_build_info(process: &str) {
    let opts = Opts::new(
        "texfleet_build_info",
        "Build information of this texfleet process.",
    );
    if let Ok(info) = IntGaugeVec::new(opts, &["version", "process"]) {
        if prometheus::register(Box::new(info.clone())).is_ok() {
            info.with_label_values(&[env!("CARGO_PKG_VERSION"), process])
                .set(1);
        }
    }
}

/// Every registered metric in the Prometheus text format.
pub fn encode() -> String {
    let mut buffer = Vec::new();
    let encoder = TextEncoder::new();
    if let Err(error) = encoder.encode(&prometheus::gather(), &mut buffer) {
        tracing::error!(%error, "could not encode metrics");
    }
    String::from_utf8(buffer).unwrap_or_default()
}

/// The content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
