//! A real Prometheus (Debian's package) scrapes the API and the scheduler while jobs run; its
//! HTTP API must show, per scrape job, exactly what happened: submissions and requests from the
//! API alone (the result cache's hits and misses too), finishes, limits, rescues, retries and
//! containers from the scheduler alone. Every metric name the alert rules use must exist in the
//! scrape.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::{eventually, free_port, TestApp, HELLO};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Prometheus {
    child: std::process::Child,
    // Removed when the Prometheus is dropped.
    _dir: tempfile::TempDir,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_prometheus(api: &str, scheduler: &str) -> Prometheus {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: texfleet-api\n    static_configs:\n      - targets: [\"{api}\"]\n  - job_name: texfleet-scheduler\n    static_configs:\n      - targets: [\"{scheduler}\"]\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let address = format!("127.0.0.1:{}", free_port());
    let child = std::process::Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={address}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus (Debian package prometheus, installed by ./dev/up)");
    Prometheus {
        child,
        _dir: scratch,
        url: format!("http://{address}"),
    }
}

/// The values of an instant query, one per series.
async fn query(http: &reqwest::Client, prometheus: &Prometheus, promql: &str) -> Vec<f64> {
    let Ok(response) = http
        .get(format!("{}/api/v1/query", prometheus.url))
        .query(&[("query", promql)])
        .send()
        .await
    else {
        return Vec::new();
    };
    let body: Value = response.json().await.unwrap_or_default();
    body["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|series| series["value"][1].as_str()?.parse().ok())
        .collect()
}

/// Waits until `promql` gives exactly one series whose value is `expected`.
async fn expect_value(
    http: &reqwest::Client,
    prometheus: &Prometheus,
    promql: &str,
    expected: f64,
) {
    let mut last = Vec::new();
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            last = query(http, prometheus, promql).await;
            if last == [expected] {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{promql}: {last:?}, expected [{expected}]");
}

/// Every `texfleet_*` name the alert rules read, without histogram suffixes.
fn alert_metric_names() -> Vec<String> {
    let rules = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../monitoring/alerts.yml"
    ))
    .unwrap();
    let mut names: Vec<String> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("texfleet_"))
        .map(|word| word.to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_sees_exactly_what_each_process_did() {
    let scheduler_address = format!("127.0.0.1:{}", free_port());
    let app = TestApp::spawn_with(|config| {
        config.scheduler_metrics_addr = scheduler_address.clone();
        config.lease_seconds = 4;
        // The second hello is a cache hit: answered by the API alone, compiled by nobody.
        config.result_cache = true;
    })
    .await;
    let prometheus = start_prometheus(app.url.trim_start_matches("http://"), &scheduler_address);
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(60),
        "both processes are scraped",
        || async { query(&http, &prometheus, "sum(up)").await == [2.0] },
    )
    .await;
    for name in alert_metric_names() {
        expect_value(
            &http,
            &prometheus,
            &format!("count(count by (job) ({name}) > -1) > 0"),
            1.0,
        )
        .await;
    }

    for (document, timeout) in [
        (HELLO, 30),
        (HELLO, 30),
        (
            "\\documentclass{article}\\begin{document}\\undefined\\end{document}",
            30,
        ),
        ("\\loop\\iftrue\\repeat", 2),
    ] {
        app.compile(json!({ "input_latex": document, "timeout_seconds": timeout }))
            .await;
    }
    // A job whose lease expired under a scheduler that is gone: rescued, then compiled.
    let ghost_id = uuid::Uuid::new_v4();
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO jobs (id, project_id, engine, texlive, timeout_seconds, max_attempts,
                               status, attempts, started_at, lease_owner, lease_expires_at)
             VALUES ($1, $2, 'pdflatex', $3, 30, 3, 'Running', 1, now(), 'ghost',
                     now() - interval '1 second')",
            &[&ghost_id, &app.project_id, &app.config.default_texlive],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO job_files (job_id, path, content) VALUES ($1, 'main.tex', $2)",
            &[&ghost_id, &HELLO.as_bytes()],
        )
        .await
        .unwrap();
    let rescued = app
        .wait_terminal(&ghost_id.to_string(), Duration::from_secs(60))
        .await;
    assert_eq!(rescued["status"], "Succeeded", "{rescued:#}");

    let api = "job=\"texfleet-api\"";
    let scheduler = "job=\"texfleet-scheduler\"";
    for (promql, expected) in [
        (format!("sum(texfleet_jobs_submitted_total{{{api}}})"), 3.0),
        (format!("sum(texfleet_http_requests_total{{{api}, route=\"/compile\", method=\"POST\", status=\"202\"}})"), 3.0),
        (format!("sum(texfleet_http_requests_total{{{api}, route=\"/compile\", method=\"POST\", status=\"200\"}})"), 1.0),
        (format!("texfleet_result_cache_total{{{api}, result=\"hit\"}}"), 1.0),
        (format!("texfleet_result_cache_total{{{api}, result=\"miss\"}}"), 3.0),
        (format!("sum(texfleet_jobs_finished_total{{{scheduler}}})"), 4.0),
        (format!("sum(texfleet_jobs_finished_total{{{scheduler}, status=\"Succeeded\"}})"), 2.0),
        (format!("texfleet_jobs_finished_total{{{scheduler}, status=\"Failed\", engine=\"pdflatex\", error_code=\"compile_error\"}}"), 1.0),
        (format!("texfleet_jobs_finished_total{{{scheduler}, status=\"TimedOut\", engine=\"pdflatex\", error_code=\"timeout\"}}"), 1.0),
        (format!("texfleet_sandbox_limits_hit_total{{{scheduler}, limit=\"timeout\"}}"), 1.0),
        (format!("texfleet_sandbox_limits_hit_total{{{scheduler}, limit=\"memory\"}}"), 0.0),
        (format!("texfleet_lease_rescues_total{{{scheduler}}}"), 1.0),
        (format!("sum(texfleet_job_retries_total{{{scheduler}}})"), 0.0),
        (format!("sum(texfleet_job_compile_seconds_count{{{scheduler}}})"), 4.0),
        (format!("sum(texfleet_job_end_to_end_seconds_count{{{scheduler}}})"), 4.0),
        (format!("sum(texfleet_scheduler_slots{{{scheduler}}})"), app.config.scheduler_slots as f64),
        // The idle warm pool: as many containers as slots, and nothing else.
        (format!("texfleet_sandbox_containers_running{{{scheduler}}}"), app.config.scheduler_slots as f64),
        // Each process exports only its own series.
        (format!("count(texfleet_jobs_submitted_total{{{scheduler}}}) or vector(0)"), 0.0),
        (format!("count(texfleet_jobs_finished_total{{{api}}}) or vector(0)"), 0.0),
        ("count(texfleet_build_info)".to_string(), 2.0),
    ] {
        expect_value(&http, &prometheus, &promql, expected).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scheduler_s_probe_port_holds_few_connections_and_none_for_long() {
    let probes = format!("127.0.0.1:{}", free_port());
    let _app = TestApp::spawn_with(|config| config.scheduler_metrics_addr = probes.clone()).await;
    let probes: std::net::SocketAddr = probes.parse().unwrap();
    texfleet_e2e::eventually(Duration::from_secs(30), "the probes answer", || async {
        reqwest::get(format!("http://{probes}/healthz"))
            .await
            .is_ok()
    })
    .await;
    // Silent connections from one network: past its share, each takes the place of its
    // network's oldest; the rest are closed when they have sent no request in time.
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(texfleet_e2e::connect_from("127.0.7.2", probes).await);
    }
    // And the port held full from many networks, by connections that each asked once and
    // would ask again: a probe from another network still gets a place.
    let mut holding = Vec::new();
    for network in 20..60 {
        for _ in 0..8 {
            let mut connection =
                texfleet_e2e::connect_from(&format!("127.0.{network}.2"), probes).await;
            connection
                .write_all(b"GET /healthz HTTP/1.1\r\nhost: probes\r\n\r\n")
                .await
                .unwrap();
            holding.push(connection);
        }
    }
    let healthz = texfleet_e2e::client_from("127.0.8.3")
        .get(format!("http://{probes}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(healthz.text().await.unwrap(), "ok");
    for (n, connection) in silent.iter_mut().chain(holding.iter_mut()).enumerate() {
        let mut answer = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(5), connection.read_to_end(&mut answer)).await;
        assert!(
            matches!(read, Ok(Ok(_)) | Ok(Err(_))),
            "connection {n} is closed: {read:?}"
        );
    }
}
