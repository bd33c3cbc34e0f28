//! Test harness for the black-box end-to-end tests (the zero2prod model): each test spawns the
//! real API on a random port and a real scheduler, both against a database of its own on the
//! real Postgres, with the real Garage bucket and the real Docker engine that `./dev/up`
//! started (their settings come from `TEXFLEET_*`, as in `.dev/env`). Tests then speak HTTP.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use texfleet_core::storage::Storage;
use texfleet_core::{db, token, Config};
use tokio::sync::oneshot;
use uuid::Uuid;

pub const HELLO: &str =
    "\\documentclass{article}\\begin{document}Hello from texfleet\\end{document}";

pub struct TestApp {
    pub url: String,
    pub project_id: Uuid,
    pub token: String,
    pub config: Config,
    pub http: reqwest::Client,
    pub storage: Storage,
    pub pool: db::Pool,
    stop: Vec<oneshot::Sender<()>>,
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
        // The servers' logs, shown by the test runner for failing tests (RUST_LOG to filter).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info".into()),
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
        // Many schedulers run in one test process: none serves metrics unless a test asks.
        config.scheduler_metrics_addr = String::new();
        adjust(&mut config);
        db::migrate(&config.database_url).await.expect("migrations");

        let pool = db::pool(&config, &config.database_url).unwrap();
        let (project_id, token) = create_project(&pool).await;

        let listener = tokio::net::TcpListener::bind(&config.listen_addr)
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop_api, api_stopped) = oneshot::channel::<()>();
        tokio::spawn(texfleet_api::serve(config.clone(), listener, async {
            let _ = api_stopped.await;
        }));
        let mut stop = vec![stop_api];
        let mut scheduler = None;
        if with_scheduler {
            let (stop_scheduler, scheduler_stopped) = oneshot::channel::<()>();
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
            stop.push(stop_scheduler);
        }

        TestApp {
            url,
            project_id,
            token,
            storage: Storage::new(&config),
            config,
            http: reqwest::Client::new(),
            pool,
            stop,
            scheduler,
        }
    }

    /// Another project with its own token, in the same database.
    pub async fn other_project(&self) -> (Uuid, String) {
        create_project(&self.pool).await
    }

    /// Another project, its token, and a job it queued.
    pub async fn other_project_with_job(&self) -> (Uuid, String, Value) {
        let (project, token) = self.other_project().await;
        let job = self
            .http
            .post(format!("{}/compile", self.url))
            .bearer_auth(&token)
            .json(&json!({ "project_id": project, "input_latex": HELLO }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (project, token, job)
    }

    pub async fn post_compile(&self, body: &Value) -> reqwest::Response {
        self.http
            .post(format!("{}/compile", self.url))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
    }

    /// Submits a document and returns the job as the API answered.
    pub async fn submit(&self, extra: Value) -> Value {
        let mut body = json!({ "project_id": self.project_id });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let response = self.post_compile(&body).await;
        assert_eq!(response.status(), 202, "{}", response.text().await.unwrap());
        response.json().await.unwrap()
    }

    /// Polls the job until it is terminal, failing after `limit`.
    pub async fn wait_terminal(&self, id: &str, limit: Duration) -> Value {
        let started = Instant::now();
        loop {
            let job: Value = self
                .get(&format!("/compile/{id}"))
                .await
                .json()
                .await
                .unwrap();
            let status = job["status"].as_str().unwrap().to_string();
            if status != "Queued" && status != "Running" {
                return job;
            }
            assert!(
                started.elapsed() < limit,
                "job {id} still {status} after {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Submits and waits for the end (two minutes at most, for the first lualatex runs).
    pub async fn compile(&self, extra: Value) -> Value {
        let job = self.submit(extra).await;
        self.wait_terminal(job["id"].as_str().unwrap(), Duration::from_secs(120))
            .await
    }
}

impl Drop for TestApp {
    /// Stops the API and the scheduler, and waits for the scheduler to stop its compiles and
    /// remove their containers, so that no test leaves a container behind (tests run on the
    /// multi-threaded runtime, where blocking here is allowed).
    fn drop(&mut self) {
        for stop in self.stop.drain(..) {
            let _ = stop.send(());
        }
        if let Some(scheduler) = self.scheduler.take() {
            tokio::task::block_in_place(|| {
                let _ = tokio::runtime::Handle::current().block_on(scheduler);
            });
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

/// The text of a PDF, by poppler's pdftotext.
pub fn pdf_text(pdf: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("texfleet-pdf-{}", Uuid::new_v4()));
    std::fs::write(&dir, pdf).unwrap();
    let output = std::process::Command::new("pdftotext")
        .arg(&dir)
        .arg("-")
        .output()
        .expect("pdftotext (poppler-utils)");
    std::fs::remove_file(&dir).ok();
    assert!(output.status.success(), "pdftotext failed on the PDF");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Containers of a job that still exist: created for it (labelled with its id) or taken from
/// the warm pool (renamed `texfleet-<job id>-<attempt>`).
pub async fn containers_of_job(job_id: &str) -> Vec<String> {
    let mut found = sandbox_containers(&[("label", &format!("org.texfleet.job={job_id}"))]).await;
    found.extend(sandbox_containers(&[("name", &format!("texfleet-{job_id}"))]).await);
    found.sort();
    found.dedup();
    found
}

/// Ids of the containers (running or not) matching every Docker list filter given.
pub async fn sandbox_containers(filters: &[(&str, &str)]) -> Vec<String> {
    let docker = bollard::Docker::connect_with_defaults()
        .unwrap()
        .negotiate_version()
        .await
        .unwrap();
    let filters: std::collections::HashMap<&str, Vec<String>> = filters
        .iter()
        .map(|(key, value)| (*key, vec![value.to_string()]))
        .collect();
    let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

/// The canaries `./dev/test` plants: a secret in this process's environment (shared with the
/// in-process scheduler) and the path of a host file that holds the same secret.
pub fn canary() -> (String, String) {
    let secret =
        std::env::var("CANARY_SECRET").expect("CANARY_SECRET (run the suite through ./dev/test)");
    let file =
        std::env::var("CANARY_FILE").expect("CANARY_FILE (run the suite through ./dev/test)");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap().trim(),
        secret,
        "the host canary file holds the secret"
    );
    (secret, file)
}

/// A PDF's bytes followed by every stream it holds, inflated where it is Flate-compressed, so
/// that a search sees content that compression would hide.
pub fn pdf_bytes_inflated(pdf: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut all = pdf.to_vec();
    let mut rest = pdf;
    while let Some(start) = find(rest, b"stream") {
        let body = &rest[start + 6..];
        let body = body
            .strip_prefix(b"\r\n")
            .or_else(|| body.strip_prefix(b"\n"))
            .unwrap_or(body);
        let end = find(body, b"endstream").unwrap_or(body.len());
        let mut inflated = Vec::new();
        if flate2::read::ZlibDecoder::new(&body[..end])
            .read_to_end(&mut inflated)
            .is_ok()
        {
            all.extend_from_slice(&inflated);
        }
        rest = &body[end..];
        if rest.len() >= 9 {
            rest = &rest[9..];
        }
    }
    all
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// A scheduler as a real process (`texfleet scheduler`), for the fault tests: it can be killed
/// with SIGKILL. It logs JSON to a file, so tests can count what it did per job.
pub struct SchedulerProcess {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl SchedulerProcess {
    /// Starts `texfleet scheduler` with every setting of `config` as a `TEXFLEET_*` variable.
    pub fn spawn(config: &Config, scheduler_id: &str) -> SchedulerProcess {
        let binary = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/texfleet");
        let log = std::env::temp_dir().join(format!("texfleet-scheduler-{scheduler_id}.log"));
        let mut command = std::process::Command::new(binary);
        command
            .arg("scheduler")
            .env("TEXFLEET_LOG_FORMAT", "json")
            .env("RUST_LOG", "info");
        let settings = serde_json::to_value(config).unwrap();
        for (key, value) in settings.as_object().unwrap() {
            let value = match value {
                Value::Null => continue,
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            command.env(format!("TEXFLEET_{}", key.to_uppercase()), value);
        }
        command.env("TEXFLEET_SCHEDULER_ID", scheduler_id);
        command
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::null());
        let child = command
            .spawn()
            .expect("target/debug/texfleet (built by ./dev/up)");
        SchedulerProcess { child, log }
    }

    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        self.child.wait().unwrap()
    }

    /// How many times this scheduler uploaded each job's PDF, from its log.
    pub fn uploads(&self) -> std::collections::HashMap<String, usize> {
        let mut uploads = std::collections::HashMap::new();
        for line in std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
        {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if event["fields"]["message"] == "pdf uploaded" {
                let job = event["span"]["job_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                *uploads.entry(job).or_insert(0) += 1;
            }
        }
        uploads
    }
}

impl Drop for SchedulerProcess {
    /// A graceful stop (SIGTERM), so that a running compile's container is removed.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let _ = self.child.wait();
        }
    }
}

/// Runs `dev/<script> <action>` (`dev/pg stop`, `dev/garage start`, ...).
pub fn dev_script(script: &str, action: &str) {
    let path = format!("{}/../dev/{script}", env!("CARGO_MANIFEST_DIR"));
    let status = std::process::Command::new(path)
        .arg(action)
        .status()
        .unwrap();
    assert!(status.success(), "dev/{script} {action} failed");
}

/// Waits until `condition` holds, checking every 100 ms, failing after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `probe` finds something, checking every 100 ms, failing after `limit`.
pub async fn eventually_some<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asserts that a finished job's container is removed promptly (the scheduler removes it
/// while it uploads, so it may outlive the job's final state by a moment).
pub async fn assert_container_removed(job_id: &str) {
    eventually(
        Duration::from_secs(10),
        &format!("the container of job {job_id} is removed"),
        || async { containers_of_job(job_id).await.is_empty() },
    )
    .await;
}
