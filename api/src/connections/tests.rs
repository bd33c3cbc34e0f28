use super::*;

fn limits(max_connections: usize, max_per_address: usize) -> Limits {
    Limits {
        max_connections,
        max_per_address,
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
        trusted_proxies: TrustedProxies::parse("10.0.0.0/8", "x-forwarded-for").unwrap(),
    }
}

const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

#[test]
fn one_address_holds_at_most_its_cap_unless_it_is_a_trusted_proxy() {
    let connections = Connections::new(limits(100, 2));
    let held: Vec<Slot> = (0..2).map(|_| connections.admit(A, None)).collect();
    assert!(connections.refuses(A));
    assert!(!connections.refuses(B));
    drop(held);
    assert!(!connections.refuses(A));
    let proxy: IpAddr = "10.1.2.3".parse().unwrap();
    let _through_proxy: Vec<Slot> = (0..5).map(|_| connections.admit(proxy, None)).collect();
    assert!(!connections.refuses(proxy));
}

/// An address of a /16 none of the others is in.
fn elsewhere(host: u8) -> IpAddr {
    IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, host))
}

fn evicted(slots: &[Slot]) -> usize {
    slots
        .iter()
        .filter(|slot| slot.activity.evicted.is_cancelled())
        .count()
}

#[tokio::test(start_paused = true)]
async fn a_full_api_closes_a_connection_of_the_address_holding_the_most_however_busy() {
    let connections = Connections::new(limits(5, 0));
    let lone = connections.admit(B, None);
    tokio::time::advance(Duration::from_secs(5)).await;
    let busy: Vec<Slot> = (0..3).map(|_| connections.admit(A, None)).collect();
    let _requests: Vec<InFlight> = busy.iter().map(|slot| slot.activity.begin()).collect();
    let idle = connections.admit(A, None);
    tokio::time::advance(Duration::from_secs(1)).await;
    // Within the address, an idle connection goes before one serving a request.
    let _arriving = connections.admit(elsewhere(1), None);
    assert!(idle.activity.evicted.is_cancelled());
    assert_eq!(connections.deadline(&idle.activity).await, Closed::Evicted);
    assert_eq!(evicted(&busy), 0);
    let _arriving = connections.admit(elsewhere(2), None);
    assert_eq!(evicted(&busy), 1);
    assert!(
        !lone.activity.evicted.is_cancelled(),
        "the lone idle one stays"
    );
}

#[tokio::test(start_paused = true)]
async fn when_every_address_holds_one_the_network_holding_the_most_gives_way() {
    let connections = Connections::new(limits(4, 0));
    let lone = connections.admit("2001:db8:9999::1".parse().unwrap(), None);
    tokio::time::advance(Duration::from_secs(5)).await;
    // Three /64s of one /48, each in a /56 of its own, each connection serving a request.
    let subscriber: Vec<Slot> = [
        "2001:db8:1:100::1",
        "2001:db8:1:200::1",
        "2001:db8:1:300::1",
    ]
    .iter()
    .map(|address| connections.admit(address.parse().unwrap(), None))
    .collect();
    let _requests: Vec<InFlight> = subscriber
        .iter()
        .map(|slot| slot.activity.begin())
        .collect();
    let _arriving = connections.admit("2001:db8:7777::1".parse().unwrap(), None);
    assert!(!lone.activity.evicted.is_cancelled(), "the lone one stays");
    assert_eq!(evicted(&subscriber), 1);
}

#[tokio::test(start_paused = true)]
async fn a_client_whose_request_is_on_its_way_outlives_newcomers_churned_after_it() {
    let connections = Connections::new(limits(4, 0));
    // A client alone in its /24 of a /16, whose request has not arrived yet; then newcomers
    // of a party that churns them, each alone in another /24 of that /16.
    let client = connections.admit(IpAddr::V4(std::net::Ipv4Addr::new(127, 99, 200, 1)), None);
    tokio::time::advance(Duration::from_millis(20)).await;
    let mut churning = Vec::new();
    for net in 0..3 {
        churning
            .push(connections.admit(IpAddr::V4(std::net::Ipv4Addr::new(127, 99, net, 1)), None));
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    let _arriving = connections.admit(elsewhere(1), None);
    assert!(!client.activity.evicted.is_cancelled(), "the client stays");
    assert_eq!(evicted(&churning), 1);
    assert!(
        churning[2].activity.evicted.is_cancelled(),
        "the newest goes"
    );
}

#[tokio::test(start_paused = true)]
async fn a_client_s_idle_connection_goes_first_and_one_serving_a_request_last() {
    let connections = Connections::new(limits(3, 0));
    let serving = connections.admit(A, None);
    let _request = serving.activity.begin();
    let idle = connections.admit(A, None);
    tokio::time::advance(Duration::from_secs(5)).await;
    let newcomer = connections.admit(A, None);
    let _arriving = connections.admit(elsewhere(1), None);
    assert!(idle.activity.evicted.is_cancelled());
    let _arriving = connections.admit(elsewhere(2), None);
    assert!(newcomer.activity.evicted.is_cancelled());
    assert!(!serving.activity.evicted.is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn many_48s_of_one_32_give_way_before_a_lone_client() {
    let connections = Connections::new(limits(4, 0));
    let lone = connections.admit("2001:db8:ffff::1".parse().unwrap(), None);
    tokio::time::advance(Duration::from_secs(5)).await;
    let sites: Vec<Slot> = (1..=4)
        .map(|site| connections.admit(format!("2001:db9:{site}::1").parse().unwrap(), None))
        .collect();
    assert!(
        !lone.activity.evicted.is_cancelled(),
        "the idle lone one stays"
    );
    assert_eq!(evicted(&sites), 1);
}

#[tokio::test(start_paused = true)]
async fn a_trusted_proxy_s_connections_go_only_when_nothing_else_is_open() {
    let connections = Connections::new(limits(3, 0));
    let proxy: IpAddr = "10.1.2.3".parse().unwrap();
    let through_proxy: Vec<Slot> = (0..2).map(|_| connections.admit(proxy, None)).collect();
    tokio::time::advance(Duration::from_secs(5)).await;
    let direct = connections.admit(A, None);
    let _arriving = connections.admit(B, None);
    assert!(direct.activity.evicted.is_cancelled());
    assert_eq!(evicted(&through_proxy), 0);

    let connections = Connections::new(limits(2, 0));
    let through_proxy: Vec<Slot> = (0..3).map(|_| connections.admit(proxy, None)).collect();
    assert_eq!(evicted(&through_proxy), 1, "only proxies were open");
}

#[tokio::test(start_paused = true)]
async fn a_connection_never_makes_room_by_closing_itself() {
    let connections = Connections::new(limits(2, 0));
    let _idle = connections.admit("203.0.113.7".parse().unwrap(), None);
    let _other = connections.admit(elsewhere(1), None);
    tokio::time::advance(Duration::from_secs(5)).await;
    let arriving = connections.admit("203.0.200.9".parse().unwrap(), None);
    assert!(!arriving.activity.evicted.is_cancelled());
    assert_eq!(connections.open.lock().unwrap().by_id.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_client_of_newcomers_only_gives_way_when_it_holds_the_most() {
    let connections = Connections::new(limits(3, 0));
    let idle = connections.admit(B, None);
    tokio::time::advance(Duration::from_secs(5)).await;
    let newcomers: Vec<Slot> = (0..2)
        .map(|_| connections.admit(elsewhere(1), None))
        .collect();
    let _arriving = connections.admit("203.0.113.1".parse().unwrap(), None);
    assert!(!idle.activity.evicted.is_cancelled());
    assert_eq!(evicted(&newcomers), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lone_connection_that_outlived_the_grace_stays_while_another_network_churns() {
    let connections = Connections::new(limits(3, 0));
    // Accepted, then slow to send its request: no newcomer any more, and the only one.
    let slow = connections.admit(B, None);
    tokio::time::advance(EVICTION_GRACE * 2).await;
    let churning: Vec<Slot> = (1..=3)
        .map(|host| connections.admit(elsewhere(host), None))
        .collect();
    assert!(!slow.activity.evicted.is_cancelled());
    assert_eq!(evicted(&churning), 1);
}

#[tokio::test(start_paused = true)]
async fn when_only_newcomers_are_open_the_network_holding_the_most_gives_one_at_once() {
    let connections = Connections::new(limits(3, 0));
    let lone = connections.admit(B, None);
    let churning: Vec<Slot> = (1..=3)
        .map(|host| connections.admit(elsewhere(host), None))
        .collect();
    assert!(!lone.activity.evicted.is_cancelled());
    assert_eq!(evicted(&churning), 1);
    assert_eq!(connections.open.lock().unwrap().by_id.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn an_answer_nobody_takes_closes_its_connection_whatever_the_others_do() {
    let connections = Connections::new(limits(10, 0));
    let slot = Arc::new(connections.admit(A, None));
    let mut stalled = slot.activity.begin();
    stalled.answering();
    let mut moving = slot.activity.begin();
    moving.answering();
    let started = Instant::now();
    let watched = slot.clone();
    let watcher = tokio::spawn(async move { watched.deadline().await });
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_secs(10)).await;
        moving.progress();
    }
    assert_eq!(watcher.await.unwrap(), Closed::Stalled);
    assert!(started.elapsed() >= Duration::from_secs(30));
    drop((stalled, moving));
}

#[tokio::test(start_paused = true)]
async fn the_idle_deadline_runs_from_the_end_of_the_last_request() {
    let connections = Connections::new(Limits {
        idle_timeout: Duration::from_secs(2),
        ..limits(10, 0)
    });
    let slot = connections.admit(A, None);
    let activity = slot.activity.clone();
    let watched = connections.clone();
    let watcher = tokio::spawn(async move { watched.deadline(&slot.activity).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let request = activity.begin();
    tokio::time::sleep(Duration::from_secs(100)).await;
    drop(request);
    let ended = Instant::now();
    assert_eq!(watcher.await.unwrap(), Closed::IdleTimeout);
    assert_eq!(ended.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn an_answer_the_client_stops_taking_is_closed_after_the_idle_timeout() {
    let connections = Connections::new(limits(10, 0));
    let slot = connections.admit(A, None);
    let mut request = slot.activity.begin();
    request.answering();
    tokio::time::sleep(Duration::from_secs(20)).await;
    request.progress();
    let taken = Instant::now();
    assert_eq!(connections.deadline(&slot.activity).await, Closed::Stalled);
    assert_eq!(taken.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn a_silent_connection_meets_the_header_deadline_and_an_idle_one_the_idle_deadline() {
    let connections = Connections::new(limits(10, 0));
    let silent = connections.admit(A, None);
    let started = Instant::now();
    assert_eq!(
        connections.deadline(&silent.activity).await,
        Closed::HeaderTimeout
    );
    assert_eq!(started.elapsed(), Duration::from_secs(10));

    let kept_alive = connections.admit(A, None);
    let request = kept_alive.activity.begin();
    tokio::time::advance(Duration::from_secs(100)).await;
    drop(request);
    let answered = Instant::now();
    assert_eq!(
        connections.deadline(&kept_alive.activity).await,
        Closed::IdleTimeout
    );
    assert_eq!(answered.elapsed(), Duration::from_secs(30));
}

#[test]
fn every_network_and_address_is_in_the_standings_until_its_last_connection_goes() {
    let connections = Connections::new(limits(1000, 0));
    let peers: Vec<IpAddr> = [
        "192.0.2.1",
        "192.0.2.2",
        "192.0.3.1",
        "2001:db8:1:1::1",
        "2001:db8:2::1",
    ]
    .map(|peer| peer.parse().unwrap())
    .into();
    let mut slots: Vec<Slot> = peers
        .iter()
        .map(|peer| connections.admit(*peer, None))
        .collect();
    slots.push(connections.admit(peers[0], None));
    let nodes = |connections: &Connections| connections.open.lock().unwrap().standings.nodes();
    // IPv4: one /16 (its own /16 below it), two /24s, three addresses; IPv6: one /32, two
    // /48s, two /56s, two /64s.
    assert_eq!(nodes(&connections), [1 + 1, 1 + 2, 2 + 2, 3 + 2]);
    // 192.0.2.1's second connection: nothing goes.
    drop(slots.pop());
    assert_eq!(nodes(&connections), [1 + 1, 1 + 2, 2 + 2, 3 + 2]);
    drop(slots.remove(2));
    assert_eq!(nodes(&connections), [1 + 1, 1 + 2, 1 + 2, 2 + 2]);
    drop(slots);
    assert_eq!(nodes(&connections), [0, 0, 0, 0]);
}

/// 1,001 connections, each from an address of its own /24, spread evenly over 13 /16s.
fn a_tie_of_thirteen_16s(connections: &Arc<Connections>) -> Vec<Slot> {
    (0..1001u32)
        .map(|n| {
            let address = std::net::Ipv4Addr::new(127, (n % 13 + 37) as u8, (n / 13) as u8, 1);
            connections.admit(IpAddr::V4(address), None)
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn choosing_among_a_thousand_tied_clients_compares_none_of_their_connections() {
    let connections = Connections::new(limits(1001, 0));
    let early = a_tie_of_thirteen_16s(&connections);
    tokio::time::advance(EVICTION_GRACE).await;
    let _ = early[500].activity.begin();
    let mut late = Vec::new();
    for n in 0..3u8 {
        late.push(connections.admit(elsewhere(n), None));
        tokio::time::advance(Duration::from_millis(10)).await;
    }
    // The request that ended is the most recent progress of all: the silent ones, the oldest
    // first, go before it.
    let evicted: Vec<usize> = (0..early.len())
        .filter(|&n| early[n].activity.evicted.is_cancelled())
        .collect();
    assert_eq!(evicted, [0, 1, 2]);
    assert_eq!(eviction::COMPARED.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn of_tied_clients_that_all_serve_requests_a_bounded_few_are_compared() {
    let connections = Connections::new(limits(1001, 0));
    let tied = a_tie_of_thirteen_16s(&connections);
    let _requests: Vec<InFlight> = tied.iter().map(|slot| slot.activity.begin()).collect();
    let _arriving = connections.admit(elsewhere(1), None);
    assert_eq!(evicted(&tied), 1);
    assert!(
        eviction::COMPARED.get() <= eviction::SERVING_COMPARED,
        "{}",
        eviction::COMPARED.get()
    );
}
