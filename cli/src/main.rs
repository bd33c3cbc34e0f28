//! `texfleet`: one binary for every process and operator task.
//!
//! Servers (`api`, `scheduler`) and operator commands (`migrate`, `project`, `token`) share the
//! configuration of `texfleet_core::Config`: defaults, then `--config` file, then `TEXFLEET_*`.

mod api_error;
mod bench;
mod client;
mod compile;
mod exit;
mod jobs;
mod local_files;
mod package_check;
mod page;
mod project_delete;
mod project_files;
mod report;
mod soak;
mod sync;
mod upload;
mod webhook;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use exit::Exit;
use std::path::PathBuf;
use std::process::ExitCode;
use texfleet_core::{db, token, Config};
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Parser)]
#[command(
    name = "texfleet",
    version,
    about = "A sandboxed LaTeX compile service",
    after_help = exit::EXIT_CODES_HELP
)]
struct Cli {
    /// TOML file with settings (docs/CONFIGURATION.md); TEXFLEET_* variables override it.
    #[arg(long, global = true, env = "TEXFLEET_CONFIG")]
    config: Option<PathBuf>,
    /// Log format of the servers.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "TEXFLEET_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API.
    Api,
    /// Run the scheduler daemon that compiles queued jobs.
    Scheduler,
    /// Apply pending database migrations.
    Migrate,
    /// Manage projects.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Inspect the sandbox.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Submit a mixed load through the API and report how every job ended.
    Soak(soak::SoakArgs),
    /// Compile a document through a texfleet API (URL, token and project from flags or env).
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Compile(compile::CompileArgs),
    /// Count a document's words with TeX Live's texcount, as editors show them: compiles it
    /// through the API like `compile --wordcount`, prints the count and writes no PDF.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Wordcount(compile::CompileArgs),
    /// Render a document's first page as a PNG (`--thumbnail-width`, 400 pixels by default):
    /// compiles it through the API, writes the image (`-o`, default: the document's name with
    /// .png) and no PDF.
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Preview(compile::CompileArgs),
    /// Show a job: its status, timings and diagnostics.
    Status(jobs::StatusArgs),
    /// Print a job's compile log.
    Log(jobs::LogArgs),
    /// Cancel a queued or running job.
    Cancel(jobs::CancelArgs),
    /// Where a source line is in a job's PDF, or which line a point of it shows (SyncTeX).
    Sync(sync::SyncArgs),
    /// Write one page of a Succeeded job's PDF as a PNG (rendered by the server on demand).
    #[command(after_help = exit::EXIT_CODES_HELP)]
    Page(page::PageArgs),
    /// List the project's jobs, newest first.
    List(jobs::ListArgs),
    /// The project's webhook endpoints, their deliveries, and checking a delivery.
    #[command(subcommand)]
    Webhook(webhook::WebhookCommand),
    /// Measure the running stack against the bare compiler (see BENCHMARKS.md).
    Bench(bench::BenchArgs),
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Start a sandbox exactly like a job's and verify each isolation layer from inside it.
    Check,
}

#[derive(Subcommand)]
enum ProjectCommand {
    /// Create a project and print its id.
    Create {
        /// A name for people (the id is what the API uses).
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Delete a project's data: its tokens, jobs, outputs, kept state and project files.
    Delete {
        /// The project's id.
        #[arg(long)]
        project: Uuid,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token for a project and print it; it is shown only this once.
    Create {
        /// The project the token gives access to.
        #[arg(long)]
        project: Uuid,
        /// A name to recognise the token by in `token list`.
        #[arg(long, default_value = "")]
        name: String,
        /// Lifetime such as `30d` or `12h`; no expiry when omitted.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<std::time::Duration>,
    },
    /// List a project's tokens (never the tokens themselves).
    List {
        /// The project whose tokens to list.
        #[arg(long)]
        project: Uuid,
    },
    /// Revoke a token by its id.
    Revoke {
        /// The token's id (`token list` shows it), not the token itself.
        token_id: Uuid,
    },
}

/// Runs the command; an error is one line on stderr (never a backtrace) and an exit code of
/// its class (exit.rs) for the client commands, 1 for the others.
#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let client_command = matches!(
        cli.command,
        Command::Compile(_)
            | Command::Wordcount(_)
            | Command::Preview(_)
            | Command::Status(_)
            | Command::Log(_)
            | Command::Cancel(_)
            | Command::Sync(_)
            | Command::Page(_)
            | Command::List(_)
            | Command::Webhook(_)
    );
    let result = match cli.command {
        Command::Compile(args) => compile::run(args).await,
        Command::Wordcount(args) => compile::count_words(args).await,
        Command::Preview(args) => compile::preview(args).await,
        Command::Status(args) => jobs::status(args).await,
        Command::Log(args) => jobs::log(args).await,
        Command::Cancel(args) => jobs::cancel(args).await,
        Command::Sync(args) => sync::run(args).await,
        Command::Page(args) => page::run(args).await,
        Command::List(args) => jobs::list(args).await,
        Command::Webhook(command) => webhook::run(command).await,
        command => serve_or_operate(cli.config, cli.log_format, command)
            .await
            .map(|()| Exit::Success),
    };
    match result {
        Ok(exit) => exit.into(),
        Err(error) => {
            eprintln!("error: {error:#}");
            if client_command {
                exit::classify(&error).into()
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The servers and the operator's commands, which read the configuration.
async fn serve_or_operate(
    config_file: Option<PathBuf>,
    log_format: LogFormat,
    command: Command,
) -> anyhow::Result<()> {
    let config = Config::load(config_file.as_deref()).context("reading configuration")?;
    match command {
        Command::Api => {
            init_tracing(log_format);
            let listener = texfleet_api::bind(&config.listen_addr)
                .await
                .with_context(|| format!("binding {}", config.listen_addr))?;
            texfleet_api::serve(config, listener, shutdown_signal()).await
        }
        Command::Scheduler => {
            init_tracing(log_format);
            texfleet_scheduler::run(config, shutdown_signal()).await
        }
        Command::Migrate => {
            for migration in db::migrate(&config.database_url).await? {
                println!("applied {migration}");
            }
            Ok(())
        }
        Command::Project(ProjectCommand::Create { name }) => {
            let pool = db::pool(&config, &config.database_url)?;
            let id = db::create_project(&**pool.get().await?, &name).await?;
            println!("{id}");
            Ok(())
        }
        Command::Project(ProjectCommand::Delete { project }) => {
            project_delete::run(&config, project).await
        }
        Command::Token(command) => token_command(&config, command).await,
        Command::Soak(args) => soak::run(args).await,
        Command::Bench(args) => bench::run(config, args).await,
        Command::Sandbox(SandboxCommand::Check) => {
            let checks = texfleet_scheduler::check_sandbox(&config).await?;
            for check in &checks {
                let verdict = if check.ok { "ok  " } else { "FAIL" };
                println!("{verdict}  {:<24}  {}", check.name, check.detail);
            }
            if checks.iter().any(|check| !check.ok) {
                anyhow::bail!("the sandbox is missing isolation layers");
            }
            Ok(())
        }
        Command::Compile(_)
        | Command::Status(_)
        | Command::Log(_)
        | Command::Cancel(_)
        | Command::Sync(_)
        | Command::Page(_)
        | Command::Wordcount(_)
        | Command::Preview(_)
        | Command::List(_)
        | Command::Webhook(_) => unreachable!("client commands read no configuration"),
    }
}

async fn token_command(config: &Config, command: TokenCommand) -> anyhow::Result<()> {
    let pool = db::pool(config, &config.database_url)?;
    let client = pool.get().await?;
    match command {
        TokenCommand::Create {
            project,
            name,
            expires_in,
        } => {
            if !db::project_exists(&**client, project).await? {
                anyhow::bail!("no project {project}");
            }
            let secret = token::generate();
            let expires_at = expires_in.map(|lifetime| OffsetDateTime::now_utc() + lifetime);
            let id = db::create_token(&**client, project, &name, &token::hash(&secret), expires_at)
                .await?;
            eprintln!("token {id} for project {project} (shown once; store it now):");
            println!("{secret}");
        }
        TokenCommand::List { project } => {
            println!("{:<36}  {:<20}  {:<8}  last used", "id", "name", "state");
            for token in db::list_tokens(&**client, project).await? {
                let now = OffsetDateTime::now_utc();
                let state = match (token.revoked_at, token.expires_at) {
                    (Some(_), _) => "revoked",
                    (None, Some(expiry)) if expiry <= now => "expired",
                    _ => "live",
                };
                let last_used = token
                    .last_used_at
                    .map_or("never".to_string(), |t| t.to_string());
                println!(
                    "{:<36}  {:<20}  {:<8}  {last_used}",
                    token.id, token.name, state
                );
            }
        }
        TokenCommand::Revoke { token_id } => {
            if !db::revoke_token(&**client, token_id).await? {
                anyhow::bail!("no live token {token_id}");
            }
            println!("revoked {token_id}");
        }
    }
    Ok(())
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutdown requested");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own checks of the definition (unique names, valid defaults), which it otherwise
    /// makes only when a command is first run in a debug build.
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
