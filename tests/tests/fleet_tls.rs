//! A scheduler on a remote Docker engine, reached over `tcp://` with mutual TLS as operators
//! run remote engines (the second engine of `./dev/engine`, listening on loopback with
//! `--tlsverify`): it compiles through it, and a scheduler with a certificate the engine does
//! not trust stops at start with a message that names the engine.

use serde_json::json;
use std::process::Command;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    second_engine_actions, second_engine_tls, unix_seconds, SchedulerProcess, TestApp,
};

/// A CA of its own and a client certificate it signed: well-formed, but not the engine's CA.
fn rogue_client_certificates(folder: &std::path::Path) {
    let openssl = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(folder)
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=rogue CA",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=rogue scheduler",
        "-keyout",
        "client-key.pem",
        "-out",
        "client.csr",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        "client-cert.pem",
    ]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduler_compiles_on_a_remote_engine_over_mutual_tls() {
    let (address, certificates) = second_engine_tls();
    let app = TestApp::spawn_api_only(|config| {
        config.docker_host = address.clone();
        config.docker_tls_ca = format!("{certificates}/ca.pem");
        config.docker_tls_cert = format!("{certificates}/client-cert.pem");
        config.docker_tls_key = format!("{certificates}/client-key.pem");
        config.scheduler_slots = 1;
        config.warm_pool_size = Some(0);
    })
    .await;
    let since = unix_seconds();
    let _scheduler = SchedulerProcess::spawn(&app.config, &format!("tls-{}", uuid::Uuid::new_v4()));
    let document =
        "\\documentclass{article}\\begin{document}Compiled on the remote engine.\\end{document}";
    let job = app.submit(json!({ "input_latex": document })).await;
    let id = job.id();
    let job = app.wait_terminal(id, Duration::from_secs(120)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert!(app
        .text_of(id)
        .await
        .contains("Compiled on the remote engine."));
    // The second engine itself made and ran the job's container.
    let actions = second_engine_actions(id, since);
    for action in ["create", "start"] {
        assert!(actions.iter().any(|a| a == action), "{actions:?}");
    }

    // The same scheduler with a client certificate of another CA: the engine refuses the
    // handshake, and the scheduler stops at once, saying where it could not connect.
    let scratch = tempfile::tempdir().unwrap();
    let rogue = scratch.path();
    rogue_client_certificates(rogue);
    let mut config = app.config.clone();
    config.docker_tls_ca = format!("{certificates}/ca.pem");
    config.docker_tls_cert = rogue.join("client-cert.pem").display().to_string();
    config.docker_tls_key = rogue.join("client-key.pem").display().to_string();
    let mut refused = SchedulerProcess::spawn(&config, &format!("rogue-{}", uuid::Uuid::new_v4()));
    let status = refused.exited(Duration::from_secs(60)).await;
    assert!(!status.success());
    let message = refused.stderr();
    assert!(
        message.contains(&format!("Docker engine at {address}")),
        "{message}"
    );
    assert_eq!(app.count_jobs("status = 'Running'").await, 0);
}
