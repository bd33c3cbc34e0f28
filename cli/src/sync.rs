//! `texfleet sync`: an editor's SyncTeX questions about a Succeeded job, from the terminal:
//! where a source line is in the PDF (`--line main.tex:12`), or which line a point of a page
//! shows (`--at 1:150:130`, page and points from the page's top left corner).

use crate::client::{Client, ServerArgs};
use crate::exit::Exit;
use crate::report::{OutputArgs, OutputFormat};
use anyhow::Context as _;
use uuid::Uuid;

#[derive(clap::Args)]
#[group(id = "question", required = true, multiple = false, args = ["line", "at"])]
pub struct SyncArgs {
    /// The job's id.
    id: Uuid,
    /// A line of a project file, FILE:LINE: the boxes of the PDF it made.
    #[arg(long, value_name = "FILE:LINE")]
    line: Option<String>,
    /// A point of the PDF, PAGE:H:V (points from the page's top left corner): the source line
    /// it shows.
    #[arg(long, value_name = "PAGE:H:V")]
    at: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(args: SyncArgs) -> anyhow::Result<Exit> {
    let client = Client::new(&args.server);
    let id = args.id;
    let path = match (&args.line, &args.at) {
        (Some(line), _) => {
            let (file, number) = line
                .rsplit_once(':')
                .context("--line takes FILE:LINE, as main.tex:12")?;
            let query = [("file", file), ("line", number)];
            format!("/compile/{id}/sync/code?{}", encode(&query))
        }
        (None, Some(at)) => {
            let parts: Vec<&str> = at.split(':').collect();
            let [page, h, v] = parts[..] else {
                anyhow::bail!("--at takes PAGE:H:V, as 1:150:130");
            };
            let query = [("page", page), ("h", h), ("v", v)];
            format!("/compile/{id}/sync/pdf?{}", encode(&query))
        }
        (None, None) => unreachable!("clap requires one"),
    };
    let answer = client
        .call(reqwest::Method::GET, &path, None)
        .await?
        .unwrap_or_default();
    match args.output.format() {
        OutputFormat::Json => println!("{answer}"),
        _ => {
            for found in answer["pdf"].as_array().into_iter().flatten() {
                let number = |field: &str| found[field].as_f64().unwrap_or(0.0);
                println!(
                    "page {}  h {:.1}  v {:.1}  width {:.1}  height {:.1}",
                    found["page"],
                    number("h"),
                    number("v"),
                    number("width"),
                    number("height")
                );
            }
            for place in answer["code"].as_array().into_iter().flatten() {
                let file = place["file"].as_str().unwrap_or("-");
                match place["column"].as_u64() {
                    Some(column) => println!("{file}:{}:{column}", place["line"]),
                    None => println!("{file}:{}", place["line"]),
                }
            }
        }
    }
    Ok(Exit::Success)
}

/// `query` as a URL's query string (a file's name may hold `&` or spaces).
fn encode(query: &[(&str, &str)]) -> String {
    let mut url = reqwest::Url::parse("http://query/").expect("a URL");
    url.query_pairs_mut().extend_pairs(query);
    url.query().unwrap_or_default().to_string()
}
