//! A real Prometheus (Debian's package) scrapes the API and the scheduler while compiles run;
//! its HTTP API must show the job counters and histograms move.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::{eventually, TestApp, HELLO};

struct Prometheus {
    child: std::process::Child,
    dir: std::path::PathBuf,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_prometheus(api: &str, scheduler: &str) -> Prometheus {
    let dir = std::env::temp_dir().join(format!("texfleet-prometheus-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
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
        dir,
        url: format!("http://{address}"),
    }
}

/// The value of an instant query that returns one sample, or None.
async fn query(http: &reqwest::Client, prometheus: &Prometheus, promql: &str) -> Option<f64> {
    let response = http
        .get(format!("{}/api/v1/query", prometheus.url))
        .query(&[("query", promql)])
        .send()
        .await
        .ok()?;
    let body: Value = response.json().await.ok()?;
    body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_sees_job_counters_and_histograms_move() {
    let scheduler_address = format!("127.0.0.1:{}", free_port());
    let app =
        TestApp::spawn_with(|config| config.scheduler_metrics_addr = scheduler_address.clone())
            .await;
    let prometheus = start_prometheus(app.url.trim_start_matches("http://"), &scheduler_address);
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(60),
        "both processes are scraped",
        || async { query(&http, &prometheus, "sum(up)").await == Some(2.0) },
    )
    .await;

    for document in [
        HELLO,
        HELLO,
        "\\documentclass{article}\\begin{document}\\undefined\\end{document}",
    ] {
        app.compile(json!({ "input_latex": document })).await;
    }
    let expectations = [
        ("sum(texfleet_jobs_submitted_total)", 3.0),
        ("sum(texfleet_jobs_finished_total)", 3.0),
        (
            "sum(texfleet_jobs_finished_total{status=\"Failed\", error_code=\"compile_error\"})",
            1.0,
        ),
        ("sum(texfleet_job_compile_seconds_count)", 3.0),
        ("sum(texfleet_job_end_to_end_seconds_count)", 3.0),
        ("sum(texfleet_job_queue_wait_seconds_count)", 3.0),
        ("sum(texfleet_job_upload_seconds_count)", 3.0),
        (
            "sum(texfleet_http_requests_total{route=\"/compile\", status=\"202\"})",
            3.0,
        ),
        (
            "sum(texfleet_scheduler_slots)",
            app.config.scheduler_slots as f64,
        ),
        ("count(texfleet_build_info)", 2.0),
    ];
    for (promql, at_least) in expectations {
        eventually(Duration::from_secs(30), promql, || async {
            query(&http, &prometheus, promql)
                .await
                .is_some_and(|value| value >= at_least)
        })
        .await;
    }
    eventually(
        Duration::from_secs(30),
        "the queue gauges are exported",
        || async {
            query(
                &http,
                &prometheus,
                "max(texfleet_queue_jobs{status=\"Queued\"})",
            )
            .await
            .is_some()
                && query(
                    &http,
                    &prometheus,
                    "max(texfleet_queue_oldest_job_age_seconds)",
                )
                .await
                .is_some()
        },
    )
    .await;
}
