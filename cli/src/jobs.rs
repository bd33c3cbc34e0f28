//! The client commands about jobs already submitted: `status`, `log`, `cancel` and `list`,
//! each printing text for people or, with `--json`, the API's JSON for scripts.

use crate::client::{is_terminal, Client, ServerArgs};
use crate::exit::Exit;
use crate::local_files::write_replacing;
use crate::report::{self, Locations, OutputArgs, OutputFormat};
use clap::builder::PossibleValuesParser;
use serde_json::{json, Value};
use std::path::PathBuf;
use strum::VariantArray as _;
use texfleet_core::model::JobStatus;
use uuid::Uuid;

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The job's id (`texfleet compile` prints it).
    id: Uuid,
    /// Wait until the job has ended, then exit as `compile` does (1 unless it Succeeded).
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct LogArgs {
    /// The job's id.
    id: Uuid,
    /// Write the log to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    format: OutputArgs,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct CancelArgs {
    /// The job's id.
    id: Uuid,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Only jobs in this state.
    #[arg(long, value_parser = PossibleValuesParser::new(JobStatus::VARIANTS.iter().map(|s| s.as_str())))]
    status: Option<String>,
    /// How many jobs, newest first (1 to 100).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    limit: u32,
    /// Start after this point: the `next_cursor` of an earlier page (shown with --json).
    #[arg(long, value_name = "CURSOR")]
    cursor: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn status(args: StatusArgs) -> anyhow::Result<Exit> {
    let client = Client::new(&args.server);
    let id = args.id.to_string();
    let job = if args.wait {
        client.wait_terminal(&id).await?
    } else {
        client.job(&id, 0, crate::client::Until::Terminal).await?
    };
    let format = args.output.format();
    match format {
        OutputFormat::Json => println!("{job}"),
        OutputFormat::Text | OutputFormat::Github => println!("{}", summary(&job)),
    }
    report::diagnostics(&job, format, &Locations::default());
    Ok(match (args.wait, job["status"].as_str()) {
        (true, Some("Succeeded")) | (false, _) => Exit::Success,
        (true, _) => Exit::DocumentFailed,
    })
}

pub async fn log(args: LogArgs) -> anyhow::Result<Exit> {
    let client = Client::new(&args.server);
    let id = args.id.to_string();
    let log = client.output(&id, "log").await?;
    match (&args.output, args.format.format()) {
        (Some(path), _) => write_replacing(path, &log)?,
        (None, OutputFormat::Json) => {
            println!(
                "{}",
                json!({ "id": id, "log": String::from_utf8_lossy(&log) })
            )
        }
        (None, _) => print_untrusted(&String::from_utf8_lossy(&log)),
    }
    Ok(Exit::Success)
}

pub async fn cancel(args: CancelArgs) -> anyhow::Result<Exit> {
    let client = Client::new(&args.server);
    let job = client.cancel(&args.id.to_string()).await?;
    match args.output.format() {
        OutputFormat::Json => println!("{job}"),
        _ => println!("{}", summary(&job)),
    }
    Ok(Exit::Success)
}

pub async fn list(args: ListArgs) -> anyhow::Result<Exit> {
    let client = Client::new(&args.server);
    let page = client
        .list(args.status.as_deref(), args.limit, args.cursor.as_deref())
        .await?;
    match args.output.format() {
        OutputFormat::Json => println!("{page}"),
        _ => {
            for job in page["items"].as_array().into_iter().flatten() {
                println!("{}", summary(job));
            }
            if let Some(cursor) = page["next_cursor"].as_str() {
                eprintln!("more: --cursor {cursor}");
            }
        }
    }
    Ok(Exit::Success)
}

/// Prints text the document wrote (a log): without the control characters a terminal would
/// obey (escape sequences), and, under GitHub Actions, with the runner's workflow commands
/// switched off around it, so that a line of the log cannot pose as one (`::add-mask::`).
fn print_untrusted(text: &str) {
    let shown: String = text
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if c.is_control() => char::REPLACEMENT_CHARACTER,
            c => c,
        })
        .collect();
    if std::env::var_os("GITHUB_ACTIONS").is_some() {
        let token = Uuid::new_v4().simple().to_string();
        println!("::stop-commands::{token}");
        print!("{shown}");
        println!("\n::{token}::");
    } else {
        print!("{shown}");
    }
}

/// One line a person reads: id, status, engine, when, how long, and why it failed.
fn summary(job: &Value) -> String {
    let text = |field: &str| job[field].as_str().unwrap_or("-").to_string();
    let mut line = format!(
        "{}  {:<9}  {:<8}  {}",
        text("id"),
        text("status"),
        text("engine"),
        text("created_at")
    );
    if let Some(ms) = job["duration_ms"].as_i64() {
        line.push_str(&format!("  {ms} ms"));
    }
    if is_terminal(job) {
        if let Some(code) = job["error"]["code"].as_str() {
            line.push_str(&format!(
                "  {code}: {}",
                job["error"]["message"].as_str().unwrap_or("")
            ));
        }
    }
    line
}
