//! A fleet on two Docker engines storing into a Garage cluster of three nodes (replication
//! factor 3, `./dev/garage-cluster`), under a steady load; one engine's daemon killed with
//! `kill -9` mid-compile and one Garage node stopped: every accepted job still succeeds (the
//! dead engine's running job on the other engine, the only job to lose an attempt), none is
//! uploaded twice, no upload fails, the dead engine's scheduler reports itself unready and
//! claims nothing while its engine is down, and claims again once it is back, after removing
//! what the dead engine left behind. Placement: each scheduler runs exactly as
//! many compiles as its engine has slots (3 and 1), so both engines stay busy.

use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    eventually, free_port, second_engine_actions, second_engine_containers, second_engine_socket,
    unix_seconds, EngineCrash, Outage, SchedulerProcess, TestApp,
};

/// About two seconds of TeX arithmetic, so that the crash lands mid-compile.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<4000000 \\repeat Done.\\end{document}";

/// Running jobs by scheduler, sampled every 10 ms by [`sample_running`].
#[derive(Default)]
struct Samples {
    most_running: HashMap<String, i64>,
    /// Whether some sample saw both schedulers at their slots at once.
    both_full: bool,
    /// (job, scheduler) pairs, each with the sample number it was first seen in.
    first_seen: HashMap<(String, String), usize>,
    count: usize,
}

async fn sample_running(
    app_pool: texfleet_core::db::Pool,
    samples: Arc<Mutex<Samples>>,
    slots: HashMap<String, i64>,
) {
    let client = app_pool.get().await.unwrap();
    loop {
        let rows = client
            .query(
                "SELECT id::text, lease_owner FROM jobs WHERE status = 'Running'",
                &[],
            )
            .await
            .unwrap();
        {
            let mut samples = samples.lock().unwrap();
            samples.count += 1;
            let count = samples.count;
            let mut running: HashMap<String, i64> = HashMap::new();
            for row in rows {
                let (id, owner): (String, String) = (row.get(0), row.get(1));
                *running.entry(owner.clone()).or_default() += 1;
                samples.first_seen.entry((id, owner)).or_insert(count);
            }
            for (owner, n) in &running {
                let most = samples.most_running.entry(owner.clone()).or_default();
                *most = (*most).max(*n);
            }
            if slots.iter().all(|(owner, n)| running.get(owner) == Some(n)) {
                samples.both_full = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The job ids a query of one text column returns.
async fn job_ids(
    pool: &texfleet_core::db::Pool,
    query: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Vec<String> {
    let rows = pool
        .get()
        .await
        .unwrap()
        .query(query, params)
        .await
        .unwrap();
    rows.iter().map(|row| row.get(0)).collect()
}

async fn readiness(http: &reqwest::Client, address: &str) -> Option<u16> {
    let answer = http
        .get(format!("http://{address}/readyz"))
        .send()
        .await
        .ok()?;
    Some(answer.status().as_u16())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_engine_loses_no_job_and_its_scheduler_waits_for_it() {
    let app = TestApp::spawn_api_only(|config| {
        let cluster = |name: &str| std::env::var(name).expect("TEST_S3_CLUSTER_* (./dev/test)");
        config.s3_endpoint = cluster("TEST_S3_CLUSTER_ENDPOINT");
        config.s3_access_key_id = cluster("TEST_S3_CLUSTER_KEY_ID");
        config.s3_secret_access_key = cluster("TEST_S3_CLUSTER_SECRET");
        config.max_running_per_project = 8;
        config.idle_project_slots = 0;
        config.max_queued_per_project = 1000;
    })
    .await;
    let (big, small) = (
        format!("big-{}", uuid::Uuid::new_v4()),
        format!("small-{}", uuid::Uuid::new_v4()),
    );
    let small_metrics = format!("127.0.0.1:{}", free_port());
    let mut big_config = app.config.clone();
    big_config.scheduler_slots = 3;
    let mut small_config = app.config.clone();
    small_config.scheduler_slots = 1;
    small_config.docker_host = second_engine_socket();
    small_config.scheduler_metrics_addr = small_metrics.clone();
    let big_scheduler = SchedulerProcess::spawn(&big_config, &big);
    let small_scheduler = SchedulerProcess::spawn(&small_config, &small);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let sampler = tokio::spawn(sample_running(
        app.pool.clone(),
        samples.clone(),
        HashMap::from([(big.clone(), 3), (small.clone(), 1)]),
    ));
    let since = unix_seconds();
    let mut ids = Vec::new();
    let submit = |ids: &mut Vec<String>, job: serde_json::Value| {
        ids.push(job.id().to_string());
    };
    for _ in 0..16 {
        submit(&mut ids, app.submit(json!({ "input_latex": SLOW })).await);
    }

    // Mid-compile on the small engine: one of its jobs has a started container there.
    eventually(
        Duration::from_secs(120),
        "a compile runs on the second engine",
        || async {
            let running = job_ids(
                &app.pool,
                "SELECT id::text FROM jobs WHERE status = 'Running' AND lease_owner = $1",
                &[&small],
            )
            .await;
            running.iter().any(|id| {
                second_engine_actions(id, since)
                    .iter()
                    .any(|a| a == "start")
            })
        },
    )
    .await;
    let mut crash = EngineCrash::begin();
    // A Garage node stops too (not node 1, whose S3 API the fleet uses): two copies remain.
    let mut garage_node =
        Outage::begin_with("garage-cluster", &["stop-node", "3"], &["start-node", "3"]);
    let http = reqwest::Client::new();
    eventually(
        Duration::from_secs(30),
        "the small scheduler reports itself unready",
        || async { readiness(&http, &small_metrics).await == Some(503) },
    )
    .await;
    let down_from = samples.lock().unwrap().count;
    // Work arrives while the engine is down: the big engine takes all of it.
    for _ in 0..4 {
        submit(&mut ids, app.submit(json!({ "input_latex": SLOW })).await);
    }
    for id in &ids {
        let job = app.wait_terminal(id, Duration::from_secs(300)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    assert_eq!(readiness(&http, &small_metrics).await, Some(503));
    let down_until = samples.lock().unwrap().count;
    let claimed_while_down: Vec<String> = samples
        .lock()
        .unwrap()
        .first_seen
        .iter()
        .filter(|((_, owner), seen)| owner == &small && (down_from..=down_until).contains(*seen))
        .map(|((id, _), _)| id.clone())
        .collect();
    assert!(
        claimed_while_down.is_empty(),
        "claimed while its engine was down: {claimed_while_down:?}"
    );
    // Only the compile running on the dead engine (one slot) lost an attempt: the first failure
    // stopped the claims, before the next job could fail in milliseconds on the dead engine.
    let uuids: Vec<uuid::Uuid> = ids.iter().map(|id| id.parse().unwrap()).collect();
    let retried = job_ids(
        &app.pool,
        "SELECT id::text FROM jobs WHERE id = ANY($1) AND attempts > 1",
        &[&uuids],
    )
    .await;
    assert!(
        retried.len() <= 1,
        "attempts lost to the dead engine: {retried:?}"
    );

    // Every PDF stored while a node was down is there (two nodes hold it), and no upload
    // needed a retry.
    for id in &ids {
        assert!(!app.pdf_of(id).await.is_empty(), "{id}");
    }
    let upload_retries: usize = [&big_scheduler, &small_scheduler]
        .iter()
        .map(|scheduler| scheduler.upload_retries())
        .sum();
    assert_eq!(
        upload_retries, 0,
        "uploads were retried while a Garage node was down"
    );
    garage_node.end();
    // The engine is back: the small scheduler removes what the dead engine left and claims.
    crash.end();
    eventually(
        Duration::from_secs(60),
        "the small scheduler is ready again",
        || async { readiness(&http, &small_metrics).await == Some(200) },
    )
    .await;
    let mut after = Vec::new();
    for _ in 0..8 {
        submit(&mut after, app.submit(json!({ "input_latex": SLOW })).await);
    }
    for id in &after {
        let job = app.wait_terminal(id, Duration::from_secs(300)).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
    }
    let ran_on_small_after = samples
        .lock()
        .unwrap()
        .first_seen
        .keys()
        .any(|(id, owner)| owner == &small && after.contains(id));
    assert!(
        ran_on_small_after,
        "the small scheduler claimed nothing after its engine returned"
    );
    sampler.abort();

    // Nothing compiled to completion twice: one upload per job across the fleet.
    let mut uploads: HashMap<String, usize> = big_scheduler.uploads();
    for (job, n) in small_scheduler.uploads() {
        *uploads.entry(job).or_default() += n;
    }
    for id in ids.iter().chain(&after) {
        assert_eq!(uploads.get(id), Some(&1), "{id}: {uploads:?}");
    }
    // What the dead engine left (the crashed job's container, stopped warm containers) is
    // gone: only warm containers that run remain.
    eventually(
        Duration::from_secs(60),
        "the dead engine's leftovers are removed",
        || async {
            second_engine_containers(&small)
                .iter()
                .all(|container| container.starts_with("pool-") && container.ends_with(" running"))
        },
    )
    .await;
    // Placement: each scheduler ran as many compiles as its slots, never more, both at once.
    let samples = samples.lock().unwrap();
    assert_eq!(
        samples.most_running.get(&big),
        Some(&3),
        "{:?}",
        samples.most_running
    );
    assert_eq!(
        samples.most_running.get(&small),
        Some(&1),
        "{:?}",
        samples.most_running
    );
    assert!(samples.both_full, "the two engines were never busy at once");
}
