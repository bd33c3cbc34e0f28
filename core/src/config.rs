//! Configuration, read from defaults, then an optional TOML file, then `TEXFLEET_*` variables.
//!
//! One flat struct serves every process: each reads the settings it needs. Flat keys keep the
//! environment variable names obvious (`TEXFLEET_S3_BUCKET` sets `s3_bucket`).
//! docs/CONFIGURATION.md lists every setting with its default; a test keeps the two in step.

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// `TEXFLEET_*` variables that are not settings: the config file's path, the log format and the client CLI's
/// URL, token, project and webhook secret (for `webhook verify`). Any other unknown `TEXFLEET_*` variable is an error, so that a typo
/// fails loudly instead of leaving a default in force.
const CLIENT_VARIABLES: &[&str] = &[
    "config",
    "log_format",
    "url",
    "token",
    "project",
    "webhook_secret",
];

/// The least `max_sending_bytes`: a project's quarter of it holds a page of jobs (about 1.7 MB
/// at most, its diagnostics stopping at a mebibyte).
const MIN_SENDING_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Postgres connection string of the owner role (libpq key=value or URL form): migrations
    /// and the operator commands use it.
    pub database_url: String,
    /// Connection string of the API's role (`texfleet_api`, under row-level security); empty
    /// means `database_url`, which loses the isolation that Postgres enforces.
    pub api_database_url: String,
    /// Connection string of the scheduler's role (`texfleet_scheduler`); empty means `database_url`.
    pub scheduler_database_url: String,
    /// Maximum connections in each process's Postgres pool.
    pub database_pool_size: usize,
    /// Address the API listens on.
    pub listen_addr: String,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Bytes of answers the API holds while their clients read them; one project holds at
    /// most a quarter. Beyond that a read is `503` with `Retry-After`.
    pub max_sending_bytes: usize,
    /// Connections the API holds open at once. When it is full, a newcomer takes the place of
    /// the connection idle the longest; only while every connection is serving does it wait
    /// in the kernel's backlog.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64) may hold open; 0: no cap. Trusted
    /// proxies are exempt.
    pub max_connections_per_address: usize,
    /// Seconds a new connection has to send its first request's headers, whatever its
    /// protocol, and a request its body.
    pub header_timeout_seconds: u64,
    pub body_timeout_seconds: u64,
    /// Seconds a connection may stay open with no request after its last answer.
    pub idle_timeout_seconds: u64,
    /// Requests per second each token may make (0: no limit), and the burst above that rate.
    pub rate_limit_per_second: u32,
    pub rate_limit_burst: u32,
    /// Requests per second each client address (an IPv6 /64) may make, counted before any
    /// token is looked up (0: no limit), and the burst above that rate.
    pub address_rate_limit_per_second: u32,
    pub address_rate_limit_burst: u32,
    /// Comma-separated CIDR ranges of the reverse proxies in front of the API, and the header
    /// in which they name the client (`X-Forwarded-For`, say): both or neither. A trusted
    /// proxy's connections are not capped per address, and its requests count against the
    /// client it names.
    pub trusted_proxies: String,
    pub client_address_header: String,

    pub s3_endpoint: String,
    pub s3_region: String,
    pub s3_bucket: String,
    pub s3_access_key_id: String,
    pub s3_secret_access_key: String,

    /// The Docker engine of the scheduler: `unix:///path`, or `tcp://host:port` (with TLS when
    /// the three `docker_tls_*` files are set); empty means `DOCKER_HOST` or the local socket.
    pub docker_host: String,
    /// PEM files for mutual TLS with a remote engine: the CA that signed the engine's
    /// certificate, and this scheduler's client certificate and key.
    pub docker_tls_ca: String,
    pub docker_tls_cert: String,
    pub docker_tls_key: String,

    /// The sandbox image of each TeX Live year (each printed by `sandbox-image/build.sh`), as
    /// TOML `sandbox_images = { 2024 = "texfleet-sandbox:2024-…", 2026 = "…" }` or
    /// `TEXFLEET_SANDBOX_IMAGES='{2024="…",2026="…"}'`. The API accepts jobs of its years; a
    /// scheduler runs every image of its own map and claims only jobs of those years.
    pub sandbox_images: BTreeMap<String, String>,
    /// The TeX Live year of a job whose request names none; one of `sandbox_images`' years.
    #[serde(deserialize_with = "year")]
    pub default_texlive: String,
    /// Optional OCI runtime for sandbox containers, for example `runsc`; empty means Docker's default.
    pub sandbox_runtime: String,
    /// Memory of one compile, its tmpfs folders included. LuaLaTeX holds each CJK font it
    /// loads as Lua tables: a Japanese or Korean document takes 1.7 GB.
    pub sandbox_memory_mb: i64,
    pub sandbox_pids_limit: i64,
    /// CPU limit in cores (fractions allowed).
    pub sandbox_cpus: f64,
    /// Size of the job's tmpfs work directory.
    pub sandbox_tmpfs_mb: i64,
    pub max_pdf_bytes: usize,
    pub max_log_bytes: usize,
    pub max_synctex_bytes: usize,

    /// Compile timeout when the request names none, and the largest it may name.
    pub default_timeout_seconds: u32,
    pub max_timeout_seconds: u32,
    /// Seconds the scheduler allows beyond the compile timeout before it kills the container.
    pub kill_grace_seconds: u32,

    /// Concurrent compiles per scheduler; 0 means the number of CPU cores.
    pub scheduler_slots: usize,
    /// Page previews each scheduler renders at once, besides its compiles: slots no compile
    /// takes, so that previews never wait for compiles; 0 renders none.
    pub preview_slots: usize,
    /// Identity written into the lease of claimed jobs; empty means `<hostname>-<pid>`.
    pub scheduler_id: String,
    /// Sandbox containers kept started ahead of demand; unset means `scheduler_slots`, 0 turns
    /// the warm pool off.
    pub warm_pool_size: Option<usize>,
    /// A warm container older than this is replaced rather than given a job.
    pub warm_pool_max_age_seconds: u64,
    /// Where the scheduler serves `/metrics`; empty turns the endpoint off.
    pub scheduler_metrics_addr: String,
    /// How often the scheduler looks for work when no notification arrives.
    pub poll_interval_seconds: u64,
    /// Attempts a job gets when infrastructure (Docker, S3) fails before it ends `Failed`.
    pub max_attempts: i32,
    /// Length of the lease a claimed job holds; its scheduler renews it every third of that.
    pub lease_seconds: u64,
    /// Jobs of one project that may run at once, across all schedulers.
    pub max_running_per_project: usize,
    /// Slots of each scheduler that only a project with nothing running may take, so that a
    /// project using idle capacity never makes another wait for its slow jobs (at most the
    /// scheduler's slots minus one; 0 turns this off).
    pub idle_project_slots: usize,
    /// Jobs of one project that may wait in the queue; beyond it `POST /compile` answers 429.
    pub max_queued_per_project: i64,
    /// Bytes of sources (paths and contents) the queued jobs of one project may hold; beyond
    /// it `POST /compile` answers 429.
    pub max_queued_bytes_per_project: i64,
    /// The largest project file (`PUT /projects/{id}/files/{sha256}`); beyond it `413`.
    pub max_project_file_bytes: i64,
    /// Bytes of project files one project may hold, uploads in progress included; beyond it
    /// `413`.
    pub project_files_quota_bytes: i64,
    /// A project file no job named is kept this many hours after its upload or its last use.
    pub project_files_grace_hours: u32,
    /// Bytes of project files a scheduler keeps on its disk for the next compiles.
    pub project_files_cache_bytes: u64,
    /// On SIGTERM, how long running compiles may go on before they are handed back to the queue.
    pub shutdown_grace_seconds: u64,
    /// Finished jobs and their objects are deleted after this many days; 0 keeps them forever.
    pub retention_days: u32,
    /// How often the scheduler looks for jobs past retention.
    pub retention_interval_seconds: u64,
    /// Whether a submission identical to a retained `Succeeded` job of its project reuses that
    /// job's result instead of compiling (requests opt out with `"cache": false`).
    pub result_cache: bool,
    /// Whether a document's preamble is dumped into a format, kept per project and document,
    /// and loaded by its later compiles while the preamble and the files it read are unchanged.
    pub preamble_cache: bool,
    /// Whether a compile starts from the auxiliary files of the project's last successful
    /// compile of the same document (one pass after an edit instead of three).
    pub incremental_compiles: bool,
    /// Documents per project whose compile state (auxiliary files and format) is kept; a
    /// project's first compile of one more document drops the state compiled longest ago.
    pub kept_documents_per_project: usize,
    /// Bytes of compile state a project keeps at most; beyond them, the state of the documents
    /// compiled longest ago goes too (the document compiled last always stays).
    pub kept_bytes_per_project: u64,

    /// Base64 of 32 bytes that seals the webhook endpoints' secrets in the database; the API
    /// and the schedulers need the same. Empty: webhooks are off.
    pub webhook_secret_key: String,
    /// Comma-separated CIDR ranges webhooks may reach although they are private or special
    /// (loopback for the dev stack and the tests); empty by default.
    pub webhook_allowed_cidrs: String,
    /// How long a delivery is retried before it is `failed`.
    pub webhook_retry_hours: u32,
    /// Comma-separated origins (`https://editor.example`) whose pages may call the API from a
    /// browser (CORS); empty by default: the API sends no CORS headers, and only its own
    /// pages (`/play`) call it.
    pub cors_allowed_origins: String,
    /// The first retry's delay; each later one doubles it (with jitter), up to an hour.
    pub webhook_retry_base_seconds: f64,
    /// Deliveries to one endpoint in flight at once, across all schedulers; a project's
    /// endpoints together may have twice that.
    pub webhook_endpoint_concurrency: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database_url: "postgres://texfleet@127.0.0.1:5432/texfleet".into(),
            api_database_url: String::new(),
            scheduler_database_url: String::new(),
            database_pool_size: 16,
            listen_addr: "127.0.0.1:8080".into(),
            max_body_bytes: 20 * 1024 * 1024,
            max_sending_bytes: 256 * 1024 * 1024,
            max_connections: 1024,
            max_connections_per_address: 128,
            header_timeout_seconds: 10,
            body_timeout_seconds: 60,
            idle_timeout_seconds: 30,
            rate_limit_per_second: 50,
            rate_limit_burst: 100,
            address_rate_limit_per_second: 200,
            address_rate_limit_burst: 400,
            trusted_proxies: String::new(),
            client_address_header: String::new(),
            s3_endpoint: "http://127.0.0.1:3900".into(),
            s3_region: "garage".into(),
            s3_bucket: "texfleet".into(),
            s3_access_key_id: String::new(),
            s3_secret_access_key: String::new(),
            docker_host: String::new(),
            docker_tls_ca: String::new(),
            docker_tls_cert: String::new(),
            docker_tls_key: String::new(),
            sandbox_images: BTreeMap::new(),
            default_texlive: "2024".into(),
            sandbox_runtime: String::new(),
            sandbox_memory_mb: 2048,
            sandbox_pids_limit: 128,
            sandbox_cpus: 1.0,
            sandbox_tmpfs_mb: 256,
            max_pdf_bytes: 50 * 1024 * 1024,
            max_log_bytes: 4 * 1024 * 1024,
            max_synctex_bytes: 20 * 1024 * 1024,
            default_timeout_seconds: 60,
            max_timeout_seconds: 300,
            kill_grace_seconds: 5,
            scheduler_slots: 0,
            preview_slots: 2,
            scheduler_id: String::new(),
            scheduler_metrics_addr: "127.0.0.1:9464".into(),
            warm_pool_size: None,
            warm_pool_max_age_seconds: 120,
            poll_interval_seconds: 5,
            max_attempts: 3,
            lease_seconds: 30,
            max_running_per_project: 4,
            idle_project_slots: 1,
            max_queued_per_project: 1000,
            max_queued_bytes_per_project: 1024 * 1024 * 1024,
            max_project_file_bytes: 128 * 1024 * 1024,
            project_files_quota_bytes: 2 * 1024 * 1024 * 1024,
            project_files_grace_hours: 24,
            project_files_cache_bytes: 2 * 1024 * 1024 * 1024,
            shutdown_grace_seconds: 30,
            retention_days: 30,
            retention_interval_seconds: 3600,
            result_cache: true,
            preamble_cache: true,
            incremental_compiles: true,
            kept_documents_per_project: 16,
            kept_bytes_per_project: 256 * 1024 * 1024,
            webhook_secret_key: String::new(),
            webhook_allowed_cidrs: String::new(),
            webhook_retry_hours: 24,
            cors_allowed_origins: String::new(),
            webhook_retry_base_seconds: 10.0,
            webhook_endpoint_concurrency: 4,
        }
    }
}

impl Config {
    /// Loads the configuration: defaults, then `file` if given, then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, Box<figment::Error>> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file_exact(file));
        }
        let config: Config = figment
            .merge(Env::prefixed("TEXFLEET_").ignore(CLIENT_VARIABLES))
            .extract()
            .map_err(Box::new)?;
        // Otherwise a body of the largest size gets 429 with Retry-After from an empty queue,
        // and its client retries for ever.
        if config.max_queued_bytes_per_project < config.max_body_bytes as i64 {
            return Err(Box::new(figment::Error::from(format!(
                "max_queued_bytes_per_project ({}) is below max_body_bytes ({}): a request of \
                 the largest size could never be queued",
                config.max_queued_bytes_per_project, config.max_body_bytes
            ))));
        }
        if config.max_sending_bytes < MIN_SENDING_BYTES {
            return Err(Box::new(figment::Error::from(format!(
                "max_sending_bytes ({}) is below {MIN_SENDING_BYTES}: a project's quarter \
                 could not hold a page of jobs",
                config.max_sending_bytes
            ))));
        }
        Ok(config)
    }

    /// Why the API cannot offer its years: a default that is not one of them.
    pub fn texlive_years_problem(&self) -> Option<String> {
        (!self.texlive_years().contains(&self.default_texlive)).then(|| {
            format!(
                "default_texlive ({}) is not one of sandbox_images' years ({})",
                self.default_texlive,
                self.texlive_years().join(", ")
            )
        })
    }

    /// The TeX Live years jobs may ask for: those of `sandbox_images`, or the default alone.
    pub fn texlive_years(&self) -> Vec<String> {
        match self.sandbox_images.is_empty() {
            true => vec![self.default_texlive.clone()],
            false => self.sandbox_images.keys().cloned().collect(),
        }
    }

    pub fn api_database_url(&self) -> &str {
        or_default(&self.api_database_url, &self.database_url)
    }

    pub fn scheduler_database_url(&self) -> &str {
        or_default(&self.scheduler_database_url, &self.database_url)
    }

    pub fn scheduler_slots(&self) -> usize {
        match self.scheduler_slots {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    pub fn scheduler_id(&self) -> String {
        if !self.scheduler_id.is_empty() {
            return self.scheduler_id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "scheduler".into());
        format!("{host}-{}", std::process::id())
    }
}

/// A year as text, whether the environment's `2024` arrived as a number or as a string.
fn year<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Year {
        Number(u64),
        Text(String),
    }
    Ok(match Year::deserialize(deserializer)? {
        Year::Number(year) => year.to_string(),
        Year::Text(year) => year,
    })
}

fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() {
        default
    } else {
        value
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment's Jail closures return its large error
mod tests;
