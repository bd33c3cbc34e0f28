//! A TCP proxy that passes the first request it carries to the server and then cuts the
//! client off before the answer arrives: to the client, a request that may or may not have
//! been done, as a network failure makes it. Every later connection passes through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Starts the proxy to `upstream` (`host:port`) on a free loopback port, for the life of the
/// test process, and returns its address.
pub async fn answer_dropping_proxy(upstream: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let dropped = Arc::new(AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let first = !dropped.swap(true, Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut client_read, client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let requests = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                if first {
                    // The server answered, so it has done the request: drop its answer and
                    // the client's connection.
                    let mut byte = [0u8; 1];
                    let _ = server_read.read(&mut byte).await;
                    requests.abort();
                    drop(client_write);
                } else {
                    let mut client_write = client_write;
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    requests.abort();
                }
            });
        }
    });
    address
}
