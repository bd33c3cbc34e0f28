//! Real processes beside the test: a scheduler that can be killed, and the dev scripts that
//! stop and start Postgres and Garage.

use serde_json::Value;
use texfleet_core::Config;

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

/// A TCP port on 127.0.0.1 that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
