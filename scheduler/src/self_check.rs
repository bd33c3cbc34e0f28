//! The scheduler refuses to run with an unsafe sandbox. At start it refuses settings that
//! would switch a limit off, then runs the supervisor's self-check in a container configured
//! exactly like a job's, in each of its images, and exits with the list of missing layers if any is missing. The same
//! check serves `texfleet sandbox check`.

use crate::sandboxes::Sandboxes;
use anyhow::{bail, Context as _};
use texfleet_core::Config;
use texfleet_sandbox::{Check, CheckSpec};

/// gVisor: its own kernel enforces the cgroup limits outside the sandbox's view, and it has no
/// Landlock; its runtime arguments must keep our seccomp profile (`--oci-seccomp`).
const GVISOR: &str = "runsc";

/// Refuses settings that switch a limit off, then a sandbox that is missing a layer.
pub async fn refuse_unsafe_sandbox(config: &Config) -> anyhow::Result<()> {
    refuse_unsafe_settings(config)?;
    let checks = check_sandbox(config)
        .await
        .context("the sandbox self-check could not run")?;
    let missing: Vec<String> = checks
        .iter()
        .filter(|check| !check.ok)
        .map(|check| format!("{} ({})", check.name, check.detail))
        .collect();
    if !missing.is_empty() {
        bail!(
            "refusing to start: the sandbox is missing isolation layers: {}; run `texfleet sandbox check` for the full report",
            missing.join("; ")
        );
    }
    tracing::info!(layers = checks.len(), "sandbox self-check passed");
    Ok(())
}

fn refuse_unsafe_settings(config: &Config) -> anyhow::Result<()> {
    let limits = [
        ("sandbox_memory_mb", config.sandbox_memory_mb as f64),
        ("sandbox_pids_limit", config.sandbox_pids_limit as f64),
        ("sandbox_cpus", config.sandbox_cpus),
        ("sandbox_tmpfs_mb", config.sandbox_tmpfs_mb as f64),
    ];
    for (name, value) in limits {
        if value.is_nan() || value <= 0.0 {
            bail!("refusing to start: {name} is {value}, which would switch its limit off");
        }
    }
    Ok(())
}

/// Runs the supervisor's self-check in a sandbox of each image configured like a job's and
/// returns what it found, property by property (each detail naming its TeX Live year), with
/// the engine's own record of the runtime's arguments.
pub async fn check_sandbox(config: &Config) -> anyhow::Result<Vec<Check>> {
    let sandboxes = Sandboxes::connect(config, &config.scheduler_id(), "sandbox-check").await?;
    let gvisor = config.sandbox_runtime == GVISOR;
    let spec = CheckSpec {
        memory_bytes: config.sandbox_memory_mb * 1024 * 1024,
        pids_limit: config.sandbox_pids_limit,
        cpus: config.sandbox_cpus,
        work_tmpfs_bytes: config.sandbox_tmpfs_mb * 1024 * 1024,
        gvisor,
    };
    let mut checks = Vec::new();
    for sandbox in sandboxes.iter() {
        let run = sandbox.check(serde_json::to_vec(&spec)?.into()).await?;
        let found: Vec<Check> = serde_json::from_slice(&run.stdout).map_err(|error| {
            anyhow::anyhow!(
                "the sandbox check of TeX Live {} printed no report ({error}): {}",
                sandbox.texlive(),
                String::from_utf8_lossy(&run.stderr).escape_debug()
            )
        })?;
        checks.extend(found.into_iter().map(|check| Check {
            detail: format!("TeX Live {}: {}", sandbox.texlive(), check.detail),
            ..check
        }));
    }
    if gvisor {
        let arguments = sandboxes.engine().runtime_arguments(GVISOR).await?;
        checks.push(Check {
            name: "gvisor_keeps_seccomp".into(),
            ok: arguments.iter().any(|a| a == "--oci-seccomp"),
            detail: format!("runtimeArgs {arguments:?}"),
        });
    }
    Ok(checks)
}
