use super::bucket::{BURST, IN_GOOD_STANDING};
use super::*;

impl Meter {
    /// How long to wait before reading again, if a network owes more than its burst.
    pub(super) fn wait(&self) -> Option<Duration> {
        let wait = self.admit()?.wait;
        (!wait.is_zero()).then(|| wait.min(LONGEST_WAIT))
    }
}

#[tokio::test(start_paused = true)]
async fn a_network_owing_its_burst_waits_and_requests_cost_it_nothing() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let neighbour = pacing.meter("192.0.2.8".parse().unwrap(), false);
    let other = pacing.meter("198.51.100.1".parse().unwrap(), false);
    // Requests' bytes are given back: any amount of them is free.
    for _ in 0..100 {
        flooding.read(64 * 1024);
        flooding.give_back(64 * 1024);
    }
    assert_eq!(flooding.wait(), None);
    flooding.read(BURST as usize + 32 * 1024);
    assert_eq!(flooding.wait(), Some(Duration::from_millis(250)));
    assert_eq!(other.wait(), None);
    tokio::time::advance(Duration::from_millis(500)).await;
    assert_eq!(flooding.wait(), None, "refilled at 64 KiB a second");
    let proxy = pacing.meter("192.0.2.9".parse().unwrap(), true);
    proxy.read(100 * BURST as usize);
    assert_eq!(proxy.wait(), None);
    assert_eq!(neighbour.wait(), None);
}

#[tokio::test(start_paused = true)]
async fn a_neighbour_in_good_standing_reads_from_the_reserve_a_flood_never_touches() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let neighbour = pacing.meter("192.0.2.8".parse().unwrap(), false);
    let spread = pacing.meter("192.0.2.9".parse().unwrap(), false);
    let clean = pacing.meter("192.0.2.10".parse().unwrap(), false);
    assert_eq!(clean.wait(), None, "known before the flood");
    // The flood's last reads take its /24 far below nothing.
    flooding.read(2 * BURST as usize);
    assert!(flooding.wait().is_some());
    // A neighbour that sends requests is read at once, however often.
    for _ in 0..1000 {
        assert_eq!(neighbour.wait(), None, "the neighbour is read");
        neighbour.read(4096);
        neighbour.give_back(4096);
    }
    assert!(
        flooding.wait().is_some(),
        "requests give back to the reserve first"
    );
    // Clean addresses that flood spend the reserve (a quarter of the burst), then wait too.
    assert_eq!(spread.wait(), None, "let read from the reserve");
    spread.read(BURST as usize / 4 + 1);
    assert!(spread.wait().is_some());
    assert!(clean.wait().is_some(), "the reserve is spent");
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(clean.wait(), None, "the reserve refills");
    assert!(flooding.wait().is_some());
    // A newcomer to the flooding /24 reads once the reserve holds a quarter of it.
    let newcomer = pacing.meter("192.0.2.11".parse().unwrap(), false);
    assert!(newcomer.wait().is_some());
    tokio::time::advance(Duration::from_secs(4)).await;
    assert_eq!(newcomer.wait(), None);
}

#[tokio::test(start_paused = true)]
async fn a_read_let_from_the_bucket_never_comes_from_the_reserve() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let clean = pacing.meter("192.0.2.8".parse().unwrap(), false);
    let neighbour = pacing.meter("192.0.2.9".parse().unwrap(), false);
    // Let read while its /24 owes nothing; a flood spends the bucket before the read ends.
    assert_eq!(clean.wait(), None);
    flooding.read(2 * BURST as usize);
    clean.read(BURST as usize / 4 + 1);
    assert_eq!(neighbour.wait(), None, "the reserve is whole");
}

#[tokio::test(start_paused = true)]
async fn of_the_clients_in_good_standing_the_one_owing_least_reads_first() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let owing = pacing.meter("192.0.2.8".parse().unwrap(), false);
    let asking = pacing.meter("192.0.2.9".parse().unwrap(), false);
    for known in [&owing, &asking] {
        assert_eq!(known.wait(), None, "known before the flood");
    }
    flooding.read(2 * BURST as usize);
    // Half its standing in bytes that are not requests: still in good standing.
    owing.read(IN_GOOD_STANDING as usize / 2);
    assert_eq!(owing.wait(), None, "the reserve is full");
    let spending = pacing.meter("192.0.2.10".parse().unwrap(), false);
    assert_eq!(spending.wait(), None, "let read from the reserve");
    spending.read(BURST as usize / 4);
    // The reserve refills: the client that owes nothing reads first; the one that owes half
    // its standing once the reserve holds half.
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(asking.wait(), None);
    assert!(owing.wait().is_some());
    tokio::time::advance(Duration::from_secs(8)).await;
    assert_eq!(owing.wait(), None);
    assert!(flooding.wait().is_some(), "owing its burst and more");
}

#[tokio::test(start_paused = true)]
async fn an_address_forgiven_slowly_cannot_flood_from_the_reserve_again_and_again() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let spreading = pacing.meter("192.0.2.8".parse().unwrap(), false);
    flooding.read(2 * BURST as usize);
    // A clean address reads four times its standing besides requests, and is out of it for
    // twelve minutes.
    spreading.read(4 * IN_GOOD_STANDING as usize);
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(spreading.wait().is_some(), "forgiven 64 bytes a second");
    assert_eq!(
        pacing.meter("192.0.2.9".parse().unwrap(), false).wait(),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn an_ipv6_client_is_its_64_and_its_neighbours_are_other_64s() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("2001:db8:1:1::1".parse().unwrap(), false);
    flooding.read(2 * BURST as usize);
    let same_64 = pacing.meter("2001:db8:1:1::2".parse().unwrap(), false);
    assert!(same_64.wait().is_some(), "one client");
    let neighbour = pacing.meter("2001:db8:1:2::5".parse().unwrap(), false);
    assert_eq!(neighbour.wait(), None);
}

#[tokio::test(start_paused = true)]
async fn a_body_in_tiny_frames_is_paced_as_its_frames_cost() {
    let pacing = ReadPacing::new();
    let uploading = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let tiny = pacing.meter("198.51.100.1".parse().unwrap(), false);
    // 80 MB of a body in frames of 16 KiB cost nothing, with their chunks' framing.
    for _ in 0..5000 {
        uploading.read(16 * 1024 + 8);
        uploading.give_back_body(16 * 1024);
    }
    assert_eq!(uploading.wait(), None);
    // Chunks of one byte: `1\r\n \r\n` on the wire, 6 bytes each.
    let chunks = BURST as usize / LEAST_FRAME_COST + 64;
    for _ in 0..chunks {
        tiny.read(6);
        tiny.give_back_body(1);
    }
    assert!(tiny.wait().is_some());
}

#[tokio::test(start_paused = true)]
async fn requests_refused_cost_a_kilobyte_however_short() {
    let pacing = ReadPacing::new();
    let pipelining = pacing.meter("192.0.2.7".parse().unwrap(), false);
    // `GET / HTTP/1.1\n\n`, 16 bytes, answered `429` each time.
    for _ in 0..BURST as usize / LEAST_REQUEST_COST + 64 {
        pipelining.read(16);
        pipelining.give_back(16);
        pipelining.charge_refused(16);
    }
    assert!(pipelining.wait().is_some());
}

#[tokio::test(start_paused = true)]
async fn requests_refused_cost_their_networks_never_a_reserve() {
    let pacing = ReadPacing::new();
    pacing
        .meter("192.0.2.7".parse().unwrap(), false)
        .read(2 * BURST as usize);
    // Fresh addresses, each with thirty requests pipelined and refused: more than the /24's
    // reserve in all.
    for host in 10..100 {
        let fresh = pacing.meter(IpAddr::V4([192, 0, 2, host].into()), false);
        fresh.read(4096);
        fresh.give_back(4096);
        for _ in 0..30 {
            fresh.charge_refused(128);
        }
        assert!(fresh.wait().is_some(), "out of good standing");
    }
    let neighbour = pacing.meter("192.0.2.200".parse().unwrap(), false);
    assert_eq!(neighbour.wait(), None);
}

#[tokio::test(start_paused = true)]
async fn a_connection_gives_back_no_more_than_it_sent() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    let asking = pacing.meter("192.0.2.8".parse().unwrap(), false);
    flooding.read(BURST as usize + 64 * 1024);
    // HTTP/2 heads of 12 bytes on the wire that decode to more than 128.
    for _ in 0..1000 {
        asking.read(12);
        asking.give_back(128);
    }
    assert!(flooding.wait().is_some(), "the flood still owes");
}

#[test]
fn an_http2_head_gives_back_little_however_long_it_decodes() {
    let request = |version| {
        axum::http::Request::get("/healthz")
            .version(version)
            .header("x-padding", "p".repeat(4000))
            .body(())
            .unwrap()
    };
    assert!(head_credit(&request(axum::http::Version::HTTP_11)) > 4000);
    assert_eq!(head_credit(&request(axum::http::Version::HTTP_2)), 128);
}

#[tokio::test(start_paused = true)]
async fn refilled_buckets_are_dropped() {
    let pacing = ReadPacing::new();
    // 509 addresses in /24s of two /16s, and the bucket of all: 1,021 buckets; then an
    // address, its /24 and its /16: 1,024.
    for host in 1..=509 {
        let peer = IpAddr::V4((0x0a00_0000 + (host << 8)).into());
        pacing.meter(peer, false).read(1);
    }
    // A client that asked in the last minute is kept, however full its buckets.
    tokio::time::advance(Duration::from_secs(30)).await;
    let _ = pacing.meter("10.0.1.0".parse().unwrap(), false).wait();
    tokio::time::advance(Duration::from_secs(30)).await;
    pacing.meter("198.51.100.1".parse().unwrap(), false).read(1);
    assert_eq!(pacing.buckets.lock().unwrap().count(), 7);
}

#[tokio::test(start_paused = true)]
async fn an_address_is_forgiven_minutes_after_its_flood_however_much_it_sent() {
    let pacing = ReadPacing::new();
    let flooding = pacing.meter("192.0.2.7".parse().unwrap(), false);
    flooding.read(64 * BURST as usize);
    // It owes at most twice its standing, forgiven at 64 bytes a second; its /24 still owes
    // the flood, paced, and another address spends it again.
    tokio::time::advance(Duration::from_secs(520)).await;
    pacing
        .meter("192.0.2.8".parse().unwrap(), false)
        .read(2 * BURST as usize);
    assert_eq!(
        flooding.wait(),
        None,
        "in good standing: read from the reserve"
    );
}

#[tokio::test]
async fn every_byte_read_is_told() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pacing = ReadPacing::new();
    let told = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (mut client, server) = tokio::io::duplex(64);
    let counter = told.clone();
    let mut paced = Paced::new(
        server,
        pacing.meter("192.0.2.7".parse().unwrap(), false),
        move |bytes| {
            counter.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        },
    );
    client.write_all(b"GE").await.unwrap();
    let mut read = [0; 2];
    paced.read_exact(&mut read).await.unwrap();
    client.write_all(b"T /").await.unwrap();
    paced.read_exact(&mut [0; 3]).await.unwrap();
    drop(client);
    assert_eq!(paced.read(&mut [0; 8]).await.unwrap(), 0);
    assert_eq!(
        told.load(std::sync::atomic::Ordering::SeqCst),
        5,
        "the end is no bytes"
    );
}
