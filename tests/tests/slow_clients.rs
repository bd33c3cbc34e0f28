//! Memory that slow clients make the API hold: request bodies still arriving and answers still
//! being read. One project's slow clients take at most a quarter of each budget, and another
//! project is served beside them.

use serde_json::Value;
use std::time::Duration;
use texfleet_e2e::{address_of, connect_from, eventually, TestApp, HELLO};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

#[tokio::test(flavor = "multi_thread")]
async fn one_project_s_slow_readers_leave_room_for_another() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_sending_bytes = 8 * 1024 * 1024;
        config.max_connections_per_address = 0;
    })
    .await;
    // A first page holds two of these jobs: about 940 KiB, held while its reader stalls. Two
    // readers leave the project's share (2 MiB) no room for another page, nor for a request's
    // reservation (256 KiB).
    app.insert_jobs_with_diagnostics(5, 240_000).await;
    let path = format!("/projects/{}/compiles?limit=100", app.project_id);
    let readers = [
        slow_reader(&app, &path).await,
        slow_reader(&app, &path).await,
    ];
    let refused = app.get(&path).await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "unavailable", "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("answers"),
        "{problem}"
    );
    // Past its share, the project's requests are refused before anything is done.
    let submitted = app
        .post_compile(&serde_json::json!({ "project_id": app.project_id, "input_latex": HELLO }))
        .await;
    assert_eq!(submitted.status(), 503);
    assert_eq!(
        app.count_jobs("true").await,
        5,
        "a refused submission queued a job"
    );
    let (other, token) = app.other_project().await;
    let served = app
        .get_as(&token, &format!("/projects/{other}/compiles"))
        .await;
    assert_eq!(served.status(), 200, "another project was refused");
    // The readers' places come back when their connections close.
    drop(readers);
    eventually(
        Duration::from_secs(10),
        "the project is answered again",
        || async { app.get(&path).await.status() == 200 },
    )
    .await;
}

/// A connection whose `GET path` is answered and read no further than its status line, with
/// a receive buffer of a few KiB: the API holds the rest of the answer.
async fn slow_reader(app: &TestApp, path: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address_of(app)).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        app.token
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut status = [0u8; 12];
    stream.read_exact(&mut status).await.unwrap();
    assert_eq!(&status, b"HTTP/1.1 200");
    stream
}

#[tokio::test(flavor = "multi_thread")]
async fn one_project_receiving_bodies_leaves_room_for_another() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_body_bytes = 1024 * 1024;
        config.max_connections_per_address = 0;
    })
    .await;
    // The API holds sixteen bodies of the largest size at most, a project four of them.
    let mut first = Vec::new();
    for _ in 0..20 {
        first.push(stalled_upload(&app, &app.token).await);
    }
    let refused = refused_uploads(&mut first).await;
    assert!(
        refused >= 16,
        "{refused} of one project's 20 uploads were refused"
    );
    let (_, other) = app.other_project().await;
    let mut second = Vec::new();
    for _ in 0..4 {
        second.push(stalled_upload(&app, &other).await);
    }
    assert_eq!(
        refused_uploads(&mut second).await,
        0,
        "another project's uploads were refused"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn projects_filling_the_receiving_budget_leave_room_for_another_s_upload() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_body_bytes = 1024 * 1024;
        config.max_connections_per_address = 0;
    })
    .await;
    // Four projects, four stalled uploads each: the sixteen bodies the API holds at most.
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let (_, token) = app.other_project().await;
        for _ in 0..4 {
            stalled.push(stalled_upload(&app, &token).await);
        }
    }
    assert_eq!(refused_uploads(&mut stalled).await, 0, "within the budget");
    let (_, other) = app.other_project().await;
    let mut upload = [stalled_upload(&app, &other).await];
    assert_eq!(
        refused_uploads(&mut upload).await,
        0,
        "a fifth project's first upload was refused"
    );
}

/// A `POST /compile` whose body stops one byte short of the largest allowed.
async fn stalled_upload(app: &TestApp, token: &str) -> TcpStream {
    let mut stream = connect_from("127.0.0.1", address_of(app)).await;
    let size = app.config.max_body_bytes;
    let head = format!(
        "POST /compile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
    );
    // A refused upload may be closed before all of it is written.
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&vec![b' '; size - 1]).await;
    stream
}

/// How many of `uploads` were answered `503` because too many bodies were being received (an
/// upload that is held is not answered at all).
async fn refused_uploads(uploads: &mut [TcpStream]) -> usize {
    let mut refused = 0;
    for stream in uploads {
        let mut answer = vec![0u8; 4096];
        if let Ok(Ok(read)) =
            tokio::time::timeout(Duration::from_millis(500), stream.read(&mut answer)).await
        {
            let text = String::from_utf8_lossy(&answer[..read]);
            refused +=
                usize::from(text.starts_with("HTTP/1.1 503") && text.contains("request bodies"));
        }
    }
    refused
}
