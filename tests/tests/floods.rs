//! Bytes that never become requests: HTTP/2 control frames sent as fast as a network can, over
//! every connection its address may hold, against the real API while another client asks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use texfleet_e2e::{address_of, connect_from, eventually, metric, served_within, TestApp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Each flood is meant to load the API alone: eleven at once on a two-core machine would time
/// the machine, not the API's pacing.
static ONE_FLOOD_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
/// What a network may send besides requests before it is paced, and its pace a second.
const BURST: f64 = 4.0 * 1024.0 * 1024.0;
const RATE: f64 = 64.0 * 1024.0;

/// Frames no limit on requests counts, each answered or parsed by the API: PING (answered
/// with a PING of 17 bytes), PRIORITY of a stream never opened, and a frame of an unknown
/// type; 44 bytes in all.
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

/// Floods the API from the addresses `from` in turn with HTTP/2 control frames over
/// `connections` connections, as fast as it reads them or `pace` bytes a second each, reading
/// its answers: returns the tasks and the bytes answered so far.
async fn control_frame_flood(
    app: &TestApp,
    from: &[String],
    connections: usize,
    pace: Option<f64>,
) -> (tokio::task::JoinSet<()>, Arc<AtomicU64>) {
    let address = address_of(app);
    let frames = control_frames();
    let answered = Arc::new(AtomicU64::new(0));
    let mut flood = tokio::task::JoinSet::new();
    for from in from.iter().cycle().take(connections) {
        let (mut reading, mut writing) = connect_from(from, address).await.into_split();
        // The answers are read, so that the API is never held back by a full buffer.
        let answered = answered.clone();
        flood.spawn(async move {
            let mut sink = vec![0; 64 * 1024];
            while let Ok(read @ 1..) = reading.read(&mut sink).await {
                answered.fetch_add(read as u64, Ordering::Relaxed);
            }
        });
        let frames = frames.clone();
        flood.spawn(async move {
            writing.write_all(PREFACE).await.ok();
            writing.write_all(EMPTY_SETTINGS).await.ok();
            let Some(pace) = pace else {
                while writing.write_all(&frames).await.is_ok() {}
                return;
            };
            let chunk = &frames[..44 * 32];
            let mut ticks =
                tokio::time::interval(Duration::from_secs_f64(chunk.len() as f64 / pace));
            loop {
                ticks.tick().await;
                if writing.write_all(chunk).await.is_err() {
                    break;
                }
            }
        });
    }
    (flood, answered)
}

/// How many of a /24's burst and pace a flood may be read at: its networks' and, while its
/// parts are in good standing, their reserves (a quarter of each).
struct Bound {
    bursts: f64,
    paces: f64,
}

/// The most the API may have answered to a flood of [`control_frames`] over `connections`
/// connections since `started`, having read at most what `bound` allows, and a last read of
/// each connection past it: a PING (17 bytes) for every 44 bytes, besides each connection's
/// SETTINGS.
fn answers_at_most(started: Instant, connections: usize, bound: Bound) -> f64 {
    let read_at_most = bound.bursts * BURST
        + bound.paces * RATE * started.elapsed().as_secs_f64()
        + connections as f64 * 16.0 * 1024.0;
    read_at_most * 17.0 / 44.0 + connections as f64 * 64.0
}

/// Once a flood is paced, `asks` requests of the client at `asking`, four a second as an
/// editor polling a job asks, each served within a second.
async fn served_while_paced(app: &TestApp, asking: &str, asks: usize) {
    eventually(Duration::from_secs(10), "the flood is paced", || async {
        metric(app, "texfleet_http_reads_paced_total").await > 0.0
    })
    .await;
    for _ in 0..asks {
        served_within(app, asking, Duration::from_secs(1)).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Floods the API with control frames from `from` over `connections` connections, and checks
/// that the flood is paced, that the client at `asking` is served `asks` times within a second
/// each (a quarter of a second apart), and that the API answered no more than `bound` allows.
async fn a_paced_flood_leaves_another_served(
    from: &[String],
    connections: usize,
    bound: Bound,
    asking: &str,
    asks: usize,
) {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let started = Instant::now();
    let (flood, answered) = control_frame_flood(&app, from, connections, None).await;
    served_while_paced(&app, asking, asks).await;
    let answered = answered.load(Ordering::Relaxed) as f64;
    let at_most = answers_at_most(started, connections, bound);
    assert!(
        answered <= at_most,
        "the API answered {answered} bytes of a flood, where it should have answered at most {at_most}"
    );
    drop(flood);
}

/// The first address of each of the `networks` /24s of the /16 `sixteen` (`127.5`).
fn one_in_each_24(sixteen: &str, networks: std::ops::RangeInclusive<u8>) -> Vec<String> {
    networks
        .map(|network| format!("{sixteen}.{network}.1"))
        .collect()
}

/// A /24's burst and pace, all one address may use when it is its network's only one.
const ONE_24: Bound = Bound {
    bursts: 1.0,
    paces: 1.0,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_http2_control_frames_from_one_address_leaves_another_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    // Every connection one address may hold (`max_connections_per_address`), from a network
    // of its own.
    a_paced_flood_leaves_another_served(&["127.0.1.1".into()], 128, ONE_24, "127.0.0.2", 5).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_http2_control_frames_leaves_the_neighbours_in_its_24_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    a_paced_flood_leaves_another_served(&["127.0.6.1".into()], 128, ONE_24, "127.0.6.2", 5).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_from_addresses_that_each_send_a_little_leaves_the_neighbours_in_its_24_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    let app = TestApp::spawn_api_only(|_| {}).await;
    // One address spends the /24's bucket; eight more send 48 KiB a second each, over five
    // connections, to draw on its reserve while owing little.
    let (_dirty, _) = control_frame_flood(&app, &["127.0.7.1".into()], 4, None).await;
    let spread: Vec<String> = (10..18).map(|host| format!("127.0.7.{host}")).collect();
    let (_spread, _) = control_frame_flood(&app, &spread, 40, Some(48.0 * 1024.0 / 5.0)).await;
    served_while_paced(&app, "127.0.7.200", 32).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fresh_addresses_refused_requests_by_the_dozen_leave_the_neighbours_in_their_24_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    // One request a second per token: every request past the first is refused, 1 KiB each.
    let app = TestApp::spawn_api_only(|config| {
        config.rate_limit_per_second = 1;
        config.rate_limit_burst = 1;
    })
    .await;
    let (_dirty, _) = control_frame_flood(&app, &["127.0.9.1".into()], 4, None).await;
    // Sixteen fresh addresses a second, each pipelining thirty requests with the token.
    let request = format!(
        "GET /compile/00000000-0000-0000-0000-000000000000 HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\n\r\n",
        app.token
    );
    let requests = request.repeat(30).into_bytes();
    let address = address_of(&app);
    let mut fresh = tokio::task::JoinSet::new();
    fresh.spawn(async move {
        let mut arrivals = tokio::time::interval(Duration::from_millis(62));
        let mut held = Vec::new();
        for host in 10..200 {
            arrivals.tick().await;
            let mut stream = connect_from(&format!("127.0.9.{host}"), address).await;
            stream.write_all(&requests).await.ok();
            held.push(stream);
        }
    });
    served_while_paced(&app, "127.0.9.250", 32).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_from_the_24s_of_one_16_leaves_the_neighbours_in_its_24s_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    // Sixteen /24s of one /16 spend its bucket; the client asking shares the first /24.
    let addresses = one_in_each_24("127.30", 1..=16);
    // The /16's bucket and its reserve, and the /24s' reserves.
    let bound = Bound {
        bursts: 6.0,
        paces: 8.0,
    };
    a_paced_flood_leaves_another_served(&addresses, 96, bound, "127.30.1.200", 32).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_from_fresh_addresses_in_the_24s_of_one_16_leaves_a_clean_24_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    let app = TestApp::spawn_api_only(|_| {}).await;
    // A fresh address every 4 ms, in turn in each of 64 /24s of the asking client's /16, each
    // sending 64 KiB of control frames over a connection held for two seconds.
    let address = address_of(&app);
    let frames = control_frames();
    let mut fresh = tokio::task::JoinSet::new();
    fresh.spawn(async move {
        let mut arrivals = tokio::time::interval(Duration::from_millis(4));
        let mut held = tokio::task::JoinSet::new();
        for index in 0..64 * 250 {
            arrivals.tick().await;
            let from = format!("127.70.{}.{}", index % 64, 1 + index / 64);
            let frames = [PREFACE, EMPTY_SETTINGS, &frames[..64 * 1024]].concat();
            held.spawn(async move {
                let mut stream = connect_from(&from, address).await;
                stream.write_all(&frames).await.ok();
                tokio::time::sleep(Duration::from_secs(2)).await;
            });
        }
    });
    served_while_paced(&app, "127.70.200.200", 32).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_http2_control_frames_from_the_24s_of_one_16_is_paced_as_one() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    let addresses = one_in_each_24("127.5", 0..=63);
    // The /16's bucket (four times a /24's) and its reserve.
    let bound = Bound {
        bursts: 5.0,
        paces: 5.0,
    };
    a_paced_flood_leaves_another_served(&addresses, 256, bound, "127.0.0.2", 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_http2_control_frames_from_many_16s_is_paced_as_all_and_leaves_another_served() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    let addresses: Vec<String> = (0..64)
        .map(|address| format!("127.{}.{}.1", 16 + address / 4, address % 4))
        .collect();
    // The API's bucket (eight times a /24's burst, sixteen times its pace) and its reserve.
    let bound = Bound {
        bursts: 10.0,
        paces: 20.0,
    };
    a_paced_flood_leaves_another_served(&addresses, 256, bound, "127.0.0.2", 3).await;
}

/// Answers in `received` (with the end of the previous chunk before it) that start with
/// `HTTP/1.1 `.
fn answers_in(received: &[u8]) -> usize {
    received.windows(9).filter(|w| *w == b"HTTP/1.1 ").count()
}

/// Pipelines `request` from four connections of `from`, past the address's rate: the API
/// must read them at its network's pace, each `429` costing the request's length and a
/// kilobyte at least, and serve another client meanwhile.
async fn pipelined_past_the_address_rate(from: &str, request: &str) {
    let app = TestApp::spawn_api_only(|config| {
        config.address_rate_limit_per_second = 50;
        config.address_rate_limit_burst = 50;
    })
    .await;
    let address = address_of(&app);
    let requests = request.repeat(200_000 / request.len()).into_bytes();
    let answers = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (mut reading, mut writing) = connect_from(from, address).await.into_split();
        let answers = answers.clone();
        flood.spawn(async move {
            let mut received = vec![0; 8];
            let mut chunk = vec![0; 64 * 1024];
            while let Ok(read @ 1..) = reading.read(&mut chunk).await {
                received.truncate(8);
                received.extend_from_slice(&chunk[..read]);
                answers.fetch_add(answers_in(&received) as u64, Ordering::Relaxed);
                received.drain(..received.len() - 8);
            }
        });
        let requests = requests.clone();
        flood.spawn(async move { while writing.write_all(&requests).await.is_ok() {} });
    }
    eventually(Duration::from_secs(10), "the flood is paced", || async {
        metric(&app, "texfleet_http_reads_paced_total").await > 0.0
    })
    .await;
    served_within(&app, "127.0.0.2", Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Each `429` is charged: the API read at most its burst and its pace of the requests, and
    // a last read of each connection (hyper's HTTP/1 buffer, 64 KiB) past them, besides the
    // requests within the address's rate.
    let answers = answers.load(Ordering::Relaxed) as f64;
    let seconds = started.elapsed().as_secs_f64();
    let cost = request.len().max(1024) as f64;
    let read_at_most = BURST + RATE * seconds + 4.0 * 64.0 * 1024.0;
    assert!(
        answers
            <= read_at_most / cost
                + 4.0 * 64.0 * 1024.0 / request.len() as f64
                + 50.0 * (1.0 + seconds),
        "the API answered {answers} requests past their rate, of {} bytes each, where it should \
         have read at most {read_at_most} bytes at {cost} bytes a request",
        request.len()
    );
    flood.abort_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_pipelined_past_their_address_rate_are_read_at_a_pace() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    let padded = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: {}\r\n\r\n",
        "p".repeat(2000)
    );
    pipelined_past_the_address_rate("127.0.2.1", &padded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tiny_requests_pipelined_past_their_address_rate_are_paced_as_a_kilobyte_each() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    pipelined_past_the_address_rate("127.0.4.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_sent_a_byte_a_chunk_is_paced_as_its_chunks_cost() {
    let _alone = ONE_FLOOD_AT_A_TIME.lock().await;
    let app = TestApp::spawn_api_only(|_| {}).await;
    let (_reading, mut writing) = connect_from("127.0.3.1", address_of(&app))
        .await
        .into_split();
    let head = format!(
        "POST /compile HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        app.token
    );
    writing.write_all(head.as_bytes()).await.unwrap();
    // Each chunk costs the API a frame to decode and give to the body's reader, for 6 bytes.
    let chunks = b"1\r\n \r\n".repeat(10_000);
    let started = Instant::now();
    let flood = tokio::spawn(async move { while writing.write_all(&chunks).await.is_ok() {} });
    // Paced after about four thousand chunks (its network's burst at a kilobyte a chunk), not
    // after the 800,000 whose bytes alone make up the burst.
    eventually(Duration::from_secs(10), "the chunks are paced", || async {
        metric(&app, "texfleet_http_reads_paced_total").await > 0.0
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "paced only after {:?}",
        started.elapsed()
    );
    served_within(&app, "127.0.0.2", Duration::from_secs(1)).await;
    flood.abort();
}
