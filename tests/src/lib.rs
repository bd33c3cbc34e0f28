//! Test harness for the black-box end-to-end tests (the zero2prod model): each test spawns the
//! real API on a random port and a real scheduler, both against a database of its own on the
//! real Postgres, with the real Garage bucket and the real Docker engine that `./dev/up`
//! started (their settings come from `TEXFLEET_*`, as in `.dev/env`). Tests then speak HTTP.
//!
//! - [`app`]: the API and scheduler of a test, and requests to them;
//! - [`api_object`]: what tests read of the API's answers (`job.id()`);
//! - [`browser`]: headless Chromium, for the reference editor (`/play`);
//! - [`cli`]: the `texfleet` binary, run as a user would;
//! - [`processes`]: schedulers as real processes, and the dev scripts;
//! - [`docker`]: the sandbox containers seen from outside, and the canaries;
//! - [`dropping_proxy`]: a request done whose answer never arrives;
//! - [`hosts_file`]: names resolved to chosen addresses (`/etc/hosts`);
//! - [`kept_state`]: documents that leave state for the next compile;
//! - [`docker_engine`]: the Docker engines, and the second one of the fleet tests;
//! - [`loopback`]: clients from chosen loopback addresses;
//! - [`metrics`]: the API's metrics; [`multipart`]: multipart submissions;
//! - [`pdf`]: the text and streams of PDFs;
//! - [`project`]: projects on disk, as requests send them; [`project_files`]: files uploaded
//!   by hash;
//! - [`rows`]: the test database's rows, past row-level security;
//! - [`slow_proxy`]: the object store behind a proxy that stretches each request, to act
//!   while one is under way;
//! - [`wait`]: polling for a condition with a limit;
//! - [`webhook_receiver`]: an endpoint that verifies and records deliveries.

mod api_object;
mod app;
mod browser;
mod cli;
mod docker;
mod docker_engine;
mod dropping_proxy;
mod hosts_file;
mod kept_state;
mod loopback;
mod metrics;
mod multipart;
mod pdf;
mod processes;
mod project;
mod project_files;
mod rows;
mod slow_proxy;
mod wait;
mod webhook_receiver;

pub use api_object::*;
pub use app::*;
pub use browser::*;
pub use cli::*;
pub use docker::*;
pub use docker_engine::*;
pub use dropping_proxy::*;
pub use hosts_file::*;
pub use kept_state::*;
pub use loopback::*;
pub use metrics::*;
pub use multipart::*;
pub use pdf::*;
pub use processes::*;
pub use project::*;
pub use project_files::*;
pub use slow_proxy::*;
pub use wait::*;
pub use webhook_receiver::*;
