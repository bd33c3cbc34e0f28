//! Networks and their neighbours: floods from many addresses, /24s and /16s, and the fresh
//! addresses that come with them.

use super::bucket::{BURST, IN_GOOD_STANDING};
use super::*;

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

/// A moment of a flood at `tick`: each flooding meter reads 128 bytes and each fresh one (with
/// the bytes it has left and the tick it came) up to a reserve's read, as far as each is let;
/// fresh ones that are done or `lifetime` ticks old go.
fn flood_for_a_moment(
    flooding: &[Meter],
    fresh: &mut Vec<(Meter, usize, u32)>,
    tick: u32,
    lifetime: u32,
) {
    for meter in flooding {
        if meter.wait().is_none() {
            meter.read(128);
        }
    }
    for (meter, left, _) in fresh.iter_mut() {
        if meter.wait().is_none() {
            let read = (*left).min(RESERVE_READ);
            meter.read(read);
            *left -= read;
        }
    }
    fresh.retain(|(_, left, born)| *left > 0 && tick - born < lifetime);
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
        flood_for_a_moment(&flooding, &mut fresh, tick, 480);
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
async fn fresh_addresses_of_flooded_16s_read_after_a_known_client_of_a_16_that_holds_a_flood() {
    let pacing = ReadPacing::new();
    let client = pacing.meter("10.100.200.200".parse().unwrap(), false);
    let ask = || {
        client.read(256);
        client.give_back(256);
    };
    ask();
    // One flooding address in the client's /16 and in each of 48 others, eight of which spend
    // the API's bucket: every one of those /16s owes more than it may clean.
    let flooding: Vec<Meter> = (0..48)
        .chain([100])
        .map(|network| pacing.meter(IpAddr::V4([10, network, 0, 1].into()), false))
        .collect();
    for (index, meter) in flooding.iter().enumerate() {
        meter.read(if index < 8 {
            BURST as usize
        } else {
            600 * 1024
        });
    }
    // 600 never-seen addresses a second in clean /24s of the 48 flooded /16s, each sending
    // 4,120 bytes besides requests as it is let read, for a second at most.
    let mut fresh: Vec<(Meter, usize, u32)> = Vec::new();
    for tick in 0..6000u32 {
        let peer = [
            10,
            (tick % 48) as u8,
            (1 + tick / 48 % 254) as u8,
            (1 + tick / (48 * 254)) as u8,
        ];
        fresh.push((pacing.meter(IpAddr::V4(peer.into()), false), 4120, tick));
        flood_for_a_moment(&flooding, &mut fresh, tick, 600);
        // Four times a second.
        if tick % 150 == 0 {
            assert_eq!(client.wait(), None, "after {} ms", tick * 5 / 3);
            ask();
        }
        tokio::time::advance(Duration::from_micros(1667)).await;
    }
    assert!(fresh.len() > 100, "the fresh addresses are paced");
}
