//! The one HTTP client of the API that every client command uses (`compile`, `status`, `log`,
//! `cancel`, `list`, `soak`, `bench`): where the API is, the token, the requests they make, and
//! what a script expects of a client: an answer of `429` or `503` is retried after its
//! `Retry-After`, a request that never reached an answer is retried with back-off (a
//! submission only with its `Idempotency-Key`, so that a retry is the same job), and an error
//! answer becomes an [`ApiError`] that names the problem the server explained.

use crate::api_error::ApiError;
use crate::exit::{Exit, Failure};
use anyhow::Context as _;
use backon::{ExponentialBuilder, Retryable};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// Where a client command finds the API: flags, or the variables `./dev/up` writes to .dev/env.
#[derive(clap::Args, Clone)]
pub struct ServerArgs {
    /// The API's base URL, such as https://texfleet.example.org (a trailing slash is fine).
    #[arg(long, env = "TEXFLEET_URL", value_name = "URL")]
    url: String,
    /// The project's API token (from the operator).
    #[arg(
        long,
        env = "TEXFLEET_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: String,
    /// The project's id (a UUID).
    #[arg(long, env = "TEXFLEET_PROJECT", value_name = "UUID")]
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

/// How many times a request is sent in all before its failure is final (a server that does
/// not answer is given 1 + 2 + 4 + 8 seconds).
const ATTEMPTS: u32 = 5;
/// The longest `Retry-After` honoured; a longer one ends the command (exit 4).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct Client {
    server: ServerArgs,
    http: reqwest::Client,
}

/// What a `Prefer: wait` on a job waits for.
/// How long the client pauses when the server answered at once instead of waiting.
const UNWAITED_PAUSE: Duration = Duration::from_secs(1);

#[derive(Clone, Copy)]
pub enum Until {
    Started,
    Terminal,
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

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url.trim_end_matches('/'))
    }

    /// `POST /compile` with a JSON body; with `wait`, the server holds the answer up to that
    /// many seconds for the job to end (`Prefer: wait`).
    pub async fn submit(&self, body: &Value, wait: Option<u64>) -> anyhow::Result<Value> {
        let response = self
            .send(false, || {
                let request = self.post_compile().json(body);
                match wait {
                    Some(seconds) => request.header("Prefer", format!("wait={seconds}")),
                    None => request,
                }
            })
            .await?;
        Ok(response.json().await?)
    }

    /// `POST /compile` as `multipart/form-data`: the `metadata` JSON and one part per file,
    /// named by its path. The `Idempotency-Key` makes every retry of it the same job.
    pub async fn submit_files(
        &self,
        metadata: &Value,
        files: &[(String, Vec<u8>)],
        idempotency_key: &str,
    ) -> anyhow::Result<Value> {
        let response = self
            .send(true, || {
                let mut form = reqwest::multipart::Form::new().part(
                    "metadata",
                    reqwest::multipart::Part::text(metadata.to_string())
                        .mime_str("application/json")
                        .expect("a valid media type"),
                );
                for (path, content) in files {
                    form = form.part(
                        "file",
                        reqwest::multipart::Part::bytes(content.clone()).file_name(path.clone()),
                    );
                }
                self.post_compile()
                    .header("Idempotency-Key", idempotency_key)
                    .multipart(form)
            })
            .await?;
        Ok(response.json().await?)
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub(crate) fn token(&self) -> &str {
        &self.server.token
    }

    pub(crate) fn post_compile(&self) -> RequestBuilder {
        self.http
            .post(self.url("/compile"))
            .bearer_auth(&self.server.token)
    }

    /// The job, once it is past `until` or `wait` seconds passed.
    pub async fn job(&self, id: &str, wait: u64, until: Until) -> anyhow::Result<Value> {
        let until = match until {
            Until::Started => "started",
            Until::Terminal => "terminal",
        };
        let response = self
            .send(true, || {
                self.get(&format!("/compile/{id}?until={until}"))
                    .header("Prefer", format!("wait={wait}"))
            })
            .await?;
        // The server did not wait (too many waits at once): ask again a moment later, not at
        // once.
        if !response.headers().contains_key("preference-applied") {
            tokio::time::sleep(UNWAITED_PAUSE).await;
        }
        Ok(response.json().await?)
    }

    /// The job once it is terminal, waiting on the server rather than polling.
    pub async fn wait_terminal(&self, id: &str) -> anyhow::Result<Value> {
        loop {
            let job = self.job(id, 60, Until::Terminal).await?;
            if is_terminal(&job) {
                return Ok(job);
            }
        }
    }

    /// An output of a job that has it: `pdf`, `log` or `thumbnail`.
    pub async fn output(&self, id: &str, output: &str) -> anyhow::Result<Vec<u8>> {
        let response = self
            .send(true, || self.get(&format!("/compile/{id}/{output}")))
            .await?;
        Ok(response.bytes().await?.to_vec())
    }

    /// Cancels a queued or running job (`DELETE`, safe to repeat).
    pub async fn cancel(&self, id: &str) -> anyhow::Result<Value> {
        let response = self
            .send(true, || {
                self.http
                    .delete(self.url(&format!("/compile/{id}")))
                    .bearer_auth(&self.server.token)
            })
            .await?;
        Ok(response.json().await?)
    }

    /// A page of the project's jobs, newest first.
    pub async fn list(
        &self,
        status: Option<&str>,
        limit: u32,
        cursor: Option<&str>,
    ) -> anyhow::Result<Value> {
        let mut query = vec![("limit", limit.to_string())];
        query.extend(status.map(|s| ("status", s.to_string())));
        query.extend(cursor.map(|c| ("cursor", c.to_string())));
        let path = format!("/projects/{}/compiles", self.server.project);
        let response = self.send(true, || self.get(&path).query(&query)).await?;
        Ok(response.json().await?)
    }

    /// Any other route: `method` on `path` with an optional JSON body; the JSON answer, or
    /// None for `204 No Content`.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Option<Value>> {
        // A POST that got no answer is not sent again: it may have been done.
        let repeatable = method != reqwest::Method::POST;
        let response = self
            .send(repeatable, || {
                let request = self
                    .http
                    .request(method.clone(), self.url(path))
                    .bearer_auth(&self.server.token);
                match body {
                    Some(body) => request.json(body),
                    None => request,
                }
            })
            .await?;
        if response.status() == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(response.json().await?))
    }

    fn get(&self, path: &str) -> RequestBuilder {
        self.http
            .get(self.url(path))
            .bearer_auth(&self.server.token)
    }

    /// Sends the request `build` makes until it is answered with a success (returned), an
    /// error that retrying cannot change (an [`ApiError`]), or [`ATTEMPTS`] run out. `429` and
    /// `503` are retried after their `Retry-After`; a request that got no answer is retried
    /// with back-off only when `repeatable` (a retry cannot do it twice).
    pub(crate) async fn send(
        &self,
        repeatable: bool,
        build: impl Fn() -> RequestBuilder,
    ) -> anyhow::Result<Response> {
        let back_off = ExponentialBuilder::default()
            .with_min_delay(Duration::from_secs(1))
            .with_factor(2.0)
            .with_max_times(ATTEMPTS as usize - 1);
        let answered = (|| attempt(&build))
            .retry(back_off)
            .when(|unanswered| match unanswered {
                Unanswered::Busy { after, .. } => *after <= MAX_RETRY_AFTER,
                Unanswered::Lost(error) => repeatable && !error.is_builder(),
                Unanswered::Refused(_) => false,
            })
            .adjust(|unanswered, next| match unanswered {
                Unanswered::Busy { after, .. } => next.map(|_| *after),
                _ => next,
            })
            .notify(|unanswered, delay| match unanswered {
                Unanswered::Busy { error, .. } => {
                    eprintln!("{error}; retrying in {} s", delay.as_secs())
                }
                Unanswered::Lost(error) => eprintln!(
                    "no answer from {} ({}); retrying in {} s",
                    self.server.url,
                    root_cause(error),
                    delay.as_secs()
                ),
                Unanswered::Refused(_) => {}
            })
            .await;
        answered.map_err(|unanswered| match unanswered {
            Unanswered::Busy { error, .. } | Unanswered::Refused(error) => error.into(),
            Unanswered::Lost(error) => anyhow::Error::new(Failure {
                exit: Exit::Unavailable,
                message: format!("no answer from {}: {}", self.server.url, root_cause(&error)),
            }),
        })
    }
}

/// Why one attempt of a request got no success.
enum Unanswered {
    /// `429` or `503` with a `Retry-After`: the same request may succeed after it.
    Busy { error: ApiError, after: Duration },
    /// Any other error answer.
    Refused(ApiError),
    /// No answer at all.
    Lost(reqwest::Error),
}

async fn attempt(build: &impl Fn() -> RequestBuilder) -> Result<Response, Unanswered> {
    let response = build().send().await.map_err(Unanswered::Lost)?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let after = retry_after(&response);
    let error = api_error(response).await;
    match after {
        Some(after)
            if matches!(
                status,
                // 409 with Retry-After: another upload of the same file is under way.
                StatusCode::TOO_MANY_REQUESTS
                    | StatusCode::SERVICE_UNAVAILABLE
                    | StatusCode::CONFLICT
            ) =>
        {
            Err(Unanswered::Busy { error, after })
        }
        _ => Err(Unanswered::Refused(error)),
    }
}

/// A job's id, as the API gave it.
pub fn job_id(job: &Value) -> anyhow::Result<String> {
    Ok(job["id"]
        .as_str()
        .context("no job id in the answer")?
        .to_string())
}

pub fn is_terminal(job: &Value) -> bool {
    !matches!(job["status"].as_str(), Some("Queued" | "Running"))
}

fn retry_after(response: &Response) -> Option<Duration> {
    let seconds = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// The problem an error answer explains (RFC 9457), or its status alone.
async fn api_error(response: Response) -> ApiError {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    ApiError {
        status,
        code: text(&body["code"]),
        detail: text(&body["detail"]),
        fields: body["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| (text(&e["field"]), text(&e["message"])))
            .collect(),
        missing_sha256: body["missing_sha256"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect(),
    }
}

/// The innermost cause of a transport error ("Connection refused"), which says the most.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}
