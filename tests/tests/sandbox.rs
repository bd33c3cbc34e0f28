//! The sandbox itself, examined on the real Docker engine: every isolation layer is in force
//! inside a container configured like a job's, and leftover containers are swept away.

use std::collections::HashMap;
use std::time::Duration;
use texfleet_core::Config;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{containers_of_job, docker_engine, eventually, SchedulerProcess, TestApp};

/// Each layer the sandbox must have, by the name `texfleet sandbox check` reports it under.
const LAYERS: &[&str] = &[
    "supervisor_user",
    "supervisor_capabilities",
    "supervisor_not_dumpable",
    "no_new_privileges",
    "seccomp_filter",
    "seccomp_refuses_sockets",
    "seccomp_refuses_ptrace",
    "no_new_namespaces",
    "no_mount",
    "read_only_root",
    "no_shell",
    "work_tmpfs",
    "tmp_tmpfs",
    "shm_tmpfs",
    "no_network",
    "memory_limit",
    "no_swap_beyond_memory",
    "pids_limit",
    "cpu_limit",
    "init_process",
    "cannot_reach_driver_descriptors",
    "compile_user",
    "compile_has_no_capabilities",
    "landlock",
    "reads_no_image_files",
    "reads_no_proc",
    "reads_tex_trees",
    "tex_refuses_absolute_reads",
    "writes_work_directory",
    "cannot_signal_supervisor",
    "cannot_write_supervisor_output",
    "cannot_lower_supervisor_limits",
    "no_ptmx",
    "mqueue_not_writable",
    "ioctl_filtered",
    "compile_limits",
    "pids_limit_holds",
    "no_home",
];

#[tokio::test(flavor = "multi_thread")]
async fn every_isolation_layer_is_in_force_inside_a_sandbox() {
    let mut config = Config::load(None).unwrap();
    config.sandbox_memory_mb = 300;
    config.sandbox_pids_limit = 64;
    config.sandbox_cpus = 0.5;
    config.sandbox_tmpfs_mb = 64;
    let checks = texfleet_scheduler::check_sandbox(&config).await.unwrap();
    // Every layer, checked in each TeX Live year's image.
    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    let expected: Vec<&str> = config
        .sandbox_images
        .keys()
        .flat_map(|_| LAYERS)
        .copied()
        .collect();
    assert_eq!(names, expected);
    let failed: Vec<_> = checks.iter().filter(|c| !c.ok).collect();
    assert!(failed.is_empty(), "layers missing: {failed:#?}");
}

/// A container of this deployment left by a crashed process with the same scheduler id.
async fn leftover(
    docker: &bollard::Docker,
    image: &str,
    scheduler: &str,
    deployment: &str,
) -> String {
    let job_label = format!("orphan-{}", uuid::Uuid::new_v4());
    let labels = HashMap::from([
        ("org.texfleet.job".to_string(), job_label.clone()),
        ("org.texfleet.scheduler".to_string(), scheduler.to_string()),
        (
            "org.texfleet.deployment".to_string(),
            deployment.to_string(),
        ),
    ]);
    let body = bollard::models::ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(vec!["sleep".into(), "300".into()]),
        // The image's programs beyond the compile's are executable by root only.
        user: Some("0:0".into()),
        labels: Some(labels),
        network_disabled: Some(true),
        ..Default::default()
    };
    let created = docker.create_container(None, body).await.unwrap();
    docker.start_container(&created.id, None).await.unwrap();
    job_label
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduler_removes_containers_its_predecessor_left_behind_and_no_others() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let deployment = app.deployment_id().await;
    let scheduler_id = format!("crashed-{}", uuid::Uuid::new_v4());
    let docker = docker_engine().await;
    let image = app.default_image();
    let ours = leftover(&docker, image, &scheduler_id, &deployment).await;
    let other_deployment = leftover(
        &docker,
        image,
        &scheduler_id,
        &uuid::Uuid::new_v4().to_string(),
    )
    .await;
    assert_eq!(containers_of_job(&ours).await.len(), 1);

    let _scheduler = SchedulerProcess::spawn(&app.config, &scheduler_id);
    eventually(Duration::from_secs(30), "the orphan is removed", || async {
        containers_of_job(&ours).await.is_empty()
    })
    .await;
    let untouched = containers_of_job(&other_deployment).await;
    assert_eq!(
        untouched.len(),
        1,
        "another deployment's container was removed"
    );
    let options = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
        .force(true)
        .build();
    docker
        .remove_container(&untouched[0], Some(options))
        .await
        .unwrap();
}

/// A Lua loop that asks for 64 MiB strings until the memory limit stops it.
const MEMORY_BOMB: &str = "\\documentclass{article}\\begin{document}\\directlua{local t = {} \
    for i = 1, 1000 do t[i] = string.rep('x', 67108864 + i) end}\\end{document}";

/// gVisor (`runsc`), which `./dev/up` registers with the engine: a document compiles, and
/// every layer the self-check can see under gVisor holds. The cgroup limits are enforced
/// outside gVisor's kernel and Landlock does not exist there (SECURITY.md explains); the check
/// then proves that the runtime keeps our seccomp profile.
#[tokio::test(flavor = "multi_thread")]
async fn the_gvisor_runtime_compiles_and_keeps_every_visible_layer() {
    let docker = docker_engine().await;
    let runtimes = docker.info().await.unwrap().runtimes.unwrap_or_default();
    assert!(
        runtimes.contains_key("runsc"),
        "runsc is not registered with this Docker engine (./dev/up registers it)"
    );
    // Every year's image, TeX Live 2026's too: its kpathsea refuses names again only through
    // the library its image preloads (kpathsea-guard.c), and gVisor has no Landlock.
    let app = TestApp::spawn_with(|config| {
        config.sandbox_runtime = "runsc".into();
        config.sandbox_memory_mb = 256;
    })
    .await;
    let job = app
        .compile(serde_json::json!({ "input_latex": texfleet_e2e::HELLO }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");

    // Under gVisor the host kernel's OOM killer meets gVisor's own kernel, not the compile: the
    // job must still end as a memory limit, not be retried as a container killed from outside.
    let bomb = app
        .compile(serde_json::json!({ "engine": "lualatex", "input_latex": MEMORY_BOMB }))
        .await;
    assert_eq!(bomb["status"], "Failed", "{bomb:#}");
    assert_eq!(bomb["error"]["code"], "memory_limit", "{bomb:#}");
    assert_eq!(app.job_column::<i32>(bomb.id(), "attempts").await, 1);

    let checks = texfleet_scheduler::check_sandbox(&app.config)
        .await
        .unwrap();
    let failed: Vec<_> = checks.iter().filter(|c| !c.ok).collect();
    assert!(
        failed.is_empty(),
        "layers missing under gVisor: {failed:#?}"
    );
    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    for layer in [
        "seccomp_refuses_sockets",
        "cannot_signal_supervisor",
        "cannot_reach_driver_descriptors",
        "gvisor_keeps_seccomp",
    ] {
        assert!(names.contains(&layer), "{layer} was not checked: {names:?}");
    }
}

/// A container of `image` running `cmd` under a memory limit, started and run to its end
/// (`kill` ends it from outside first). Returns its id and exit code.
async fn ended_container(
    docker: &bollard::Docker,
    image: &str,
    cmd: &[&str],
    kill: bool,
) -> (String, i64) {
    let body = bollard::models::ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(cmd.iter().map(|arg| arg.to_string()).collect()),
        user: Some("0:0".into()),
        network_disabled: Some(true),
        host_config: Some(bollard::models::HostConfig {
            memory: Some(64 << 20),
            memory_swap: Some(64 << 20),
            ..Default::default()
        }),
        ..Default::default()
    };
    let id = docker.create_container(None, body).await.unwrap().id;
    docker.start_container(&id, None).await.unwrap();
    if kill {
        docker.kill_container(&id, None).await.unwrap();
    }
    let mut wait = docker.wait_container(&id, None);
    while futures::StreamExt::next(&mut wait).await.is_some() {}
    let state = docker
        .inspect_container(&id, None)
        .await
        .unwrap()
        .state
        .unwrap();
    (id, state.exit_code.unwrap())
}

/// The engine's OOM flag races a container's exit (under gVisor, on a loaded machine, it lost
/// and a memory bomb was retried as a container killed from outside), so on a kill without
/// the flag the scheduler asks the engine's events: an OOM kill has one, a plain kill none.
#[tokio::test(flavor = "multi_thread")]
async fn the_engines_events_tell_an_oom_kill_from_a_kill_from_outside() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let docker = docker_engine().await;
    let image = app.default_image();
    // One endless line: tail holds it all.
    let (oom, oom_exit) = ended_container(&docker, image, &["tail", "/dev/zero"], false).await;
    let (killed, killed_exit) = ended_container(&docker, image, &["sleep", "300"], true).await;
    assert_eq!((oom_exit, killed_exit), (137, 137));
    assert!(texfleet_scheduler::oom_event_reported(&docker, &oom).await);
    assert!(!texfleet_scheduler::oom_event_reported(&docker, &killed).await);
    for container in [oom, killed] {
        let options = bollard::query_parameters::RemoveContainerOptionsBuilder::default()
            .force(true)
            .build();
        docker
            .remove_container(&container, Some(options))
            .await
            .unwrap();
    }
}

/// Settings that would switch a limit off are refused before the scheduler does anything.
#[tokio::test(flavor = "multi_thread")]
async fn a_scheduler_refuses_settings_that_switch_a_limit_off() {
    for (name, adjust) in [
        (
            "sandbox_memory_mb",
            (|c: &mut Config| c.sandbox_memory_mb = 0) as fn(&mut Config),
        ),
        ("sandbox_pids_limit", |c: &mut Config| {
            c.sandbox_pids_limit = -1
        }),
        ("sandbox_cpus", |c: &mut Config| c.sandbox_cpus = 0.0),
    ] {
        let mut config = Config::load(None).unwrap();
        adjust(&mut config);
        let refused = texfleet_scheduler::run(config, std::future::pending())
            .await
            .expect_err("the scheduler started");
        let message = format!("{refused:#}");
        assert!(
            message.contains(name) && message.contains("switch its limit off"),
            "{message}"
        );
    }
}
