//! A TCP proxy that holds every chunk a client sends for a while before passing it on: put in
//! front of the object store, it stretches each upload, so that a test can act while one is
//! under way instead of hoping to hit a window of milliseconds.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts the proxy to `upstream` (`host:port`) on a free loopback port, for the life of the
/// test process, and returns its address.
async fn slow_proxy(upstream: String, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let answers = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                });
                let mut chunk = vec![0; 64 * 1024];
                while let Ok(read) = client_read.read(&mut chunk).await {
                    if read == 0 {
                        break;
                    }
                    tokio::time::sleep(delay).await;
                    if server_write.write_all(&chunk[..read]).await.is_err() {
                        break;
                    }
                }
                let _ = server_write.shutdown().await;
                let _ = answers.await;
            });
        }
    });
    address
}

/// The dev stack's object store behind a [`slow_proxy`] holding each chunk `delay`: an
/// `s3_endpoint` for a test's app.
pub async fn slow_store(delay: Duration) -> String {
    let garage = texfleet_core::Config::load(None).unwrap().s3_endpoint;
    let upstream = garage.trim_start_matches("http://").to_string();
    format!("http://{}", slow_proxy(upstream, delay).await)
}
