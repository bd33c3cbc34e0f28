//! Webhooks end to end: real HTTP receivers on loopback that verify every delivery with the
//! Python `standardwebhooks` package (tests/clients/webhook_receiver.py), the outbox in
//! Postgres, the delivery worker of real schedulers, and the checks that keep deliveries out of
//! the service's own network. No test sends traffic to any address outside this machine.

use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    eventually, eventually_some, texfleet_command, HostsEntry, SchedulerProcess, TestApp,
    WebhookReceiver, ENDLESS, HELLO, TEXFLEET,
};

/// Registers `url` for the app's project; the answer's status and body.
async fn register(app: &TestApp, token: &str, project: uuid::Uuid, url: &str) -> (u16, Value) {
    let response = app
        .post_as(
            token,
            &format!("/projects/{project}/webhooks"),
            &json!({ "url": url, "description": "test" }),
        )
        .await;
    (response.status().as_u16(), response.json().await.unwrap())
}

/// Registers the receiver and hands it the secret.
async fn subscribe(app: &TestApp, receiver: &WebhookReceiver) -> Value {
    let (status, endpoint) = register(app, &app.token, app.project_id, &receiver.url()).await;
    assert_eq!(status, 201, "{endpoint:#}");
    receiver.set_secret(endpoint["secret"].as_str().unwrap());
    endpoint
}

async fn deliveries(app: &TestApp, endpoint: &Value) -> Vec<Value> {
    let path = format!(
        "/projects/{}/webhooks/{}/deliveries?limit=100",
        app.project_id,
        endpoint.id()
    );
    app.get_json(&path).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_terminal_status_is_delivered_once_and_verified_by_a_standard_library() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let receiver = WebhookReceiver::start("ok");
    let endpoint = subscribe(&app, &receiver).await;
    let succeeded = app.compile(json!({ "input_latex": HELLO })).await;
    let reused = app.submit(json!({ "input_latex": HELLO })).await;
    assert_eq!(reused["reused_from"], succeeded["id"]);
    let failed = app
        .compile(json!({ "input_latex": "\\documentclass{article}\\begin{document}\\nosuchmacro\\end{document}",
                         "halt_on_error": true }))
        .await;
    let timed_out = app
        .compile(json!({ "input_latex": ENDLESS, "timeout_seconds": 2 }))
        .await;
    let running = app
        .submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 60 }))
        .await;
    let id = running.id();
    eventually(Duration::from_secs(60), "the loop runs", || async {
        app.get_json(&format!("/compile/{id}")).await["status"] == "Running"
    })
    .await;
    let response = app.delete_as(&app.token, &format!("/compile/{id}")).await;
    assert_eq!(response.status(), 200);

    let requests = receiver.wait_for(5).await;
    let mut seen: Vec<(String, String)> = requests
        .iter()
        .map(|request| {
            assert_eq!(request["verified"], true, "{request:#}");
            assert_eq!(request["body"]["type"], "compile.finished");
            (
                request["body"]["data"].id().to_string(),
                request["body"]["data"]["status"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    seen.sort();
    let mut expected: Vec<(String, String)> = [
        (&succeeded, "Succeeded"),
        (&reused, "Succeeded"),
        (&failed, "Failed"),
        (&timed_out, "TimedOut"),
        (&running, "Cancelled"),
    ]
    .iter()
    .map(|(job, status)| (job.id().to_string(), status.to_string()))
    .collect();
    expected.sort();
    assert_eq!(seen, expected);
    let ids: std::collections::HashSet<&str> = requests.iter().map(|r| r.id()).collect();
    assert_eq!(ids.len(), 5, "one webhook-id per event");
    eventually(
        Duration::from_secs(10),
        "every delivery recorded",
        || async {
            let items = deliveries(&app, &endpoint).await;
            items.len() == 5
                && items.iter().all(|d| {
                    d["status"] == "delivered" && d["attempts"] == 1 && d["last_status_code"] == 200
                })
        },
    )
    .await;
    // Nothing more arrives: each event was delivered once.
    assert_eq!(receiver.requests().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_receiver_gets_growing_retries_of_one_event_until_it_answers() {
    let app = TestApp::spawn_with(|config| config.webhook_retry_base_seconds = 1.0).await;
    let receiver = WebhookReceiver::start("fail-3");
    let endpoint = subscribe(&app, &receiver).await;
    app.compile(json!({ "input_latex": HELLO })).await;
    let requests = receiver.wait_for(4).await;
    let ids: std::collections::HashSet<&str> = requests.iter().map(|r| r.id()).collect();
    assert_eq!(ids.len(), 1, "every attempt carries the same webhook-id");
    assert!(requests.iter().all(|r| r["verified"] == true));
    let at: Vec<f64> = requests.iter().map(|r| r["at"].as_f64().unwrap()).collect();
    let gaps: Vec<f64> = at.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(
        gaps.windows(2).all(|pair| pair[0] < pair[1]),
        "gaps {gaps:?}"
    );
    assert!(gaps[0] >= 0.7, "gaps {gaps:?}");
    eventually(
        Duration::from_secs(10),
        "the delivery is recorded",
        || async {
            let items = deliveries(&app, &endpoint).await;
            items.len() == 1 && items[0]["status"] == "delivered" && items[0]["attempts"] == 4
        },
    )
    .await;
    assert_eq!(receiver.requests().len(), 4, "delivered once in the end");
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_refuses_urls_into_the_service_s_network() {
    let app = TestApp::spawn_api_only(|config| config.webhook_allowed_cidrs = String::new()).await;
    for url in [
        "http://127.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://localhost:8080/",
        "ftp://example.org/",
        "http://user:secret@example.org/",
        "not a url",
        "http://example.org/\u{0}",
        // Special-purpose blocks of IANA's registries beside ones that were always refused.
        "http://[2001:2::1]/",
        "http://[3fff::1]/",
        "http://[2001:10::1]/",
        "http://[2001:20::1]/",
        "http://[2620:4f:8000::1]/",
        "http://192.88.99.1/",
    ] {
        let (status, problem) = register(&app, &app.token, app.project_id, url).await;
        assert_eq!(status, 422, "{url} was accepted: {problem:#}");
        assert_eq!(problem["errors"][0]["field"], "url", "{url}: {problem:#}");
    }
    // A name that does not resolve and one that resolves to loopback get the same answer, so
    // that registrations cannot map the operator's internal names.
    let mut refusals = Vec::new();
    for url in ["http://no-such-host.invalid/", "http://localhost:9/"] {
        let (status, problem) = register(&app, &app.token, app.project_id, url).await;
        assert_eq!(status, 422, "{url} was accepted: {problem:#}");
        refusals.push(problem["errors"][0]["message"].clone());
    }
    assert_eq!(refusals[0], refusals[1]);
    let listed = app
        .get_json(&format!("/projects/{}/webhooks", app.project_id))
        .await;
    assert_eq!(listed["items"], json!([]));
    // The operator's allowed ranges let the same loopback address in.
    let allowing =
        TestApp::spawn_api_only(|config| config.webhook_allowed_cidrs = "127.0.0.0/8".into()).await;
    let (status, endpoint) = register(
        &allowing,
        &allowing.token,
        allowing.project_id,
        "http://127.0.0.1:9/",
    )
    .await;
    assert_eq!(status, 201, "{endpoint:#}");
    assert!(endpoint["secret"].as_str().unwrap().starts_with("whsec_"));
    let listed = allowing
        .get_json(&format!("/projects/{}/webhooks", allowing.project_id))
        .await;
    assert!(
        listed["items"][0]["secret"].is_null(),
        "the secret is shown once"
    );
    for _ in 0..9 {
        register(
            &allowing,
            &allowing.token,
            allowing.project_id,
            "http://127.0.0.1:9/",
        )
        .await;
    }
    let (status, problem) = register(
        &allowing,
        &allowing.token,
        allowing.project_id,
        "http://127.0.0.1:9/",
    )
    .await;
    assert_eq!(status, 422, "an eleventh endpoint: {problem:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_project_sees_and_touches_none_of_a_project_s_endpoints() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let (status, endpoint) =
        register(&app, &app.token, app.project_id, "http://127.0.0.1:9/").await;
    assert_eq!(status, 201);
    let id = endpoint.id();
    let (other, other_token) = app.other_project().await;
    // Through its own project's paths, B finds nothing of A's endpoint...
    let response = app
        .delete_as(&other_token, &format!("/projects/{other}/webhooks/{id}"))
        .await;
    assert_eq!(response.status(), 404);
    let response = app
        .get_as(
            &other_token,
            &format!("/projects/{other}/webhooks/{id}/deliveries"),
        )
        .await;
    assert_eq!(response.status(), 404);
    let listed: Value = app
        .get_as(&other_token, &format!("/projects/{other}/webhooks"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"], json!([]));
    // ...and A's project's paths are not B's to use.
    let response = app
        .get_as(
            &other_token,
            &format!("/projects/{}/webhooks", app.project_id),
        )
        .await;
    assert_eq!(response.status(), 403);
    // A still has it, and may delete it.
    let response = app
        .delete_as(
            &app.token,
            &format!("/projects/{}/webhooks/{id}", app.project_id),
        )
        .await;
    assert_eq!(response.status(), 204);
    let sealed: i64 = {
        let client = app.pool.get().await.unwrap();
        client
            .query_one("SELECT count(*) FROM webhook_endpoints", &[])
            .await
            .unwrap()
            .get(0)
    };
    assert_eq!(sealed, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_redirecting_and_endless_receivers_hold_no_one_up() {
    let app = TestApp::spawn().await;
    let hang = WebhookReceiver::start("hang");
    let redirect = WebhookReceiver::start("redirect");
    let endless = WebhookReceiver::start("endless");
    let ok = WebhookReceiver::start("ok");
    let mut endpoints = Vec::new();
    for receiver in [&hang, &redirect, &endless, &ok] {
        endpoints.push(subscribe(&app, receiver).await);
    }
    app.compile(json!({ "input_latex": HELLO })).await;
    // The good receiver is served while the silent one still holds its attempt.
    ok.wait_for(1).await;
    let hanging = deliveries(&app, &endpoints[0]).await;
    assert!(
        hanging[0]["last_status_code"].is_null() && hanging[0]["last_error"].is_null(),
        "{hanging:#?}"
    );
    let recorded = |index: usize| {
        let (app, endpoint) = (&app, endpoints[index].clone());
        async move {
            eventually_some(Duration::from_secs(30), "an attempt recorded", || async {
                let items = deliveries(app, &endpoint).await;
                (items.len() == 1
                    && items[0]["attempts"].as_i64() >= Some(1)
                    && (items[0]["last_status_code"].is_number()
                        || items[0]["last_error"].is_string()))
                .then(|| items[0].clone())
            })
            .await
        }
    };
    let timed_out = recorded(0).await;
    assert_eq!(timed_out["status"], "pending", "{timed_out:#}");
    assert_eq!(timed_out["last_error"], "no answer within 10 s");
    let redirected = recorded(1).await;
    assert_eq!(redirected["last_status_code"], 302);
    assert!(
        redirected["last_error"]
            .as_str()
            .unwrap()
            .contains("redirects are not followed"),
        "{redirected:#}"
    );
    assert!(
        redirect.requests().iter().all(|r| r["path"] == "/hook"),
        "the redirect was not followed"
    );
    let streamed = recorded(2).await;
    assert_eq!(streamed["status"], "delivered", "{streamed:#}");
    assert_eq!(recorded(3).await["status"], "delivered");
}

/// A receiver that accepts connections and never answers; its address.
async fn silent_receiver() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread")]
async fn one_projects_backlog_never_holds_up_another_projects_delivery() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let (other, other_token) = app.other_project().await;
    let ok = WebhookReceiver::start("ok");
    let (status, endpoint) = register(&app, &other_token, other, &ok.url()).await;
    assert_eq!(status, 201, "{endpoint:#}");
    ok.set_secret(endpoint["secret"].as_str().unwrap());
    let other_request = json!({ "project_id": other, "input_latex": HELLO });
    let first = app.post_as(&other_token, "/compile", &other_request).await;
    assert_eq!(first.status(), 202);
    ok.wait_for(1).await;

    // The flood: ten silent endpoints, and 200 results reused at once, each an event for all.
    let silent = silent_receiver().await;
    for path in 0..10 {
        let url = format!("http://{silent}/{path}");
        let (status, endpoint) = register(&app, &app.token, app.project_id, &url).await;
        assert_eq!(status, 201, "{endpoint:#}");
    }
    let flooding = json!({ "input_latex": HELLO });
    let original = app.compile(flooding.clone()).await;
    assert_eq!(original["status"], "Succeeded", "{original:#}");
    for _ in 0..199 {
        app.submit(flooding.clone()).await;
    }
    let client = app.pool.get().await.unwrap();
    let pending: i64 = client
        .query_one(
            "SELECT count(*) FROM webhook_deliveries WHERE project_id = $1 AND status = 'pending'",
            &[&app.project_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(pending, 2000);

    let started = std::time::Instant::now();
    let again = app.post_as(&other_token, "/compile", &other_request).await;
    assert_eq!(again.status(), 200, "a reused result");
    ok.wait_for(2).await;
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "the other project's delivery took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_whose_endpoints_never_answer_leave_senders_for_another() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let silent = silent_receiver().await;
    // Eight projects with ten silent endpoints each and ten events for each: enough to hold
    // every sender any project may take (eight each) for a whole attempt, again and again.
    for _ in 0..8 {
        let (project, token) = app.other_project().await;
        for path in 0..10 {
            let url = format!("http://{silent}/{path}");
            let (status, endpoint) = register(&app, &token, project, &url).await;
            assert_eq!(status, 201, "{endpoint:#}");
        }
        let request = json!({ "project_id": project, "input_latex": HELLO });
        let first: Value = app
            .post_as(&token, "/compile", &request)
            .await
            .json()
            .await
            .unwrap();
        app.wait_terminal_as(&token, first.id()).await;
        for _ in 0..9 {
            let again = app.post_as(&token, "/compile", &request).await;
            assert_eq!(again.status(), 200, "a reused result");
        }
    }
    let ok = WebhookReceiver::start("ok");
    subscribe(&app, &ok).await;
    let original = app.compile(json!({ "input_latex": HELLO })).await;
    assert_eq!(original["status"], "Succeeded", "{original:#}");
    ok.wait_for(1).await;
    let started = std::time::Instant::now();
    let again = app.submit(json!({ "input_latex": HELLO })).await;
    assert!(again["reused_from"].is_string(), "{again:#}");
    ok.wait_for(2).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the delivery took {:?}",
        started.elapsed()
    );
}

/// An event for every endpoint of a project, without a compile: a job cancelled while queued.
async fn cancelled_job(app: &TestApp, token: &str, project: uuid::Uuid) {
    let request = json!({ "project_id": project, "input_latex": HELLO });
    let job: Value = app
        .post_as(token, "/compile", &request)
        .await
        .json()
        .await
        .unwrap();
    let cancelled = app
        .delete_as(token, &format!("/compile/{}", job.id()))
        .await;
    assert_eq!(cancelled.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn eighty_projects_of_silent_endpoints_leave_a_healthy_endpoint_served() {
    // No job runs: events come from cancelled jobs, and only the delivery worker works.
    let app = TestApp::spawn_with(|config| config.max_running_per_project = 0).await;
    let ok = WebhookReceiver::start("ok");
    subscribe(&app, &ok).await;
    cancelled_job(&app, &app.token, app.project_id).await;
    ok.wait_for(1).await;
    // Eighty projects of ten endpoints that never answer: more than every sender, each turn.
    let silent = silent_receiver().await;
    for _ in 0..80 {
        let (project, token) = app.other_project().await;
        for path in 0..10 {
            let url = format!("http://{silent}/{path}");
            let (status, endpoint) = register(&app, &token, project, &url).await;
            assert_eq!(status, 201, "{endpoint:#}");
        }
        cancelled_job(&app, &token, project).await;
    }
    let started = std::time::Instant::now();
    cancelled_job(&app, &app.token, app.project_id).await;
    ok.wait_for(2).await;
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "the healthy endpoint's delivery took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_holds_at_most_a_thousand_pending_deliveries() {
    // No scheduler: nothing is sent, and every event stays pending.
    let app = TestApp::spawn_api_only(|_| {}).await;
    let endpoint = subscribe(&app, &WebhookReceiver::start("ok")).await;
    cancelled_job(&app, &app.token, app.project_id).await;
    let first = deliveries(&app, &endpoint).await;
    assert_eq!(first[0]["status"], "pending");
    let (endpoint_id, job_id) = (
        uuid::Uuid::parse_str(endpoint.id()).unwrap(),
        uuid::Uuid::parse_str(first[0]["job_id"].as_str().unwrap()).unwrap(),
    );
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO webhook_deliveries (endpoint_id, project_id, job_id)
             SELECT $1, $2, $3 FROM generate_series(1, 999)",
            &[&endpoint_id, &app.project_id, &job_id],
        )
        .await
        .unwrap();
    cancelled_job(&app, &app.token, app.project_id).await;
    let newest = &deliveries(&app, &endpoint).await[0];
    assert_ne!(newest["job_id"], first[0]["job_id"], "{newest:#}");
    assert_eq!(newest["status"], "failed", "{newest:#}");
    assert_eq!(newest["attempts"], 0);
    assert!(
        newest["last_error"]
            .as_str()
            .unwrap()
            .contains("1000 deliveries pending"),
        "{newest:#}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduler_killed_mid_send_loses_no_event_and_two_never_send_one_attempt_twice() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let receiver = WebhookReceiver::start("hang-first");
    let endpoint = subscribe(&app, &receiver).await;
    let mut config = app.config.clone();
    config.scheduler_slots = 2;
    let mut first = SchedulerProcess::spawn(&config, &format!("hooks-a-{}", uuid::Uuid::new_v4()));
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let id = job.id().to_string();
    // The job ends, its event goes out, and the scheduler dies while the receiver holds the
    // attempt: the attempt's lease expires into a retry by another scheduler.
    receiver.wait_for(1).await;
    first.kill();
    let mut second = SchedulerProcess::spawn(&config, &format!("hooks-b-{}", uuid::Uuid::new_v4()));
    let mut third = SchedulerProcess::spawn(&config, &format!("hooks-c-{}", uuid::Uuid::new_v4()));
    let requests = receiver.wait_for(2).await;
    assert_eq!(
        requests[0]["id"], requests[1]["id"],
        "the same event, attempted again"
    );
    assert_eq!(requests[1]["body"]["data"]["id"], id.as_str());
    assert_eq!(requests[1]["verified"], true);
    // Two workers share the outbox: twenty more events, each sent as often as it was attempted.
    for _ in 0..20 {
        app.submit(json!({ "input_latex": HELLO, "cache": false }))
            .await;
    }
    let requests = receiver.wait_for(22).await;
    eventually(
        Duration::from_secs(60),
        "every delivery recorded",
        || async {
            let items = deliveries(&app, &endpoint).await;
            items.len() == 21 && items.iter().all(|d| d["status"] == "delivered")
        },
    )
    .await;
    for delivery in deliveries(&app, &endpoint).await {
        let sent = requests
            .iter()
            .filter(|r| r["id"] == delivery["id"])
            .count() as i64;
        assert_eq!(Some(sent), delivery["attempts"].as_i64(), "{delivery:#}");
    }
    second.terminate();
    third.terminate();
}

/// `texfleet <args>` as the app's project.
fn texfleet(app: &TestApp, args: &[&str]) -> std::process::Output {
    texfleet_command(app).args(args).output().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_manages_endpoints_and_verifies_a_saved_delivery() {
    let app = TestApp::spawn().await;
    let receiver = WebhookReceiver::start("ok");
    let added = texfleet(
        &app,
        &[
            "webhook",
            "add",
            &receiver.url(),
            "--description",
            "ci",
            "--json",
        ],
    );
    assert_eq!(
        added.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let endpoint: Value = serde_json::from_slice(&added.stdout).unwrap();
    let secret = endpoint["secret"].as_str().unwrap().to_string();
    let id = endpoint.id().to_string();
    receiver.set_secret(&secret);
    app.compile(json!({ "input_latex": HELLO })).await;
    let request = receiver.wait_for(1).await[0].clone();
    eventually(
        Duration::from_secs(10),
        "the delivery is listed",
        || async {
            let listed = texfleet(&app, &["webhook", "deliveries", &id]);
            String::from_utf8_lossy(&listed.stdout).contains("delivered")
        },
    )
    .await;
    let listed = texfleet(&app, &["webhook", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains(&id) && listed.contains("last 200"),
        "{listed}"
    );
    assert!(!listed.contains(&secret), "the secret is shown once");

    // The saved request verifies with the secret, and not once a byte of it changed.
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let headers = format!(
        "Content-Type: application/json\nwebhook-id: {}\nwebhook-timestamp: {}\nwebhook-signature: {}\n",
        request.id(),
        request["timestamp"].as_str().unwrap(),
        request["signature"].as_str().unwrap()
    );
    std::fs::write(dir.join("headers"), headers).unwrap();
    let raw = request["raw"].as_str().unwrap();
    let verify = |body: &str, secret: &str| {
        std::fs::write(dir.join("body"), body).unwrap();
        Command::new(TEXFLEET)
            .args(["webhook", "verify", "--any-time", "--headers"])
            .arg(dir.join("headers"))
            .arg("--body")
            .arg(dir.join("body"))
            .env("TEXFLEET_WEBHOOK_SECRET", secret)
            .output()
            .unwrap()
    };
    let valid = verify(raw, &secret);
    assert_eq!(
        valid.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&valid.stdout)
    );
    assert_eq!(
        verify(&raw.replace("Succeeded", "Succeedeb"), &secret)
            .status
            .code(),
        Some(1)
    );
    let (other_secret, _) = texfleet_core::webhook::secret::SecretBox::from_setting(
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    )
    .unwrap()
    .unwrap()
    .new_secret(uuid::Uuid::new_v4());
    assert_eq!(verify(raw, &other_secret).status.code(), Some(1));

    let removed = texfleet(&app, &["webhook", "remove", &id]);
    assert_eq!(removed.status.code(), Some(0));
    let again = texfleet(&app, &["webhook", "remove", &id]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "an unknown endpoint is the user's mistake"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_turns_private_after_registration_is_refused_at_delivery() {
    let app = TestApp::spawn_with(|config| config.webhook_allowed_cidrs = String::new()).await;
    let name = format!("rebind-{}.texfleet.test", uuid::Uuid::new_v4().simple());
    // A public address, never connected to: registration only resolves.
    let hosts = HostsEntry::new(&name, "93.184.215.14");
    let (status, endpoint) = register(
        &app,
        &app.token,
        app.project_id,
        &format!("http://{name}:9/hook"),
    )
    .await;
    assert_eq!(status, 201, "{endpoint:#}");
    hosts.point_to("127.0.0.1");
    app.compile(json!({ "input_latex": HELLO })).await;
    let refused = eventually_some(
        Duration::from_secs(30),
        "the attempt is recorded",
        || async {
            let items = deliveries(&app, &endpoint).await;
            items
                .first()
                .filter(|d| d["last_error"].is_string())
                .cloned()
        },
    )
    .await;
    let error = refused["last_error"].as_str().unwrap();
    assert!(
        error.starts_with("refused") && error.contains("public addresses only"),
        "{refused:#}"
    );
    assert!(
        !error.contains("127.0.0.1"),
        "the refusal does not map names to addresses"
    );
    assert!(
        refused["last_status_code"].is_null(),
        "nothing answered: nothing was sent"
    );
    assert_eq!(
        refused["status"], "pending",
        "it is retried, and checked again each time"
    );
}
