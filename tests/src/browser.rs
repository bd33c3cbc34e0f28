//! A real browser for the tests of `/play`: Debian's headless Chromium, driven through
//! chromedriver (WebDriver) by fantoccini. Screenshots are kept in
//! `target/screenshots/` as the tests' artefacts.

use crate::{eventually, free_port};
use fantoccini::{Client, ClientBuilder};
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The chromedriver Debian's `chromium-driver` installs (`./dev/up` installs it).
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless Chromium session; its chromedriver is killed when it is dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a session with a window of 1400x1000.
    pub async fn start() -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; ./dev/up installs it)");
        let url = format!("http://127.0.0.1:{port}");
        let status = format!("{url}/status");
        eventually(Duration::from_secs(30), "chromedriver answers", || async {
            reqwest::get(&status)
                .await
                .is_ok_and(|answer| answer.status().is_success())
        })
        .await;
        let mut capabilities = serde_json::Map::new();
        // As root (CI's containers), Chromium's own sandbox cannot start: the test runs
        // pages of its own only.
        let arguments = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,1000",
        ];
        capabilities.insert("goog:chromeOptions".into(), json!({ "args": arguments }));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&url)
            .await
            .expect("a Chromium session");
        Browser { client, driver }
    }

    /// Saves what the window shows as `target/screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{name}.png")), png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
