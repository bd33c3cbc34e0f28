//! The API's metrics as a test reads them.

use crate::{client_from, TestApp};

/// The value of one series of the API's metrics (asked from 127.0.0.3, a client of its own).
pub async fn metric(app: &TestApp, series: &str) -> f64 {
    let text = client_from("127.0.0.3")
        .get(format!("{}/metrics", app.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {series}"))
}

/// One series of a scheduler's own metrics endpoint at `address` (`name{labels}` as
/// exported); None while it does not answer.
pub async fn scheduler_metric(http: &reqwest::Client, address: &str, series: &str) -> Option<f64> {
    let text = http
        .get(format!("http://{address}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}
