//! Project files as a client uploads them: hashed, `PUT` under the hash.

use crate::TestApp;
use sha2::{Digest, Sha256};

/// Lowercase hex of the SHA-256 of `bytes`, as the routes name a file.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// A main document that reads `big.tex`.
pub const INPUT_BIG: &str =
    "\\documentclass{article}\\begin{document}\\input{big}\\end{document}\n";

/// A `.tex` file of about `bytes` bytes: comment lines, then `text`.
pub fn large_tex(bytes: usize, text: &str) -> Vec<u8> {
    let line = format!("%{}\n", "x".repeat(98));
    let mut tex = line.repeat(bytes / line.len()).into_bytes();
    tex.extend_from_slice(text.as_bytes());
    tex
}

impl TestApp {
    /// `PUT /projects/{project}/files/{hash}` of `body` with `token`.
    pub async fn put_file_as(
        &self,
        token: &str,
        project: &str,
        hash: &str,
        body: Vec<u8>,
    ) -> reqwest::Response {
        self.http
            .put(format!("{}/projects/{project}/files/{hash}", self.url))
            .bearer_auth(token)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// Uploads `body` to this app's project under its own hash, which it returns.
    pub async fn upload_file(&self, body: &[u8]) -> String {
        let hash = sha256_hex(body);
        let project = self.project_id.to_string();
        let response = self
            .put_file_as(&self.token, &project, &hash, body.to_vec())
            .await;
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
        hash
    }
}
