//! Clients of the API from chosen loopback addresses (127.0.0.0/8 is all this host's), so
//! that a test can be several clients, or one network of many.

use crate::TestApp;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::net::{TcpSocket, TcpStream};

/// The API's address.
pub fn address_of(app: &TestApp) -> SocketAddr {
    app.url.trim_start_matches("http://").parse().unwrap()
}

/// A connection to the API from the loopback address `from`.
pub async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// A client whose requests come from the loopback address `from`.
pub fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// `GET /healthz` from the loopback address `from`, answered `200` within `limit`.
pub async fn served_within(app: &TestApp, from: &str, limit: Duration) {
    let started = Instant::now();
    let response = client_from(from)
        .get(format!("{}/healthz", app.url))
        .send()
        .await
        .expect("another client is answered");
    assert_eq!(response.status(), 200);
    assert!(
        started.elapsed() < limit,
        "another client waited {:?}",
        started.elapsed()
    );
}
