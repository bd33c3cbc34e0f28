//! Bytes that never become requests: HTTP/2 control frames sent as fast as a network can, over
//! every connection its address may hold, against the real API while another client asks.

use std::time::Duration;
use texfleet_e2e::{address_of, connect_from, eventually, metric, served_within, TestApp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// Frames no limit on requests counts, each answered or parsed by the API: PING (answered
/// with a PING), PRIORITY of a stream never opened, and a frame of an unknown type.
fn control_frames() -> Vec<u8> {
    let ping = [&[0, 0, 8, 6, 0, 0, 0, 0, 0][..], &[7; 8]].concat();
    let priority = [0, 0, 5, 2, 0, 0, 0, 0, 3, 0, 0, 0, 1, 16];
    let unknown = [0, 0, 4, 0x20, 0, 0, 0, 0, 0, 1, 2, 3, 4];
    let mut frames = Vec::new();
    for _ in 0..2000 {
        frames.extend_from_slice(&ping);
        frames.extend_from_slice(&priority);
        frames.extend_from_slice(&unknown);
    }
    frames
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_http2_control_frames_from_one_address_leaves_another_served() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let address = address_of(&app);
    let frames = control_frames();
    let mut flood = tokio::task::JoinSet::new();
    // Every connection one address may hold (`max_connections_per_address`), from a network
    // of its own.
    for _ in 0..128 {
        let (mut reading, mut writing) = connect_from("127.0.1.1", address).await.into_split();
        // The answers (PINGs) are read, so that the API is never held back by a full buffer.
        flood.spawn(async move {
            let mut sink = vec![0; 64 * 1024];
            while reading.read(&mut sink).await.is_ok_and(|read| read > 0) {}
        });
        let frames = frames.clone();
        flood.spawn(async move {
            writing.write_all(PREFACE).await.ok();
            writing.write_all(EMPTY_SETTINGS).await.ok();
            while writing.write_all(&frames).await.is_ok() {}
        });
    }
    eventually(Duration::from_secs(10), "the flood is paced", || async {
        metric(&app, "texfleet_http_reads_paced_total").await > 0.0
    })
    .await;
    for _ in 0..5 {
        served_within(&app, "127.0.0.2", Duration::from_secs(1)).await;
    }
    flood.abort_all();
}
