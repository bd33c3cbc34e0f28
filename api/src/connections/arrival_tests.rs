//! Which of the connections of tied clients gives way when some of them are between requests,
//! or have begun to send one: a party churning silent connections closes its own.

use super::*;
use std::io::{Read, Write};

fn limits(max_connections: usize) -> Limits {
    Limits {
        max_connections,
        max_per_address: 0,
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
        trusted_proxies: TrustedProxies::parse("", "").unwrap(),
    }
}

/// An address of a /16 of its own.
fn sixteen(n: u8) -> IpAddr {
    IpAddr::V4(std::net::Ipv4Addr::new(20 + n, 0, 0, 1))
}

#[tokio::test(start_paused = true)]
async fn a_client_between_requests_keeps_its_connection_while_newcomers_churn() {
    let connections = Connections::new(limits(3));
    let asking = connections.admit(sixteen(0), None);
    drop(asking.activity.begin());
    tokio::time::advance(Duration::from_millis(200)).await;
    let newcomer = connections.admit(sixteen(1), None);
    tokio::time::advance(Duration::from_millis(10)).await;
    let newer = connections.admit(sixteen(2), None);
    // Four /16s of one connection each: the newest newcomer gives way, not the client that
    // asked 200 ms ago, nor an older newcomer.
    let _arriving = connections.admit(sixteen(3), None);
    assert!(newer.activity.evicted.is_cancelled());
    assert!(!asking.activity.evicted.is_cancelled() && !newcomer.activity.evicted.is_cancelled());
    // Once it has been quiet for the grace, it goes first.
    tokio::time::advance(EVICTION_GRACE).await;
    let _arriving = connections.admit(sixteen(4), None);
    assert!(asking.activity.evicted.is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_client_gives_its_connection_between_requests_before_its_fresh_one() {
    let connections = Connections::new(limits(3));
    let asked = connections.admit(sixteen(0), None);
    drop(asked.activity.begin());
    tokio::time::advance(Duration::from_millis(200)).await;
    let fresh = connections.admit(sixteen(0), None);
    tokio::time::advance(Duration::from_millis(10)).await;
    let _other = connections.admit(sixteen(1), None);
    let _arriving = connections.admit(sixteen(2), None);
    assert!(asked.activity.evicted.is_cancelled());
    assert!(!fresh.activity.evicted.is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_request_head_whose_bytes_keep_coming_outlives_one_byte_arrivals_old_and_new() {
    let connections = Connections::new(limits(3));
    let slow = connections.admit(sixteen(0), None);
    slow.activity.hear(1);
    for _ in 0..2 {
        tokio::time::advance(Duration::from_millis(600)).await;
        slow.activity.hear(1);
    }
    tokio::time::advance(Duration::from_millis(5)).await;
    let one_byte = connections.admit(sixteen(1), None);
    one_byte.activity.hear(1);
    let silent = connections.admit(sixteen(2), None);
    tokio::time::advance(Duration::from_millis(10)).await;
    // A silent newcomer goes first.
    let whole = connections.admit(sixteen(3), None);
    assert!(silent.activity.evicted.is_cancelled());
    whole.activity.hear(b"GET /healthz HTTP/1.1\r\n\r\n".len());
    tokio::time::advance(Duration::from_millis(10)).await;
    // Then the one heard the fewest bytes from: not the head whose bytes keep coming although
    // its last came before, nor the request that has just arrived whole.
    let longer = connections.admit(sixteen(5), None);
    assert!(one_byte.activity.evicted.is_cancelled());
    assert!(!slow.activity.evicted.is_cancelled() && !whole.activity.evicted.is_cancelled());
    longer.activity.hear(100);
    let _arriving = connections.admit(sixteen(6), None);
    assert!(slow.activity.evicted.is_cancelled());
    assert!(!whole.activity.evicted.is_cancelled());
    // A request that stops arriving is quiet once the grace has passed since its last byte,
    // and goes first.
    tokio::time::advance(EVICTION_GRACE).await;
    let _arriving = connections.admit(sixteen(7), None);
    assert!(whole.activity.evicted.is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_client_between_requests_outlives_connections_that_sent_a_byte() {
    let connections = Connections::new(limits(3));
    let asking = connections.admit(sixteen(0), None);
    drop(asking.activity.begin());
    tokio::time::advance(Duration::from_millis(200)).await;
    let bytes: Vec<Slot> = (1..=2)
        .map(|n| connections.admit(sixteen(n), None))
        .collect();
    bytes.iter().for_each(|slot| slot.activity.hear(1));
    tokio::time::advance(Duration::from_millis(10)).await;
    let _arriving = connections.admit(sixteen(3), None);
    assert!(!asking.activity.evicted.is_cancelled());
    assert_eq!(evicted(&bytes), 1);
}

/// A connection accepted on loopback, its server side's descriptor and its client side.
fn accepted(listener: &std::net::TcpListener) -> (std::os::fd::OwnedFd, std::net::TcpStream) {
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (server.into(), client)
}

#[tokio::test(start_paused = true)]
async fn a_newcomer_whose_request_waits_unread_outlives_silent_newcomers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let connections = Connections::new(limits(2));
    let (silent_socket, _silent_client) = accepted(&listener);
    let silent = connections.admit(sixteen(0), Some(silent_socket));
    tokio::time::advance(Duration::from_millis(10)).await;
    let (socket, mut client) = accepted(&listener);
    let server = std::net::TcpStream::from(socket.try_clone().unwrap());
    client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    server.peek(&mut [0]).unwrap();
    let asking = connections.admit(sixteen(1), Some(socket));
    tokio::time::advance(Duration::from_millis(10)).await;
    let _arriving = connections.admit(sixteen(2), None);
    assert!(silent.activity.evicted.is_cancelled());
    assert!(!asking.activity.evicted.is_cancelled());
    // Looking took nothing from the socket.
    let mut head = [0; 16];
    (&server).read_exact(&mut head).unwrap();
    assert_eq!(&head, b"GET / HTTP/1.1\r\n");
}

#[tokio::test]
async fn a_second_descriptor_is_held_only_by_a_client_s_connection_until_its_first_request() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let connections = Connections::new(Limits {
        trusted_proxies: TrustedProxies::parse("10.0.0.0/8", "x-forwarded-for").unwrap(),
        ..limits(4)
    });
    let holds = |slot: &Slot| connections.open.lock().unwrap().holds_socket(slot.id);
    let (socket, _client) = accepted(&listener);
    let client = connections.admit(sixteen(0), Some(socket));
    let (socket, _proxied) = accepted(&listener);
    let proxy = connections.admit("10.1.2.3".parse().unwrap(), Some(socket));
    assert!(holds(&client));
    assert!(!holds(&proxy));
    drop(client.activity.begin());
    assert!(!holds(&client));
}

#[tokio::test(start_paused = true)]
async fn an_answer_nobody_takes_goes_before_a_client_between_requests() {
    let connections = Connections::new(limits(3));
    let asking = connections.admit(sixteen(0), None);
    let stalled: Vec<Slot> = (1..=2)
        .map(|n| connections.admit(sixteen(n), None))
        .collect();
    let mut answers: Vec<InFlight> = stalled.iter().map(|s| s.activity.begin()).collect();
    answers.iter_mut().for_each(InFlight::answering);
    tokio::time::advance(EVICTION_GRACE).await;
    drop(asking.activity.begin());
    tokio::time::advance(Duration::from_millis(200)).await;
    let _arriving = connections.admit(sixteen(3), None);
    assert!(!asking.activity.evicted.is_cancelled());
    assert_eq!(evicted(&stalled), 1);
}

fn evicted(slots: &[Slot]) -> usize {
    slots
        .iter()
        .filter(|s| s.activity.evicted.is_cancelled())
        .count()
}
