//! Hostile tenants outside the sandbox: what a client can do to the service without any
//! document trick. A NUL byte in a diagnostic, one project's slow jobs, slow or silent
//! connections, a body made to amplify the answer, and a crafted cursor each end in a clear
//! answer, and the service keeps serving everyone else.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{closed_within, TestApp, HELLO};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread")]
async fn a_nul_byte_and_a_huge_file_name_in_the_log_are_cleaned_not_fatal() {
    let app = TestApp::spawn().await;
    let long_file = "d".repeat(5000);
    // LuaTeX may append to its own log: a NUL byte and a file name of 5,000 characters, after
    // room for what TeX still writes at its own offset.
    let document = format!(
        "\\documentclass{{article}}\\begin{{document}}x\\directlua{{local f = io.open('output.log', 'a') \
         f:write(string.rep(' ', 65536) .. '\\string\\n! Bad' .. string.char(0) .. 'thing\\string\\n./{long_file}.tex:1: boom\\string\\n') f:close()}}\\end{{document}}"
    );
    let job = app
        .compile(json!({ "input_latex": document, "engine": "lualatex" }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let diagnostics = job["diagnostics"].as_array().unwrap();
    assert!(
        diagnostics.iter().any(|d| d["message"] == "Badthing"),
        "{diagnostics:#?}"
    );
    let file = diagnostics
        .iter()
        .find_map(|d| d["file"].as_str().filter(|f| f.starts_with("ddd")))
        .expect("the long file name is kept, cut");
    assert_eq!(file.chars().count(), 200);
    let id: uuid::Uuid = job.id().parse().unwrap();
    assert_eq!(
        app.count_jobs(&format!("id = '{id}' AND attempts = 1"))
            .await,
        1,
        "the outcome was recorded at the first attempt"
    );
}

/// About fifteen seconds of TeX arithmetic.
const SLOW: &str = "\\documentclass{article}\\begin{document}\\count255=0 \
    \\loop\\advance\\count255 by 1 \\ifnum\\count255<30000000 \\repeat Slow.\\end{document}";

#[tokio::test(flavor = "multi_thread")]
async fn a_project_with_slow_jobs_leaves_a_slot_for_another() {
    let app = TestApp::spawn_with(|config| {
        config.scheduler_slots = 2;
        config.max_running_per_project = 4;
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..2 {
        let job = app
            .submit(json!({ "input_latex": SLOW, "timeout_seconds": 120 }))
            .await;
        slow.push(job.id().to_string());
    }
    texfleet_e2e::eventually(Duration::from_secs(60), "a slow job runs", || async {
        app.count_jobs("status = 'Running'").await == 1
    })
    .await;
    let (project, token) = app.other_project().await;
    let quick = app
        .post_as(
            &token,
            "/compile",
            &json!({ "project_id": project, "input_latex": HELLO }),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    let quick_id = quick.id();
    let quick = loop {
        let job: Value = app
            .get_as(&token, &format!("/compile/{quick_id}"))
            .await
            .json()
            .await
            .unwrap();
        if job["status"] != "Queued" && job["status"] != "Running" {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(quick["status"], "Succeeded", "{quick:#}");
    let running = app.count_jobs("status = 'Running'").await;
    let queued = app.count_jobs("status = 'Queued'").await;
    assert_eq!(
        (running, queued),
        (1, 1),
        "the other project's job ran while the first project's slow job still ran"
    );
    for id in slow {
        app.delete_as(&app.token, &format!("/compile/{id}")).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_and_silent_connections_are_closed_while_others_are_served() {
    let app = TestApp::spawn_api_only(|config| {
        config.header_timeout_seconds = 2;
        config.body_timeout_seconds = 3;
    })
    .await;
    let address = app.url.trim_start_matches("http://").to_string();
    let mut stalled_headers = Vec::new();
    for _ in 0..100 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(b"POST /compile HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        stalled_headers.push(stream);
    }
    let mut stalled_bodies = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /compile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{",
            app.token
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stalled_bodies.push(stream);
    }
    // Everyone else is served meanwhile.
    let started = Instant::now();
    let submitted = app.submit(json!({ "input_latex": HELLO })).await;
    assert_eq!(submitted["status"], "Queued");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a normal request waited"
    );
    for stream in &mut stalled_headers {
        assert!(
            closed_within(stream, Duration::from_secs(6)).await,
            "a connection without complete headers stayed open"
        );
    }
    for stream in &mut stalled_bodies {
        assert!(
            closed_within(stream, Duration::from_secs(8)).await,
            "a connection with an incomplete body stayed open"
        );
    }
    assert_eq!(app.count_jobs("true").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_made_to_amplify_the_answer_gets_a_small_one() {
    let app = TestApp::spawn_api_only(|config| config.max_body_bytes = 16 * 1024 * 1024).await;
    let mut flood = String::from("{");
    for i in 0..600_000 {
        flood.push_str(&format!("\"k{i}\":0,"));
    }
    flood.push_str(&format!("\"project_id\":\"{}\"}}", app.project_id));
    let response = app
        .http
        .post(format!("{}/compile", app.url))
        .bearer_auth(&app.token)
        .header("Content-Type", "application/json")
        .body(flood)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let answer = response.bytes().await.unwrap();
    assert!(answer.len() < 4096, "the answer is {} bytes", answer.len());
    let problem: Value = serde_json::from_slice(&answer).unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("fields in all"),
        "the body was parsed whole before it was refused: {problem:#}"
    );

    let mut body = json!({ "project_id": app.project_id, "input_latex": HELLO });
    for i in 0..80 {
        body[format!("unknown{i}")] = json!(i);
    }
    let response = app.post_compile(&body).await;
    assert_eq!(response.status(), 422);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["errors"].as_array().unwrap().len(), 50);
    assert!(
        problem["detail"].as_str().unwrap().ends_with("and 30 more"),
        "{problem:#}"
    );
    assert_eq!(app.count_jobs("true").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crafted_cursor_is_a_422() {
    use base64::Engine as _;
    let app = TestApp::spawn_api_only(|_| {}).await;
    let ancient = format!("-230000000000000000000.{}", uuid::Uuid::new_v4());
    let cursor = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ancient);
    let response = app
        .get(&format!(
            "/projects/{}/compiles?cursor={cursor}",
            app.project_id
        ))
        .await;
    assert_eq!(response.status(), 422);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "cursor");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_sends_a_huge_body_before_reading_gets_the_413() {
    let app = TestApp::spawn_api_only(|config| config.max_body_bytes = 1024 * 1024).await;
    let address = app.url.trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&address).await.unwrap();
    let length = 64 * 1024 * 1024;
    let head = format!(
        "POST /compile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
        app.token
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 1024 * 1024];
    for _ in 0..64 {
        stream
            .write_all(&chunk)
            .await
            .expect("the server kept reading the body");
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");

    // The same with Python's urllib, which sends the whole body before it reads anything.
    let script = format!(
        "import urllib.request, urllib.error\n\
         request = urllib.request.Request('{}/compile', data=b' ' * {length}, method='POST',\n\
             headers={{'Authorization': 'Bearer {}', 'Content-Type': 'application/json'}})\n\
         try:\n    urllib.request.urlopen(request)\n\
         except urllib.error.HTTPError as error:\n    print(error.code, error.read().decode())\n",
        app.url, app.token
    );
    let python = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let printed = String::from_utf8_lossy(&python.stdout);
    assert!(
        printed.starts_with("413 ") && printed.contains("payload_too_large"),
        "urllib saw: {printed} {}",
        String::from_utf8_lossy(&python.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_of_jobs_holds_at_most_a_mebibyte_of_diagnostics_and_goes_on() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    app.insert_jobs_with_diagnostics(5, 200_000).await;
    let mut sizes = Vec::new();
    let mut path = format!("/projects/{}/compiles?limit=100", app.project_id);
    loop {
        let response = app.get(&path).await;
        assert_eq!(response.status(), 200);
        let body = response.bytes().await.unwrap();
        let page: Value = serde_json::from_slice(&body).unwrap();
        sizes.push((page["items"].as_array().unwrap().len(), body.len()));
        match page["next_cursor"].as_str() {
            Some(cursor) => {
                path = format!(
                    "/projects/{}/compiles?limit=100&cursor={cursor}",
                    app.project_id
                )
            }
            None => break,
        }
    }
    let items: Vec<usize> = sizes.iter().map(|(items, _)| *items).collect();
    assert_eq!(items, [2, 2, 1], "{sizes:?}");
    assert!(
        sizes.iter().all(|(_, bytes)| *bytes < 1_700_000),
        "{sizes:?}"
    );
}
