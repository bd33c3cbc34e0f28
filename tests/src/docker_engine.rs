//! The second Docker engine that `./dev/engine` runs beside the machine's (`./dev/test`
//! starts it and exports its addresses): reached through a unix socket or over mutual TLS,
//! crashed with `kill -9` and started again by the fleet tests.

use std::process::Command;

/// The second engine's unix socket (`unix://...`).
pub fn second_engine_socket() -> String {
    std::env::var("TEST_ENGINE_SOCKET").expect("TEST_ENGINE_SOCKET (./dev/test)")
}

/// The second engine's TLS address (`tcp://127.0.0.1:port`) and the folder of its CA and of
/// a client's certificate and key (`ca.pem`, `client-cert.pem`, `client-key.pem`).
pub fn second_engine_tls() -> (String, String) {
    let address = std::env::var("TEST_ENGINE_TLS").expect("TEST_ENGINE_TLS (./dev/test)");
    let certificates = std::env::var("TEST_ENGINE_CERTS").expect("TEST_ENGINE_CERTS (./dev/test)");
    (address, certificates)
}

fn dev_engine(action: &str) -> bool {
    Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../dev/engine"))
        .arg(action)
        .status()
        .is_ok_and(|status| status.success())
}

/// Now, in Unix seconds: the clock Docker's event filters take.
pub fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The lines `docker <args>` prints, run against the second engine.
fn second_engine_docker(args: &[&str]) -> Vec<String> {
    let output = Command::new("docker")
        .args(["-H", &second_engine_socket()])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// What the second engine did for a job's containers since `since` (Unix seconds): Docker's
/// event actions (`create`, `start`, `die`, ...), read from the engine itself.
pub fn second_engine_actions(job_id: &str, since: u64) -> Vec<String> {
    let (since, until) = (since.to_string(), (unix_seconds() + 1).to_string());
    let label = format!("label=org.texfleet.job={job_id}");
    second_engine_docker(&[
        "events",
        "--since",
        &since,
        "--until",
        &until,
        "--filter",
        &label,
        "--format",
        "{{.Action}}",
    ])
}

/// Containers of `scheduler` on the second engine, as `<job label> <state>`.
pub fn second_engine_containers(scheduler: &str) -> Vec<String> {
    let label = format!("label=org.texfleet.scheduler={scheduler}");
    second_engine_docker(&[
        "ps",
        "-a",
        "--filter",
        &label,
        "--format",
        "{{.Label \"org.texfleet.job\"}} {{.State}}",
    ])
}

/// The second engine's daemon killed with SIGKILL, as a dying host would end it; started
/// again by [`EngineCrash::end`] or, when the test fails first, on drop.
pub struct EngineCrash {
    over: bool,
}

impl EngineCrash {
    /// Fails if the engine was not running, so the fault cannot silently not happen.
    pub fn begin() -> EngineCrash {
        assert!(dev_engine("crash"), "dev/engine crash failed");
        EngineCrash { over: false }
    }

    pub fn end(&mut self) {
        self.over = true;
        assert!(dev_engine("start"), "dev/engine start failed");
    }
}

impl Drop for EngineCrash {
    fn drop(&mut self) {
        if !self.over {
            dev_engine("start");
        }
    }
}
