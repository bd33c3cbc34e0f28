//! Reaching the scheduler's Docker engine: the local socket, another socket (`docker_host`),
//! or a remote engine over `tcp://` with mutual TLS, as operators run remote engines. Only
//! this file and the Docker modules it serves hold a `bollard::Docker` handle.

use std::path::Path;
use texfleet_core::Config;

/// Seconds bollard waits for any answer of the engine (its own default).
const ENGINE_TIMEOUT_SECONDS: u64 = 120;

/// Connects to the engine the settings name (`docker_host`, with mutual TLS when the three
/// `docker_tls_*` files are set), and settles on an API version with it. A refused
/// certificate, a wrong address or a missing file is an error that says which engine.
pub async fn connect_engine(config: &Config) -> anyhow::Result<bollard::Docker> {
    let host = match config.docker_host.as_str() {
        "" => std::env::var("DOCKER_HOST").unwrap_or_else(|_| "the local socket".into()),
        host => host.to_string(),
    };
    let tls = [
        &config.docker_tls_ca,
        &config.docker_tls_cert,
        &config.docker_tls_key,
    ];
    let docker = match tls.iter().filter(|file| !file.is_empty()).count() {
        0 if config.docker_host.is_empty() => bollard::Docker::connect_with_defaults(),
        0 => bollard::Docker::connect_with_host(&host),
        3 if host.starts_with("tcp://") || host.starts_with("https://") => {
            // The dependency tree enables two rustls providers, so none is the default.
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            bollard::Docker::connect_with_ssl(
                &host,
                Path::new(&config.docker_tls_key),
                Path::new(&config.docker_tls_cert),
                Path::new(&config.docker_tls_ca),
                ENGINE_TIMEOUT_SECONDS,
                bollard::API_DEFAULT_VERSION,
            )
        }
        3 => anyhow::bail!("docker_tls_* files are set, but docker_host {host:?} is not tcp://"),
        _ => anyhow::bail!(
            "docker_tls_ca, docker_tls_cert and docker_tls_key go together: set all three or none"
        ),
    }
    .map_err(|error| anyhow::anyhow!("Docker engine at {host}: {error}"))?;
    docker
        .negotiate_version()
        .await
        .map_err(|error| anyhow::anyhow!("Docker engine at {host} does not answer: {error}"))
}
