//! Throughput at saturation: hello and the article submitted all at once, beside the floor's
//! and the peer's on the same number of lanes, with the busy CPU per job of the whole machine
//! ([`cpu`]); with `--perf`, the service's and the peer's CPU per job, process by process
//! ([`profile`]).

use super::phases::parse_time;
use super::{cpu, floor, profile, request, BenchArgs, Document, ARTICLE, HELLO};
use crate::client::{job_id, Client};
use anyhow::{ensure, Context as _};
use serde_json::json;
use texfleet_core::Config;
use texfleet_scheduler::Sandbox;
use time::OffsetDateTime;

/// Hello's and the article's throughput for the service, the floor and the peer.
pub(super) async fn throughputs(
    config: &Config,
    args: &BenchArgs,
    sandbox: &Sandbox,
    slots: usize,
    client: &Client,
    figures: &mut super::Figures,
) -> anyhow::Result<()> {
    for (document, jobs) in [
        (&HELLO, args.throughput_jobs),
        (&ARTICLE, (args.throughput_jobs / 5).max(2)),
    ] {
        let perf = args.perf.as_deref();
        let recording = profile::start_if(perf, &format!("{}-service", document.name)).await?;
        let cpu_before = cpu::busy();
        let service_rate = service_throughput(client, document, jobs).await?;
        let service_cpu = cpu::ms_per_job(cpu_before, jobs);
        let service_processes = profile::per_job_if(recording, jobs).await?;
        let floor = floor::throughput(config, sandbox, document, slots, jobs.min(40), true).await?;
        let recording = profile::start_if(perf, &format!("{}-peer", document.name)).await?;
        let peer = floor::throughput(config, sandbox, document, slots, jobs.min(40), false).await?;
        let peer_processes = profile::per_job_if(recording, jobs.min(40)).await?;
        let (floor_rate, peer_rate) = (floor.per_second, peer.per_second);
        println!(
            "\nthroughput at saturation ({jobs} {} jobs): {service_rate:.2} jobs/s | floor {floor_rate:.2} jobs/s on {slots} containers ({:.0}%) | peer {peer_rate:.2} jobs/s ({:.2}x)",
            document.name,
            100.0 * service_rate / floor_rate,
            service_rate / peer_rate
        );
        println!(
            "  busy CPU per job, whole machine: service {service_cpu:.0} ms | floor {:.0} ms (compile and removal) | peer {:.0} ms | starting a container beforehand (create, attach, start) {:.0} ms",
            floor.cpu_ms_per_job, peer.cpu_ms_per_job, floor.start_cpu_ms
        );
        profile::print("service", &service_processes);
        profile::print("peer", &peer_processes);
        figures.throughput.push(json!({
            "document": document.name, "jobs": jobs, "service_per_second": service_rate,
            "floor_per_second": floor_rate, "peer_per_second": peer_rate,
            "service_cpu_ms_per_job": service_cpu, "floor_cpu_ms_per_job": floor.cpu_ms_per_job,
            "peer_cpu_ms_per_job": peer.cpu_ms_per_job, "container_start_cpu_ms": floor.start_cpu_ms,
            "service_cpu_ms_per_job_by_process": profile::json(&service_processes),
            "peer_cpu_ms_per_job_by_process": profile::json(&peer_processes),
        }));
    }
    Ok(())
}

/// Jobs per second from the first submission to the last job's end, by the server's clock.
async fn service_throughput(
    client: &Client,
    document: &Document,
    jobs: usize,
) -> anyhow::Result<f64> {
    let mut ids = Vec::new();
    for _ in 0..jobs {
        ids.push(job_id(
            &client
                .submit(&request(client, document, None, false), None)
                .await?,
        )?);
    }
    let mut first_created = None;
    let mut last_finished = None;
    for id in &ids {
        let job = client.wait_terminal(id).await?;
        ensure!(
            job["status"] == "Succeeded",
            "a throughput job ended {}",
            job["status"]
        );
        let created = parse_time(&job["created_at"])?;
        let finished = parse_time(&job["finished_at"])?;
        first_created = Some(first_created.map_or(created, |t: OffsetDateTime| t.min(created)));
        last_finished = Some(last_finished.map_or(finished, |t: OffsetDateTime| t.max(finished)));
    }
    let span =
        (last_finished.context("no jobs")? - first_created.context("no jobs")?).as_seconds_f64();
    Ok(ids.len() as f64 / span)
}
