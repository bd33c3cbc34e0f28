//! The one HTTP client of the API that every client command uses (`compile`, `soak`,
//! `bench`): where the API is, the token, and the requests they make.

use anyhow::{bail, Context as _};
use serde_json::Value;
use uuid::Uuid;

/// Where a client command finds the API: flags, or the variables `./dev/up` writes to .dev/env.
#[derive(clap::Args, Clone)]
pub struct ServerArgs {
    #[arg(long, env = "TEXFLEET_URL")]
    url: String,
    #[arg(long, env = "TEXFLEET_TOKEN", hide_env_values = true)]
    token: String,
    #[arg(long, env = "TEXFLEET_PROJECT")]
    pub project: Uuid,
}

impl ServerArgs {
    pub fn new(url: String, token: String, project: Uuid) -> ServerArgs {
        ServerArgs {
            url,
            token,
            project,
        }
    }
}

#[derive(Clone)]
pub struct Client {
    server: ServerArgs,
    http: reqwest::Client,
}

impl Client {
    pub fn new(server: &ServerArgs) -> Client {
        Client {
            server: server.clone(),
            http: reqwest::Client::new(),
        }
    }

    pub fn project(&self) -> Uuid {
        self.server.project
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url.trim_end_matches('/'))
    }

    /// `POST /compile`; with `wait`, the server holds the answer up to that many seconds for
    /// the job to end (`Prefer: wait`).
    pub async fn submit(&self, body: &Value, wait: Option<u64>) -> anyhow::Result<Value> {
        let mut request = self
            .http
            .post(self.url("/compile"))
            .bearer_auth(&self.server.token)
            .json(body);
        if let Some(seconds) = wait {
            request = request.header("Prefer", format!("wait={seconds}"));
        }
        answer(request.send().await?).await
    }

    /// The job, once it changed or `wait` seconds passed.
    pub async fn job(&self, id: &str, wait: u64) -> anyhow::Result<Value> {
        let response = self
            .http
            .get(self.url(&format!("/compile/{id}")))
            .bearer_auth(&self.server.token)
            .header("Prefer", format!("wait={wait}"))
            .send()
            .await?;
        answer(response).await
    }

    /// The job once it is terminal, waiting on the server rather than polling.
    pub async fn wait_terminal(&self, id: &str) -> anyhow::Result<Value> {
        loop {
            let job = self.job(id, 60).await?;
            if job["status"] != "Queued" && job["status"] != "Running" {
                return Ok(job);
            }
        }
    }

    /// The PDF of a Succeeded job.
    pub async fn pdf(&self, id: &str) -> anyhow::Result<Vec<u8>> {
        let response = self
            .http
            .get(self.url(&format!("/compile/{id}/pdf")))
            .bearer_auth(&self.server.token)
            .send()
            .await?
            .error_for_status()?;
        Ok(response.bytes().await?.to_vec())
    }
}

/// The JSON of a successful answer; for an error, its problem's detail and fields.
async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let detail = body["detail"].as_str().unwrap_or("");
        let fields: Vec<String> = body["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                format!(
                    "\n  {}: {}",
                    e["field"].as_str().unwrap_or(""),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect();
        bail!("the server answered {status}: {detail}{}", fields.concat());
    }
    Ok(body)
}

/// A job's id, as the API gave it.
pub fn job_id(job: &Value) -> anyhow::Result<String> {
    Ok(job["id"]
        .as_str()
        .context("no job id in the answer")?
        .to_string())
}
