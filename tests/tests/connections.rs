//! No client can lock the API out: connections that say nothing, HTTP/2 connections that open
//! no stream or never finish one, keep-alive connections that idle, one address that opens
//! too many, and requests without a valid token, each against the real API while another
//! client is being served.

use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    address_of, client_from, closed_within, connect_from, eventually, metric, served_within,
    TestApp, HELLO,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

#[tokio::test(flavor = "multi_thread")]
async fn eleven_hundred_silent_connections_leave_room_for_a_client() {
    let app = TestApp::spawn_api_only(|config| config.max_connections_per_address = 0).await;
    let address = address_of(&app);
    let mut silent = Vec::new();
    for _ in 0..1100 {
        silent.push(connect_from("127.0.0.1", address).await);
    }
    served_within(&app, "127.0.0.1", Duration::from_secs(2)).await;
    let submitted = app.submit(json!({ "input_latex": HELLO })).await;
    assert_eq!(submitted["status"], "Queued");
    // Scrapes within a quarter of a second share one encoding of the metrics.
    eventually(Duration::from_secs(2), "evictions are counted", || async {
        metric(
            &app,
            "texfleet_http_connections_closed_total{reason=\"evicted\"}",
        )
        .await
            >= 76.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http2_connections_that_open_no_stream_or_never_finish_one_are_closed() {
    let app = TestApp::spawn_api_only(|config| config.header_timeout_seconds = 2).await;
    let address = address_of(&app);
    let mut quiet = Vec::new();
    for _ in 0..20 {
        let mut stream = connect_from("127.0.0.1", address).await;
        stream.write_all(PREFACE).await.unwrap();
        stream.write_all(EMPTY_SETTINGS).await.unwrap();
        quiet.push(stream);
    }
    let mut unfinished = Vec::new();
    for _ in 0..20 {
        let mut stream = connect_from("127.0.0.1", address).await;
        stream.write_all(PREFACE).await.unwrap();
        stream.write_all(EMPTY_SETTINGS).await.unwrap();
        // HEADERS on stream 1 without END_HEADERS: `:method GET`, then nothing more, ever.
        stream
            .write_all(&[0, 0, 1, 1, 0, 0, 0, 0, 1, 0x82])
            .await
            .unwrap();
        unfinished.push(stream);
    }
    served_within(&app, "127.0.0.2", Duration::from_secs(2)).await;
    for stream in quiet.iter_mut().chain(unfinished.iter_mut()) {
        assert!(
            closed_within(stream, Duration::from_secs(6)).await,
            "an HTTP/2 connection without a whole request stayed open"
        );
    }
}

/// An HTTP/2 request for `/healthz` on stream 1: HEADERS with END_HEADERS and END_STREAM.
fn http2_get_healthz() -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x44, 8];
    block.extend_from_slice(b"/healthz");
    block.extend_from_slice(&[0x41, 1, b'x']);
    let mut frame = vec![0, 0, block.len() as u8, 1, 0x05, 0, 0, 0, 1];
    frame.extend_from_slice(&block);
    frame
}

/// Reads until `stream` has sent at least `bytes` in all, within 5 s.
async fn read_at_least(stream: &mut TcpStream, bytes: usize) {
    let mut got = 0;
    let mut buffer = [0u8; 4096];
    while got < bytes {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .expect("the answer arrives")
            .unwrap();
        assert!(read > 0, "closed before the answer");
        got += read;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn keep_alive_connections_that_idle_are_closed() {
    let app = TestApp::spawn_api_only(|config| config.idle_timeout_seconds = 2).await;
    let address = address_of(&app);
    let mut http1 = connect_from("127.0.0.1", address).await;
    http1
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    read_at_least(&mut http1, 20).await;
    let mut http2 = connect_from("127.0.0.1", address).await;
    http2.write_all(PREFACE).await.unwrap();
    http2.write_all(EMPTY_SETTINGS).await.unwrap();
    http2.write_all(&http2_get_healthz()).await.unwrap();
    // Settings, their acknowledgement, the answer's headers and body.
    read_at_least(&mut http2, 40).await;
    for (protocol, stream) in [("HTTP/1.1", &mut http1), ("HTTP/2", &mut http2)] {
        assert!(
            !closed_within(stream, Duration::from_millis(300)).await,
            "{protocol}: closed before its idle time was up"
        );
    }
    for (protocol, stream) in [("HTTP/1.1", &mut http1), ("HTTP/2", &mut http2)] {
        assert!(
            closed_within(stream, Duration::from_secs(5)).await,
            "{protocol}: an idle keep-alive connection stayed open"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_address_past_its_cap_is_refused_while_another_is_served() {
    let app = TestApp::spawn_api_only(|config| config.max_connections_per_address = 10).await;
    let address = address_of(&app);
    let mut held = Vec::new();
    for _ in 0..10 {
        held.push(connect_from("127.0.0.1", address).await);
    }
    for _ in 0..10 {
        let mut over = connect_from("127.0.0.1", address).await;
        assert!(
            closed_within(&mut over, Duration::from_secs(1)).await,
            "a connection past the address's cap was kept"
        );
    }
    for stream in &mut held {
        assert!(!closed_within(stream, Duration::from_millis(50)).await);
    }
    served_within(&app, "127.0.0.2", Duration::from_secs(2)).await;
    eventually(Duration::from_secs(2), "refusals are counted", || async {
        metric(&app, "texfleet_http_connections_refused_total").await == 10.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_without_a_valid_token_are_limited_per_address_before_any_lookup() {
    let app = TestApp::spawn_api_only(|config| {
        config.address_rate_limit_per_second = 1;
        config.address_rate_limit_burst = 5;
    })
    .await;
    let client = client_from("127.0.0.1");
    // At once: a made-up token's 401 waits for the next refresh of the live tokens (a second
    // at most), in which the address's bucket would fill again.
    let responses = futures::future::join_all((0..10).map(|_| {
        client
            .get(format!("{}/projects/{}/compiles", app.url, app.project_id))
            .bearer_auth("not-a-token")
            .send()
    }))
    .await;
    let mut statuses: Vec<u16> = responses
        .iter()
        .map(|response| response.as_ref().unwrap().status().as_u16())
        .collect();
    statuses.sort();
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
    let last = responses
        .into_iter()
        .map(Result::unwrap)
        .find(|response| response.status() == 429)
        .unwrap();
    assert!(last.headers().contains_key("retry-after"));
    let problem: Value = last.json().await.unwrap();
    assert_eq!(problem["code"], "rate_limited");
    assert!(problem["detail"].as_str().unwrap().contains("address"));
    // Another address is not held up, and a valid token from it goes through.
    let other = client_from("127.0.0.2")
        .get(format!("{}/projects/{}/compiles", app.url, app.project_id))
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    // At least: another test of this process may have been limited too.
    eventually(
        Duration::from_secs(2),
        "address limits are counted",
        || async { metric(&app, "texfleet_http_rate_limited_total{by=\"address\"}").await >= 5.0 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn behind_a_trusted_proxy_the_header_names_the_client() {
    let app = TestApp::spawn_api_only(|config| {
        config.address_rate_limit_per_second = 1;
        config.address_rate_limit_burst = 2;
        config.max_connections_per_address = 4;
        config.trusted_proxies = "127.0.0.0/8".into();
        config.client_address_header = "X-Forwarded-For".into();
    })
    .await;
    let address = address_of(&app);
    let mut proxy_connections = Vec::new();
    for _ in 0..8 {
        proxy_connections.push(connect_from("127.0.0.1", address).await);
    }
    for stream in &mut proxy_connections {
        assert!(
            !closed_within(stream, Duration::from_millis(50)).await,
            "a trusted proxy's connections were capped"
        );
    }
    let proxy = client_from("127.0.0.1");
    let status_for = |client_ip: &'static str| {
        let proxy = proxy.clone();
        let url = format!("{}/healthz", app.url);
        async move {
            proxy
                .get(url)
                .header("X-Forwarded-For", format!("{client_ip}, 127.0.0.9"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let mut first = Vec::new();
    for _ in 0..3 {
        first.push(status_for("198.51.100.1").await);
    }
    assert_eq!(first, [200, 200, 429]);
    assert_eq!(status_for("198.51.100.2").await, 200);
}

/// HTTP/2 with a window of zero: the answer's body can never be sent.
const ZERO_WINDOW_SETTINGS: &[u8] = &[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0];

#[tokio::test(flavor = "multi_thread")]
async fn answers_their_clients_never_take_leave_room_for_a_client() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_connections = 40;
        config.max_connections_per_address = 0;
    })
    .await;
    let address = address_of(&app);
    let mut stalled = Vec::new();
    for _ in 0..40 {
        let mut stream = connect_from("127.0.0.1", address).await;
        stream.write_all(PREFACE).await.unwrap();
        stream.write_all(ZERO_WINDOW_SETTINGS).await.unwrap();
        stream.write_all(&http2_get_healthz()).await.unwrap();
        stalled.push(stream);
    }
    // Every connection is serving a request whose answer's head went out and whose body
    // cannot: settings, their acknowledgement, the head.
    for stream in &mut stalled {
        read_at_least(stream, 30).await;
    }
    served_within(&app, "127.0.0.2", Duration::from_secs(3)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn waits_take_a_bounded_share_of_the_connections() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_connections = 40;
        config.max_connections_per_address = 0;
    })
    .await;
    let job = app.submit(json!({ "input_latex": HELLO })).await;
    let url = format!("{}/compile/{}", app.url, job.id());
    let mut waits = tokio::task::JoinSet::new();
    for _ in 0..40 {
        let client = client_from("127.0.0.1");
        let request = client
            .get(&url)
            .bearer_auth(&app.token)
            .header("Prefer", "wait=60")
            .timeout(Duration::from_secs(90));
        waits.spawn(async move { request.send().await.map(|answer| answer.status()) });
    }
    // A quarter of the connections (10) may wait; the rest are answered at once.
    for _ in 0..30 {
        let answered = tokio::time::timeout(Duration::from_secs(5), waits.join_next())
            .await
            .expect("a wait past the cap is answered at once");
        assert_eq!(answered.unwrap().unwrap().unwrap(), 200);
    }
    served_within(&app, "127.0.0.2", Duration::from_secs(3)).await;
    assert_eq!(waits.len(), 10, "the waits within the cap still wait");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_few_addresses_keeping_every_connection_busy_leave_room_for_another() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_connections = 40;
        config.max_connections_per_address = 0;
    })
    .await;
    let address = address_of(&app);
    // Four addresses, ten connections each, each asking again as soon as it is answered: every
    // connection always has recent progress.
    let stop = tokio_util::sync::CancellationToken::new();
    let mut busy = tokio::task::JoinSet::new();
    for from in ["127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"] {
        for _ in 0..10 {
            let mut stream = connect_from(from, address).await;
            let stop = stop.clone();
            busy.spawn(async move {
                let mut answer = [0u8; 1024];
                while !stop.is_cancelled() {
                    let asked = stream
                        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                        .await;
                    if asked.is_err() || matches!(stream.read(&mut answer).await, Ok(0) | Err(_)) {
                        break;
                    }
                }
            });
        }
    }
    served_within(&app, "127.0.0.2", Duration::from_secs(3)).await;
    stop.cancel();
    busy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_network_opening_and_dropping_silent_connections_leaves_room_for_another() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_connections = 50;
        config.max_connections_per_address = 0;
    })
    .await;
    let address = address_of(&app);
    // Sixteen addresses of one /24, 1,536 connections at a time, each silent and dropped within
    // the newcomer grace: more than a listener's usual backlog (1,024), thirty times what the
    // API holds, every one of them a newcomer.
    let stop = tokio_util::sync::CancellationToken::new();
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut churn = tokio::task::JoinSet::new();
    for host in 1..=16u64 {
        for connection in 0..96 {
            let (stop, opened) = (stop.clone(), opened.clone());
            // Spread over the hold, so that the churn is steady, not in bursts.
            let phase = Duration::from_millis((connection * 16 + host) * 800 / 1536);
            churn.spawn(async move {
                tokio::time::sleep(phase).await;
                while !stop.is_cancelled() {
                    let stream = connect_from(&format!("127.1.0.{host}"), address).await;
                    opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(800)) => {}
                        () = stop.cancelled() => {}
                    }
                    drop(stream);
                }
            });
        }
    }
    texfleet_e2e::eventually(Duration::from_secs(30), "the churn fills the API", || {
        let opened = opened.clone();
        async move { opened.load(std::sync::atomic::Ordering::Relaxed) >= 3000 }
    })
    .await;
    for _ in 0..10 {
        served_within(&app, "127.0.0.2", Duration::from_secs(2)).await;
    }
    stop.cancel();
    churn.shutdown().await;
}
