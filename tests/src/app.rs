//! [`TestApp`]: the real API and scheduler of one test, on a database of its own, and the
//! requests tests make of them.

use crate::ApiObject as _;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_core::storage::Storage;
use texfleet_core::{db, token, Config};
use tokio::sync::oneshot;
use uuid::Uuid;

pub const HELLO: &str =
    "\\documentclass{article}\\begin{document}Hello from texfleet\\end{document}";
/// A document TeX loops on until the job's timeout.
pub const ENDLESS: &str = "\\loop\\iftrue\\repeat";

pub struct TestApp {
    pub url: String,
    pub project_id: Uuid,
    pub token: String,
    pub config: Config,
    pub http: reqwest::Client,
    pub storage: Storage,
    pub pool: db::Pool,
    stop_api: Option<oneshot::Sender<()>>,
    stop_scheduler: Option<oneshot::Sender<()>>,
    scheduler: Option<tokio::task::JoinHandle<()>>,
}

impl TestApp {
    /// Starts an API and a scheduler on a fresh database; they stop when the app is dropped.
    pub async fn spawn() -> TestApp {
        TestApp::start(true, |_| {}).await
    }

    /// An API and a scheduler with adjusted settings.
    pub async fn spawn_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
        TestApp::start(true, adjust).await
    }

    /// Only the API: jobs stay `Queued`, for tests of the HTTP surface.
    pub async fn spawn_api_only(adjust: impl FnOnce(&mut Config)) -> TestApp {
        TestApp::start(false, adjust).await
    }

    async fn start(with_scheduler: bool, adjust: impl FnOnce(&mut Config)) -> TestApp {
        // The servers' warnings, shown by the test runner for failing tests (RUST_LOG=info for
        // every request): a long test's info lines would bury its panic message.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let mut config = Config::load(None).expect("TEXFLEET_* settings (source .dev/env)");
        config.database_url = create_database(&config.database_url).await;
        // The API and the scheduler connect as their own roles (migration V4), as in production.
        config.api_database_url = with_user(&config.database_url, "texfleet_api");
        config.scheduler_database_url = with_user(&config.database_url, "texfleet_scheduler");
        config.listen_addr = "127.0.0.1:0".into();
        config.scheduler_slots = 2;
        config.kill_grace_seconds = 3;
        config.database_pool_size = 4;
        // A test's end stops its scheduler; running compiles are then stopped at once.
        config.shutdown_grace_seconds = 0;
        // Tests submit hundreds of jobs at once; the rate-limit test sets its own limit.
        config.rate_limit_per_second = 0;
        config.address_rate_limit_per_second = 0;
        // Tests of the compile machinery submit the same document many times and need each
        // compiled; the result cache's tests switch it on.
        config.result_cache = false;
        // Many schedulers run in one test process: none serves metrics unless a test asks.
        config.scheduler_metrics_addr = String::new();
        adjust(&mut config);
        db::migrate(&config.database_url).await.expect("migrations");

        let pool = db::pool(&config, &config.database_url).unwrap();
        let (project_id, token) = create_project(&pool).await;

        let listener = texfleet_api::bind(&config.listen_addr).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop_api, api_stopped) = oneshot::channel::<()>();
        tokio::spawn(texfleet_api::serve(config.clone(), listener, async {
            let _ = api_stopped.await;
        }));
        let mut stop_scheduler = None;
        let mut scheduler = None;
        if with_scheduler {
            let (stop_scheduler_now, scheduler_stopped) = oneshot::channel::<()>();
            let mut scheduler_config = config.clone();
            if scheduler_config.scheduler_id.is_empty() {
                scheduler_config.scheduler_id = format!("test-{}", Uuid::new_v4());
            }
            scheduler = Some(tokio::spawn(async move {
                let result = texfleet_scheduler::run(scheduler_config, async {
                    let _ = scheduler_stopped.await;
                })
                .await;
                if let Err(error) = result {
                    panic!("scheduler failed: {error:#}");
                }
            }));
            stop_scheduler = Some(stop_scheduler_now);
        }

        TestApp {
            url,
            project_id,
            token,
            storage: Storage::new(&config),
            config,
            http: reqwest::Client::new(),
            pool,
            stop_api: Some(stop_api),
            stop_scheduler,
            scheduler,
        }
    }

    /// Another project with its own token, in the same database.
    /// The sandbox image of the default TeX Live year, as the configuration names it.
    pub fn default_image(&self) -> &str {
        &self.config.sandbox_images[&self.config.default_texlive]
    }

    pub async fn other_project(&self) -> (Uuid, String) {
        create_project(&self.pool).await
    }

    /// Another project, its token, and a job it queued.
    pub async fn other_project_with_job(&self) -> (Uuid, String, Value) {
        let (project, token) = self.other_project().await;
        let job = self
            .post_as(
                &token,
                "/compile",
                &json!({ "project_id": project, "input_latex": HELLO }),
            )
            .await
            .json()
            .await
            .unwrap();
        (project, token, job)
    }

    /// `POST /compile` with this app's token.
    pub async fn post_compile(&self, body: &Value) -> reqwest::Response {
        self.post_as(&self.token, "/compile", body).await
    }

    /// A `POST` of JSON to `path` with `token`.
    pub async fn post_as(&self, token: &str, path: &str, body: &Value) -> reqwest::Response {
        self.post_with_headers(token, path, body, &[]).await
    }

    /// A `POST` of JSON to `path` with `token` and extra headers.
    pub async fn post_with_headers(
        &self,
        token: &str,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }

    /// A `GET` of `path` with this app's token.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.get_as(&self.token, path).await
    }

    /// A `GET` of `path` with `token`.
    pub async fn get_as(&self, token: &str, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }

    /// A `GET` of `path` with this app's token, for a client that holds the copy `etag`.
    pub async fn get_if_none_match(&self, path: &str, etag: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .header("If-None-Match", etag)
            .send()
            .await
            .unwrap()
    }

    /// A `DELETE` of `path` with `token`.
    pub async fn delete_as(&self, token: &str, path: &str) -> reqwest::Response {
        self.http
            .delete(format!("{}{path}", self.url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }

    /// The PDF the API serves for the job `id`.
    pub async fn pdf_of(&self, id: &str) -> Vec<u8> {
        let response = self.get(&format!("/compile/{id}/pdf")).await;
        assert_eq!(response.status(), 200, "no PDF for {id}");
        response.bytes().await.unwrap().to_vec()
    }

    /// The text of job `id`'s PDF.
    pub async fn text_of(&self, id: &str) -> String {
        crate::pdf_text(&self.pdf_of(id).await)
    }

    /// `DELETE /compile/{id}` with this app's token.
    pub async fn cancel(&self, id: &str) -> reqwest::Response {
        self.delete_as(&self.token, &format!("/compile/{id}")).await
    }

    /// The JSON body of a `GET` of `path` with this app's token.
    pub async fn get_json(&self, path: &str) -> Value {
        self.get(path).await.json().await.unwrap()
    }

    /// Submits a document and returns the job as the API answered: queued (`202`), or
    /// complete at once with an earlier job's result (`200`, the result cache).
    pub async fn submit(&self, extra: Value) -> Value {
        let mut body = json!({ "project_id": self.project_id });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let response = self.post_compile(&body).await;
        let status = response.status();
        let text = response.text().await.unwrap();
        let job: Value = serde_json::from_str(&text).unwrap_or_default();
        let reused = status == 200 && job["reused_from"].is_string();
        assert!(status == 202 || reused, "{status}: {text}");
        job
    }

    /// Polls the job until it is terminal, failing after `limit`.
    pub async fn wait_terminal(&self, id: &str, limit: Duration) -> Value {
        let started = Instant::now();
        loop {
            let job = self.get_json(&format!("/compile/{id}")).await;
            let status = job["status"].as_str().unwrap().to_string();
            if status != "Queued" && status != "Running" {
                return job;
            }
            assert!(
                started.elapsed() < limit,
                "job {id} still {status} after {limit:?}"
            );
            self.assert_scheduler_runs();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The job's log as the API serves it.
    pub async fn log(&self, id: &str) -> String {
        let response = self.get(&format!("/compile/{id}/log")).await;
        response.text().await.unwrap()
    }

    /// Another project's job once it has ended, waited for with `Prefer: wait` (no polling).
    pub async fn wait_terminal_as(&self, token: &str, id: &str) -> Value {
        loop {
            let url = format!("{}/compile/{id}", self.url);
            let request = self.http.get(url).bearer_auth(token);
            let job: Value = request
                .header("Prefer", "wait=60")
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if !matches!(job["status"].as_str(), Some("Queued" | "Running")) {
                return job;
            }
            self.assert_scheduler_runs();
        }
    }

    /// The job as soon as it has started (or ended), through `?until=started`: no polling.
    pub async fn wait_started(&self, id: &str) -> Value {
        let url = format!("{}/compile/{id}?until=started", self.url);
        let request = self.http.get(url).bearer_auth(&self.token);
        let response = request.header("Prefer", "wait=60").send().await.unwrap();
        response.json().await.unwrap()
    }

    /// Fails at once when this app's scheduler has stopped (it refused to start, or failed):
    /// no job will end, and waiting for one would only hide why.
    pub fn assert_scheduler_runs(&self) {
        assert!(
            !self.scheduler.as_ref().is_some_and(|s| s.is_finished()),
            "the scheduler stopped; its error is in the log above"
        );
    }

    /// Starts the API's graceful shutdown (as SIGTERM does): it accepts nothing new and
    /// answers what is in flight.
    pub fn stop_api(&mut self) {
        if let Some(stop) = self.stop_api.take() {
            let _ = stop.send(());
        }
    }

    /// Submits and waits for the end (two minutes at most, for the first lualatex runs).
    pub async fn compile(&self, extra: Value) -> Value {
        let job = self.submit(extra).await;
        self.wait_terminal(job.id(), Duration::from_secs(120)).await
    }
}

impl Drop for TestApp {
    /// Stops the API and the scheduler, and waits for the scheduler to stop its compiles and
    /// remove their containers, so that no test leaves a container behind (tests run on the
    /// multi-threaded runtime, where blocking here is allowed).
    fn drop(&mut self) {
        self.stop_api();
        if let Some(stop) = self.stop_scheduler.take() {
            let _ = stop.send(());
        }
        if let Some(scheduler) = self.scheduler.take() {
            let ended = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(scheduler)
            });
            // A scheduler that failed or panicked fails the test that ran it.
            if let Err(error) = ended {
                if !std::thread::panicking() {
                    panic!("the scheduler failed: {error}");
                }
            }
        }
    }
}

/// The same URL for another role: `postgres://<user>@host:port/db`.
pub fn with_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL-form database URL");
    let host_and_db = rest.split_once('@').map_or(rest, |(_, after)| after);
    format!("{scheme}://{user}@{host_and_db}")
}

async fn create_database(base_url: &str) -> String {
    let name = format!("texfleet_test_{}", Uuid::new_v4().simple());
    db::create_database(base_url, &name).await.unwrap()
}

async fn create_project(pool: &db::Pool) -> (Uuid, String) {
    let client = pool.get().await.unwrap();
    let project = db::create_project(&**client, "test").await.unwrap();
    let secret = token::generate();
    db::create_token(&**client, project, "test", &token::hash(&secret), None)
        .await
        .unwrap();
    (project, secret)
}
