//! A webhook receiver as a user would run one: a real HTTP server on loopback
//! (tests/clients/webhook_receiver.py) that verifies every delivery with the Python
//! `standardwebhooks` package and records what it got.

use crate::eventually_some;
use serde_json::Value;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A receiver process and what it recorded.
pub struct WebhookReceiver {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl WebhookReceiver {
    pub fn start(behaviour: &str) -> WebhookReceiver {
        let python = std::env::var("RECEIVER_PYTHON").expect(
            "RECEIVER_PYTHON: a python with the standardwebhooks package (./dev/test makes one)",
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "whsec_AAAA").unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/webhook_receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(dir.path().join("record"))
            .arg(dir.path().join("secret"))
            .arg(behaviour)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        WebhookReceiver { child, port, dir }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    pub fn set_secret(&self, secret: &str) {
        std::fs::write(self.dir.path().join("secret"), secret).unwrap();
    }

    /// Every request the receiver got, in order; a line it is still writing is not one yet.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("record"))
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter_map(|line| line.strip_suffix('\n'))
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    pub async fn wait_for(&self, count: usize) -> Vec<Value> {
        eventually_some(
            Duration::from_secs(90),
            "the receiver's requests",
            || async {
                let requests = self.requests();
                (requests.len() >= count).then_some(requests)
            },
        )
        .await
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
