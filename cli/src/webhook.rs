//! `texfleet webhook`: a project's webhook endpoints (`add`, `list`, `remove`, `deliveries`)
//! and `verify`, which checks a saved request against a secret as a receiver must, for users
//! debugging theirs.

use crate::client::{Client, ServerArgs};
use crate::exit::{Exit, Failure};
use crate::report::{OutputArgs, OutputFormat};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::PathBuf;
use texfleet_core::webhook::{secret, signature};
use uuid::Uuid;

#[derive(clap::Subcommand)]
pub enum WebhookCommand {
    /// Register an endpoint for the project's finished jobs; prints its secret, shown once.
    Add {
        /// Where to POST the events: an http or https URL on a public address.
        #[arg(value_name = "ENDPOINT_URL")]
        endpoint_url: String,
        /// A note for people (up to 500 characters).
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the project's endpoints and their latest delivery.
    List {
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Remove an endpoint; its pending deliveries go with it.
    Remove {
        /// The endpoint's id (`webhook list` shows it).
        id: Uuid,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// An endpoint's deliveries, newest first: status, attempts, the last answer.
    Deliveries {
        /// The endpoint's id.
        id: Uuid,
        /// How many (1 to 100).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Check a saved delivery against the endpoint's secret, as a receiver must: exit 0 when
    /// the signature is valid, 1 when it is not.
    Verify {
        /// The endpoint's secret (`whsec_...`).
        #[arg(long, env = "TEXFLEET_WEBHOOK_SECRET", hide_env_values = true)]
        secret: String,
        /// A file of the request's headers, one `name: value` per line (as `curl -D` or a
        /// proxy saves them); webhook-id, webhook-timestamp and webhook-signature are read.
        #[arg(long, value_name = "FILE")]
        headers: PathBuf,
        /// A file of the request's body, byte for byte.
        #[arg(long, value_name = "FILE")]
        body: PathBuf,
        /// Accept a timestamp more than five minutes from now (a request saved earlier).
        #[arg(long)]
        any_time: bool,
    },
}

pub async fn run(command: WebhookCommand) -> anyhow::Result<Exit> {
    match command {
        WebhookCommand::Add {
            endpoint_url,
            description,
            output,
            server,
        } => {
            let client = Client::new(&server);
            let body = json!({ "url": endpoint_url, "description": description });
            let endpoint = client
                .call(Method::POST, &webhooks_path(&client), Some(&body))
                .await?
                .unwrap_or_default();
            match output.format() {
                OutputFormat::Json => println!("{endpoint}"),
                _ => {
                    println!("{}", endpoint["secret"].as_str().unwrap_or(""));
                    eprintln!(
                        "endpoint {} registered; its secret (above) is shown only this once",
                        endpoint["id"].as_str().unwrap_or("")
                    );
                }
            }
        }
        WebhookCommand::List { output, server } => {
            let client = Client::new(&server);
            let list = client
                .call(Method::GET, &webhooks_path(&client), None)
                .await?
                .unwrap_or_default();
            match output.format() {
                OutputFormat::Json => println!("{list}"),
                _ => {
                    for endpoint in list["items"].as_array().into_iter().flatten() {
                        println!("{}", endpoint_line(endpoint));
                    }
                }
            }
        }
        WebhookCommand::Remove { id, server } => {
            let client = Client::new(&server);
            let path = format!("{}/{id}", webhooks_path(&client));
            client.call(Method::DELETE, &path, None).await?;
            eprintln!("removed endpoint {id}");
        }
        WebhookCommand::Deliveries {
            id,
            limit,
            output,
            server,
        } => {
            let client = Client::new(&server);
            let path = format!("{}/{id}/deliveries?limit={limit}", webhooks_path(&client));
            let list = client
                .call(Method::GET, &path, None)
                .await?
                .unwrap_or_default();
            match output.format() {
                OutputFormat::Json => println!("{list}"),
                _ => {
                    for delivery in list["items"].as_array().into_iter().flatten() {
                        println!("{}", delivery_line(delivery));
                    }
                }
            }
        }
        WebhookCommand::Verify {
            secret,
            headers,
            body,
            any_time,
        } => return verify(&secret, &headers, &body, any_time),
    }
    Ok(Exit::Success)
}

fn webhooks_path(client: &Client) -> String {
    format!("/projects/{}/webhooks", client.project())
}

fn endpoint_line(endpoint: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or("-").to_string();
    let last = &endpoint["last_delivery"];
    let last = if last.is_null() {
        "no delivery yet".to_string()
    } else {
        format!(
            "last {} {}",
            last["status_code"]
                .as_i64()
                .map_or("-".into(), |s| s.to_string()),
            text(&last["error"])
        )
    };
    format!(
        "{}  {}  {}",
        text(&endpoint["id"]),
        text(&endpoint["url"]),
        last
    )
}

fn delivery_line(delivery: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or("-").to_string();
    format!(
        "{}  {:<9}  job {}  attempts {}  last {} {}",
        text(&delivery["id"]),
        text(&delivery["status"]),
        text(&delivery["job_id"]),
        delivery["attempts"],
        delivery["last_status_code"]
            .as_i64()
            .map_or("-".into(), |s| s.to_string()),
        text(&delivery["last_error"]),
    )
}

/// The Standard Webhooks check, in constant time, of a saved request.
fn verify(secret: &str, headers: &PathBuf, body: &PathBuf, any_time: bool) -> anyhow::Result<Exit> {
    let key = secret::key_of(secret)
        .ok_or_else(|| Failure::usage("the secret must be whsec_ followed by base64"))?;
    let headers = std::fs::read_to_string(headers)?;
    let body = std::fs::read(body)?;
    let header = |name: &str| {
        headers.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    };
    let missing = |name: &str| Failure::usage(format!("the headers have no {name}"));
    let id = header("webhook-id").ok_or_else(|| missing("webhook-id"))?;
    let timestamp: i64 = header("webhook-timestamp")
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| missing("webhook-timestamp (Unix seconds)"))?;
    let signatures = header("webhook-signature").ok_or_else(|| missing("webhook-signature"))?;
    let now = if any_time {
        timestamp
    } else {
        time::OffsetDateTime::now_utc().unix_timestamp()
    };
    match signature::verify(&key, &id, timestamp, &body, &signatures, now) {
        Ok(()) => {
            println!("valid: webhook {id} was signed with this secret");
            Ok(Exit::Success)
        }
        Err(reason) => {
            println!("invalid: {reason}");
            Ok(Exit::DocumentFailed)
        }
    }
}
