use super::bucket::{BURST, IN_GOOD_STANDING};
use super::*;

impl Meter {
    /// How long to wait before reading again, if a network owes more than its burst.
    fn wait(&self) -> Option<Duration> {
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

/// The meters of an address in each of the first `count` /24s of 10.1.0.0/16.
fn one_in_each_24_of_10_1(pacing: &Arc<ReadPacing>, count: u8) -> Vec<Meter> {
    (0..count)
        .map(|network| pacing.meter(IpAddr::V4([10, 1, network, 1].into()), false))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_24s_of_one_16_share_its_bucket_too() {
    let pacing = ReadPacing::new();
    let meters = one_in_each_24_of_10_1(&pacing, 8);
    for meter in &meters[..4] {
        meter.read(BURST as usize);
        assert_eq!(meter.wait(), None, "within the /24's and the /16's burst");
    }
    meters[4].read(1024);
    assert!(meters[..4].iter().all(|meter| meter.wait().is_some()));
    // A /24 in good standing reads from the /16's reserve until it is spent.
    assert_eq!(meters[5].wait(), None);
    meters[5].read(BURST as usize + 1);
    assert!(meters[5].wait().is_some());
    assert!(meters[6].wait().is_some());
    assert_eq!(
        pacing.meter("10.2.0.1".parse().unwrap(), false).wait(),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn a_neighbour_of_a_flood_spending_its_16_and_the_api_s_buckets_still_reads() {
    let pacing = ReadPacing::new();
    // Sixteen /24s of one /16 spend the /24s', the /16's and the API's buckets, out of good
    // standing after their first reads.
    let flooding = one_in_each_24_of_10_1(&pacing, 16);
    for meter in &flooding {
        meter.read(2 * IN_GOOD_STANDING as usize);
    }
    for meter in &flooding {
        meter.read(2 * BURST as usize);
    }
    let neighbour = pacing.meter("10.1.0.200".parse().unwrap(), false);
    assert_eq!(neighbour.wait(), None);
    assert!(flooding.iter().all(|meter| meter.wait().is_some()));
}

#[tokio::test(start_paused = true)]
async fn fresh_addresses_of_24s_that_carry_a_flood_read_after_a_clean_24_s_client() {
    let pacing = ReadPacing::new();
    let neighbour = pacing.meter("10.1.200.200".parse().unwrap(), false);
    // 250 never-seen addresses a second across 64 /24s of the neighbour's /16, each sending
    // 64 KiB besides requests as fast as it is let read, for ten seconds.
    let mut flooding = Vec::new();
    for tick in 0..2500u16 {
        let peer = IpAddr::V4([10, 1, (tick % 64) as u8, (1 + tick / 64) as u8].into());
        flooding.push((pacing.meter(peer, false), 16));
        for (meter, reads) in &mut flooding {
            if meter.wait().is_none() {
                meter.read(4096);
                *reads -= 1;
            }
        }
        flooding.retain(|(_, reads)| *reads > 0);
        if tick >= 250 {
            assert_eq!(neighbour.wait(), None, "after {} ms", 4 * tick);
        }
        neighbour.read(256);
        neighbour.give_back(256);
        tokio::time::advance(Duration::from_millis(4)).await;
    }
    assert!(flooding.len() > 1000, "the flood is paced");
}

#[tokio::test(start_paused = true)]
async fn fresh_48s_of_a_32_read_after_a_client_of_a_48_it_knows() {
    let pacing = ReadPacing::new();
    let client = pacing.meter("2001:db8:ffff:1::1".parse().unwrap(), false);
    let ask = || {
        client.read(256);
        client.give_back(256);
    };
    ask();
    // 32 /48s of the client's /32 spend its bucket, then send 15 KiB a second each.
    let flooding: Vec<Meter> = (0..32)
        .map(|site| pacing.meter(format!("2001:db8:{site:x}::1").parse().unwrap(), false))
        .collect();
    for meter in &flooding {
        meter.read(600 * 1024);
    }
    // 120 never-seen /64s a second, each in one of 4,096 other /48s taken in turn, each
    // sending 4,120 bytes besides requests as it is let read, for four seconds at most.
    let mut fresh: Vec<(Meter, usize, u32)> = Vec::new();
    for tick in 0..5000u32 {
        let peer = format!(
            "2001:db8:{:x}:{:x}::1",
            0x100 + tick % 4096,
            1 + tick / 4096
        );
        fresh.push((pacing.meter(peer.parse().unwrap(), false), 4120, tick));
        for meter in &flooding {
            if meter.wait().is_none() {
                meter.read(128);
            }
        }
        for (meter, left, _) in &mut fresh {
            if meter.wait().is_none() {
                let read = (*left).min(RESERVE_READ);
                meter.read(read);
                *left -= read;
            }
        }
        fresh.retain(|(_, left, born)| *left > 0 && tick - born < 480);
        // Four times a second.
        if tick % 30 == 0 {
            assert_eq!(client.wait(), None, "after {} ms", tick * 25 / 3);
            ask();
        }
        tokio::time::advance(Duration::from_micros(8333)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn networks_that_flood_together_are_paced_as_all_and_the_others_still_read() {
    let pacing = ReadPacing::new();
    let meters: Vec<Meter> = (0..24)
        .map(|network| pacing.meter(IpAddr::V4([10, network, 0, 1].into()), false))
        .collect();
    // Eight /16s spend the API's burst, with a /24's burst each, and one of them more.
    for meter in &meters[..8] {
        meter.read(BURST as usize);
        assert_eq!(
            meter.wait(),
            None,
            "within its /24's, its /16's and the API's burst"
        );
    }
    meters[0].read(4 * BURST as usize);
    assert!(meters[..8].iter().all(|meter| meter.wait().is_some()));
    // Networks in good standing read from the API's reserve, two /24s' burst, until it is
    // spent; then everyone waits.
    for (index, meter) in meters[8..=16].iter().enumerate() {
        assert_eq!(meter.wait(), None, "let read from the API's reserve");
        meter.read(if index < 8 { BURST as usize / 4 } else { 1 });
    }
    assert!(meters.iter().all(|meter| meter.wait().is_some()));
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(meters[17].wait(), None, "the API's reserve refills");
    assert!(meters[..16].iter().all(|meter| meter.wait().is_some()));
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
