//! The `texfleet` binary as a user runs it, pointed at a test's API as its project.

use crate::TestApp;
use std::path::Path;
use std::process::{Command, Output};

/// The debug build of the one binary (`cargo build --workspace --bins` makes it).
pub const TEXFLEET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/texfleet");

/// `texfleet`, with the app's URL, token and project in its environment, as `.dev/env` sets them.
pub fn texfleet_command(app: &TestApp) -> Command {
    let mut command = Command::new(TEXFLEET);
    command
        .env("TEXFLEET_URL", &app.url)
        .env("TEXFLEET_TOKEN", &app.token)
        .env("TEXFLEET_PROJECT", app.project_id.to_string());
    command
}

/// Runs `texfleet` with `args` in `folder`, as a user in a project folder does, to its end.
pub fn texfleet_in(app: &TestApp, folder: &Path, args: &[&str]) -> Output {
    texfleet_command(app)
        .args(args)
        .current_dir(folder)
        .output()
        .expect("texfleet runs")
}
