//! Where a job's time went, read from the timestamps the service records on it.

use super::ms;
use anyhow::Context;
use serde_json::Value;
use std::time::Duration;
use time::OffsetDateTime;

/// Where a job's time went, from its own timestamps: waiting to be claimed, compiling in the
/// sandbox, the sandbox and upload work around the compile, and the API and notification path
/// to the client.
#[derive(Default)]
pub struct Phases {
    queue: f64,
    compile: f64,
    around: f64,
    client: f64,
}

impl Phases {
    pub fn add(&mut self, job: &Value, observed: Duration) -> anyhow::Result<()> {
        let created = parse_time(&job["created_at"])?;
        let started = parse_time(&job["started_at"])?;
        let finished = parse_time(&job["finished_at"])?;
        let compile = job["duration_ms"].as_f64().context("duration_ms")?;
        self.queue += (started - created).as_seconds_f64() * 1000.0;
        self.compile += compile;
        self.around += (finished - started).as_seconds_f64() * 1000.0 - compile;
        self.client += ms(observed) - (finished - created).as_seconds_f64() * 1000.0;
        Ok(())
    }

    pub fn summary(&self, runs: usize) -> String {
        let n = runs.max(1) as f64;
        format!(
            "queue {:.0} ms, compile {:.0} ms, container and upload {:.0} ms, API and notification {:.0} ms",
            self.queue / n,
            self.compile / n,
            self.around / n,
            self.client / n
        )
    }
}

pub fn parse_time(value: &Value) -> anyhow::Result<OffsetDateTime> {
    let text = value.as_str().context("a timestamp")?;
    Ok(OffsetDateTime::parse(
        text,
        &time::format_description::well_known::Rfc3339,
    )?)
}
