//! What the API and the scheduler share of their Prometheus metrics: a registry per process
//! role, holding its build info, and the text encoding served on `/metrics`. Each role defines
//! its own metrics beside the code that moves them, in its own registry, so that a process
//! running both (a test) exports each series once per role, not twice.

use prometheus::{Encoder, IntGaugeVec, Opts, Registry, TextEncoder};

/// A registry for one process role, with `texfleet_build_info{version, process} 1`, the
/// conventional way to export a version.
pub fn registry(process: &str) -> Registry {
    let registry = Registry::new();
    let opts = Opts::new(
        "texfleet_build_info",
        "Build information of this texfleet process.",
    );
    let info = IntGaugeVec::new(opts, &["version", "process"]).expect("valid metric");
    registry
        .register(Box::new(info.clone()))
        .expect("registered once");
    info.with_label_values(&[env!("CARGO_PKG_VERSION"), process])
        .set(1);
    registry
}

/// Every metric of `registry` in the Prometheus text format.
pub fn encode(registry: &Registry) -> String {
    let mut buffer = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&registry.gather(), &mut buffer) {
        tracing::error!(%error, "could not encode metrics");
    }
    String::from_utf8(buffer).unwrap_or_default()
}

/// The content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
