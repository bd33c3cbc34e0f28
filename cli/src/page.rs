//! `texfleet page`: one page of a Succeeded job's PDF as a PNG, as an editor shows it (the
//! server renders it the first time it is asked for, and keeps it).

use crate::client::{Client, ServerArgs};
use crate::exit::Exit;
use crate::local_files::write_replacing;
use std::path::PathBuf;
use uuid::Uuid;

#[derive(clap::Args)]
pub struct PageArgs {
    /// The job's id.
    id: Uuid,
    /// The page, from 1.
    #[arg(value_parser = clap::value_parser!(u32).range(1..=100_000))]
    page: u32,
    /// The image's width in pixels; its height follows the page's shape.
    #[arg(long, default_value_t = 800, value_parser = clap::value_parser!(u32).range(16..=1200))]
    width: u32,
    /// Where to write the PNG; default: page-<PAGE>.png in the current folder.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(args: PageArgs) -> anyhow::Result<Exit> {
    let client = Client::new(&args.server);
    let (page, width) = (args.page, args.width);
    let png = client
        .output(&args.id.to_string(), &format!("pages/{page}?width={width}"))
        .await?;
    let path = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("page-{page}.png")));
    write_replacing(&path, &png)?;
    eprintln!("wrote {} ({} bytes)", path.display(), png.len());
    Ok(Exit::Success)
}
