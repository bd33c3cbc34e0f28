//! `POST /compile` as `multipart/form-data`, as a client builds it.

use crate::TestApp;
use reqwest::multipart::{Form, Part};
use serde_json::Value;

/// A `metadata` part holding `metadata`, then one part per file, named by its path.
pub fn multipart_form(metadata: &Value, files: &[(&str, &[u8])]) -> Form {
    let mut form = Form::new().part(
        "metadata",
        Part::text(metadata.to_string())
            .mime_str("application/json")
            .unwrap(),
    );
    for (path, content) in files {
        form = form.part(
            "file",
            Part::bytes(content.to_vec()).file_name(path.to_string()),
        );
    }
    form
}

impl TestApp {
    /// `POST /compile` of `form` with this app's token, and an `Idempotency-Key` if given.
    pub async fn post_multipart(&self, form: Form, key: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!("{}/compile", self.url))
            .bearer_auth(&self.token)
            .multipart(form);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send().await.unwrap()
    }
}
