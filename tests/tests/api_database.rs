//! One project cannot take the API's database from the others: the API's statements end after
//! 10 s, and a project's requests hold a quarter of the pool at most, against the real API and
//! Postgres.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{TestApp, HELLO};

#[tokio::test]
async fn the_api_s_statements_are_bounded_in_time() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let pool = texfleet_core::db::api_pool(&app.config).unwrap();
    let client = pool.get().await.unwrap();
    let timeout: String = client
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(timeout, "10s");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_whose_statements_wait_leaves_the_pool_to_another() {
    // A pool of four connections, of which one project holds one.
    let app = TestApp::spawn_api_only(|config| config.database_pool_size = 4).await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let path = format!("/compile/{}", job.id());

    // Another transaction holds the job's row: each cancel of it waits for the lock.
    let mut owner = app.pool.get().await.unwrap();
    let lock = owner.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM jobs WHERE id = $1::text::uuid FOR UPDATE",
        &[&job.id()],
    )
    .await
    .unwrap();
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..5 {
        let request = app
            .http
            .delete(format!("{}{path}", app.url))
            .bearer_auth(&app.token);
        let answers = answers.clone();
        tokio::spawn(async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            answers.send((status, response.json::<Value>().await.unwrap_or_default()))
        });
    }
    while waiting_on_a_lock(&app).await == 0 {
        assert!(
            answered.try_recv().is_err(),
            "a cancel was answered while the row was locked"
        );
    }

    let (other, token) = app.other_project().await;
    let started = Instant::now();
    let response = tokio::time::timeout(
        Duration::from_secs(3),
        app.post_as(
            &token,
            "/compile",
            &json!({ "project_id": other, "input_latex": HELLO }),
        ),
    )
    .await
    .expect("another project is served while the first one's statements wait");
    assert_eq!(response.status(), 202, "{:?}", started.elapsed());

    // Four cancels wait for the project's one connection, then give up; the fifth holds it.
    for _ in 0..4 {
        let (status, problem) = answered.recv().await.unwrap();
        assert_eq!(status, 503, "{problem}");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("their share of the database"), "{detail}");
    }
    lock.rollback().await.unwrap();
    let (status, cancelled) = answered.recv().await.unwrap();
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "Cancelled");
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_holding_the_pool_leave_room_for_token_lookups() {
    // A pool of four connections: one a project, three all projects, one no project's.
    let app = TestApp::spawn_api_only(|config| config.database_pool_size = 4).await;
    let mut projects = Vec::new();
    for _ in 0..4 {
        projects.push(app.other_project_with_job().await);
    }
    // Another transaction holds every job's row: each project's cancel waits for the lock.
    let mut owner = app.pool.get().await.unwrap();
    let lock = owner.transaction().await.unwrap();
    lock.execute("SELECT 1 FROM jobs FOR UPDATE", &[])
        .await
        .unwrap();
    for (_, token, job) in &projects {
        let request = app
            .http
            .delete(format!("{}/compile/{}", app.url, job.id()))
            .bearer_auth(token);
        tokio::spawn(request.send());
    }
    texfleet_e2e::eventually(
        Duration::from_secs(10),
        "the projects' part of the pool waits for the lock",
        || async { waiting_on_a_lock(&app).await >= 3 },
    )
    .await;
    let (_, token) = app.other_project().await;
    assert_eq!(
        looked_up_within(&app, &token, Duration::from_secs(3)).await,
        422,
        "a token is looked up while the projects hold their part of the pool"
    );
    lock.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_token_s_flood_of_requests_shares_its_lookup() {
    let app = TestApp::spawn_api_only(|config| config.database_pool_size = 4).await;
    let (_, flooding) = app.other_project().await;
    // Another transaction holds the flooding token's row: a first lookup of it waits for the
    // lock, as it records the token's use.
    let mut owner = app.pool.get().await.unwrap();
    let lock = owner.transaction().await.unwrap();
    lock.execute(
        "SELECT 1 FROM api_tokens WHERE token_hash = $1 FOR UPDATE",
        &[&texfleet_core::token::hash(&flooding)],
    )
    .await
    .unwrap();
    for _ in 0..50 {
        tokio::spawn(
            app.http
                .get(format!("{}/info", app.url))
                .bearer_auth(&flooding)
                .send(),
        );
    }
    texfleet_e2e::eventually(
        Duration::from_secs(10),
        "the flooding token's lookup waits for the lock",
        || async { waiting_on_a_lock(&app).await >= 1 },
    )
    .await;
    let (_, token) = app.other_project().await;
    assert_eq!(
        looked_up_within(&app, &token, Duration::from_secs(3)).await,
        422,
        "another token is looked up while one token floods"
    );
    assert_eq!(
        waiting_on_a_lock(&app).await,
        1,
        "the flood's fifty requests wait on one lookup"
    );
    lock.rollback().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_network_s_flood_of_unknown_tokens_leaves_other_clients_looked_up() {
    let app = TestApp::spawn_api_only(|config| config.database_pool_size = 4).await;
    // Addresses of one network, each within its connections.
    let flooding: Vec<_> = (2..10)
        .map(|host| texfleet_e2e::client_from(&format!("127.0.5.{host}")))
        .collect();
    let mut flood = Vec::new();
    for n in 0..320 {
        let request = flooding[n % flooding.len()]
            .get(format!("{}/info", app.url))
            .bearer_auth(format!("tf_made_up_{n}"))
            .send();
        flood.push(tokio::spawn(request));
    }
    let (_, token) = app.other_project().await;
    let victim = texfleet_e2e::client_from("127.0.6.3");
    let started = Instant::now();
    let answer = victim
        .post(format!("{}/compile", app.url))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422, "looked up beside the flood");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let mut refused = 0;
    for request in flood {
        let answer = request.await.unwrap().unwrap();
        if answer.status() == 429 {
            let problem: Value = answer.json().await.unwrap();
            assert!(
                problem["detail"].as_str().unwrap().contains("network"),
                "{problem}"
            );
            refused += 1;
        } else {
            assert_eq!(answer.status(), 401);
        }
    }
    assert!(
        refused > 0,
        "the network's lookups past its share are refused"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_known_token_is_looked_up_while_its_own_network_floods_made_up_ones() {
    let app = TestApp::spawn_api_only(|config| config.database_pool_size = 4).await;
    let (_, token) = app.other_project().await;
    let victim = texfleet_e2e::client_from("127.0.9.3");
    let ask = || {
        victim
            .post(format!("{}/compile", app.url))
            .bearer_auth(&token)
            .json(&json!({}))
            .send()
    };
    assert_eq!(
        ask().await.unwrap().status(),
        422,
        "the token is found live"
    );
    // Neighbours in the same /24 take every lookup of made-up tokens the network may have.
    let flooding: Vec<_> = (10..18)
        .map(|host| texfleet_e2e::client_from(&format!("127.0.9.{host}")))
        .collect();
    let mut flood = Vec::new();
    for n in 0..800 {
        let request = flooding[n % flooding.len()]
            .get(format!("{}/info", app.url))
            .bearer_auth(format!("tf_made_up_{n}"))
            .send();
        flood.push(tokio::spawn(request));
    }
    for _ in 0..5 {
        assert_eq!(
            ask().await.unwrap().status(),
            422,
            "looked up beside the flood"
        );
    }
    let mut refused = 0;
    for request in flood {
        if request.await.unwrap().unwrap().status() == 429 {
            refused += 1;
        }
    }
    assert!(
        refused > 0,
        "the neighbours' lookups past the network's share are refused"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn made_up_tokens_from_many_networks_cost_no_lookup_and_leave_a_new_token_served() {
    let app = TestApp::spawn_api_only(|config| config.database_pool_size = 4).await;
    let refused_by_lookup = "texfleet_http_tokens_refused_total{by=\"lookup\"}";
    let looked_up_before = texfleet_e2e::metric(&app, refused_by_lookup).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (refused, other) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut flood = Vec::new();
    // Two hundred /24s, four requests in flight each, within every per-network share.
    for network in 0..200 {
        let client =
            texfleet_e2e::client_from(&format!("127.{}.{}.2", 20 + network / 100, network % 100));
        for lane in 0..4 {
            let (client, url, stop) = (client.clone(), app.url.clone(), stop.clone());
            let (refused, other) = (refused.clone(), other.clone());
            flood.push(tokio::spawn(async move {
                for n in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let token = format!("tf_made_up_{network}_{lane}_{n}");
                    let answer = client
                        .get(format!("{url}/info"))
                        .bearer_auth(token)
                        .send()
                        .await;
                    match answer.map(|answer| answer.status()) {
                        Ok(status) if status == 401 => refused.fetch_add(1, Ordering::Relaxed),
                        _ => other.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    texfleet_e2e::eventually(Duration::from_secs(30), "the flood is refused", || async {
        refused.load(Ordering::Relaxed) >= 800
    })
    .await;
    // Created now, the token is not in the set the API has read: its first request waits for
    // the next refresh, beside the whole flood.
    let (_, token) = app.other_project().await;
    assert_eq!(
        looked_up_within(&app, &token, Duration::from_secs(3)).await,
        422,
        "a new token is looked up beside the flood"
    );
    stop.store(true, Ordering::Relaxed);
    for request in flood {
        request.await.unwrap();
    }
    assert_eq!(
        other.load(Ordering::Relaxed),
        0,
        "every made-up token is a 401"
    );
    assert_eq!(
        texfleet_e2e::metric(&app, refused_by_lookup).await,
        looked_up_before,
        "no made-up token was looked up in the database"
    );
}

/// The status of a request that needs its token looked up and nothing else from the database
/// (a body the API refuses before taking a connection), which must come within `within`.
async fn looked_up_within(app: &TestApp, token: &str, within: Duration) -> u16 {
    let empty = json!({});
    tokio::time::timeout(within, app.post_as(token, "/compile", &empty))
        .await
        .expect("answered in time")
        .status()
        .as_u16()
}

/// How many of the API's statements on this test's database wait for a lock.
async fn waiting_on_a_lock(app: &TestApp) -> i64 {
    let client = app.pool.get().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND usename = 'texfleet_api' AND wait_event_type = 'Lock'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_connection_that_inserted_a_large_submission_is_closed() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    app.submit(json!({ "input_latex": HELLO })).await;
    let before = api_backends(&app).await;
    // tokio-postgres keeps a connection's largest message for the connection's life.
    let large = "x".repeat(2 * 1024 * 1024);
    app.submit(
        json!({ "input_latex": HELLO, "files": [{ "path": "large.txt", "content": large }] }),
    )
    .await;
    texfleet_e2e::eventually(
        Duration::from_secs(10),
        "a connection of the API's pool is closed",
        || async {
            let after = api_backends(&app).await;
            before.iter().any(|pid| !after.contains(pid))
        },
    )
    .await;
    let kept = app.submit(json!({ "input_latex": HELLO })).await;
    assert_eq!(kept["status"], "Queued", "{kept}");
}

/// The process ids of the API's connections to this test's database.
async fn api_backends(app: &TestApp) -> Vec<i32> {
    let client = app.pool.get().await.unwrap();
    client
        .query(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND usename = 'texfleet_api'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}
