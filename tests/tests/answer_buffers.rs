//! What hyper buffers of answers for a client that never reads stays counted by the answer
//! budget: hyper buffers little and an answer holds its place until hyper has taken its last
//! piece. A file of its own, so that the budget's gauge is this test's alone.

use std::time::Duration;
use texfleet_e2e::{address_of, eventually, metric, TestApp};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;

const HELD: &str = "texfleet_http_answer_bytes_held";

#[tokio::test(flavor = "multi_thread")]
async fn answers_hyper_buffers_for_a_reader_that_never_reads_stay_counted() {
    let app = TestApp::spawn_api_only(|config| {
        config.max_sending_bytes = 64 * 1024 * 1024;
        config.max_connections_per_address = 0;
    })
    .await;
    // Eight jobs (a connection's streams) of about 290 KiB each, each less than what hyper
    // buffered per HTTP/2 stream by default (400 KiB), together well past the connection's
    // socket buffer (512 KiB).
    app.insert_jobs_with_diagnostics(8, 150_000).await;
    let client = app.pool.get().await.unwrap();
    let ids: Vec<uuid::Uuid> = client
        .query("SELECT id FROM jobs", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    // An HTTP/2 client that opens every window wide and then reads nothing.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address_of(&app)).await.unwrap();
    let mut opening = PREFACE.to_vec();
    opening.extend_from_slice(&[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0x7f, 0xff, 0xff, 0xff]);
    opening.extend_from_slice(&[0, 0, 4, 8, 0, 0, 0, 0, 0, 0x7f, 0xfe, 0xff, 0xff]);
    for (stream_id, id) in (1u8..).step_by(2).zip(&ids) {
        let path = format!("/compile/{id}");
        let authorization = format!("Bearer {}", app.token);
        opening.extend(http2_get(stream_id, &path, &authorization));
    }
    stream.write_all(&opening).await.unwrap();
    // What the socket cannot take stays in the answers, counted: more than a mebibyte.
    let mebibyte = 1024.0 * 1024.0;
    eventually(
        Duration::from_secs(10),
        "the answers are charged",
        || async { metric(&app, HELD).await > mebibyte },
    )
    .await;
    // And stays counted while the reader takes nothing (hyper used to buffer each answer
    // whole, which then gave its place back at once).
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = metric(&app, HELD).await;
        assert!(
            held > mebibyte,
            "the budget was given back: {held} bytes held"
        );
    }
    drop(stream);
    eventually(Duration::from_secs(10), "the places come back", || async {
        metric(&app, HELD).await == 0.0
    })
    .await;
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 HEADERS frame of `GET path` with an Authorization header, its header fields
/// literal (HPACK's literal without indexing, each shorter than 127 bytes).
fn http2_get(stream_id: u8, path: &str, authorization: &str) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "x"),
        (":path", path),
        ("authorization", authorization),
    ] {
        block.push(0);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    let length = (block.len() as u32).to_be_bytes();
    let mut frame = vec![length[1], length[2], length[3], 1, 0x05, 0, 0, 0, stream_id];
    frame.extend_from_slice(&block);
    frame
}
