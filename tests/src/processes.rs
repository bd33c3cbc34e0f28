//! Real processes beside the test: a scheduler that can be killed, and the dev scripts that
//! stop and start Postgres and Garage.

use serde_json::Value;
use texfleet_core::Config;

/// A scheduler as a real process (`texfleet scheduler`), for the fault tests: it can be killed
/// with SIGKILL. It logs JSON to a file, so tests can count what it did per job.
pub struct SchedulerProcess {
    child: std::process::Child,
    log: std::path::PathBuf,
    errors: std::path::PathBuf,
}

impl SchedulerProcess {
    /// Starts `texfleet scheduler` with every setting of `config` as a `TEXFLEET_*` variable.
    pub fn spawn(config: &Config, scheduler_id: &str) -> SchedulerProcess {
        let binary = crate::TEXFLEET;
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
                // A map as the environment writes one: {key="value",...}.
                Value::Object(map) => {
                    let entries: Vec<String> = map
                        .iter()
                        .map(|(key, value)| format!("{key}={value}"))
                        .collect();
                    format!("{{{}}}", entries.join(","))
                }
                other => other.to_string(),
            };
            command.env(format!("TEXFLEET_{}", key.to_uppercase()), value);
        }
        command.env("TEXFLEET_SCHEDULER_ID", scheduler_id);
        let errors = log.with_extension("stderr");
        command
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&errors).unwrap());
        let child = command
            .spawn()
            .expect("target/debug/texfleet (built by ./dev/up)");
        SchedulerProcess { child, log, errors }
    }

    /// What the scheduler wrote to its standard error (why it did not start).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.errors).unwrap_or_default()
    }

    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.send_sigterm();
        self.child.wait().unwrap()
    }

    /// Sends SIGTERM and returns at once.
    pub fn send_sigterm(&self) {
        let pid = self.child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
    }

    /// Waits for the process to exit, failing after `limit`.
    pub async fn exited(&mut self, limit: std::time::Duration) -> std::process::ExitStatus {
        let child = &mut self.child;
        crate::eventually_some(limit, "the scheduler exits", || {
            std::future::ready(child.try_wait().unwrap())
        })
        .await
    }

    /// The events of this scheduler's JSON log.
    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// How many uploads this scheduler had to retry, from its log.
    pub fn upload_retries(&self) -> usize {
        self.events()
            .iter()
            .filter(|event| event["fields"]["message"] == "upload failed; retrying")
            .count()
    }

    /// How many times this scheduler uploaded each job's PDF, from its log.
    pub fn uploads(&self) -> std::collections::HashMap<String, usize> {
        let mut uploads = std::collections::HashMap::new();
        for event in self.events() {
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

/// Runs `dev/<script> <args>` (`dev/pg stop`, `dev/garage-cluster start-node 3`, ...).
fn dev_script(script: &str, args: &[&str]) -> bool {
    let path = format!("{}/../dev/{script}", env!("CARGO_MANIFEST_DIR"));
    std::process::Command::new(path)
        .args(args)
        .status()
        .is_ok_and(|status| status.success())
}

/// A dev service stopped for a fault test (`dev/pg`, `dev/garage`, a node of
/// `dev/garage-cluster`): started again by [`Outage::end`] or, when the test fails first, on
/// drop, so later tests find it running.
pub struct Outage {
    script: &'static str,
    start: &'static [&'static str],
    over: bool,
}

impl Outage {
    /// Stops the service; fails if it was not running, so the fault cannot silently not happen.
    pub fn begin(script: &'static str) -> Outage {
        Outage::begin_with(script, &["stop"], &["start"])
    }

    /// Stops with `dev/<script> <stop>`, starts again with `dev/<script> <start>`.
    pub fn begin_with(
        script: &'static str,
        stop: &[&str],
        start: &'static [&'static str],
    ) -> Outage {
        assert!(dev_script(script, stop), "dev/{script} {stop:?} failed");
        Outage {
            script,
            start,
            over: false,
        }
    }

    pub fn end(&mut self) {
        self.over = true;
        assert!(
            dev_script(self.script, self.start),
            "dev/{} {:?} failed",
            self.script,
            self.start
        );
    }

    pub fn is_over(&self) -> bool {
        self.over
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        if !self.over {
            dev_script(self.script, self.start);
        }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
