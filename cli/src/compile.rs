//! `texfleet compile`: the client a person or a CI job uses. Sends a document (and the project
//! folder around it by content hash, uploading only what the project lacks: [`upload`]), shows the job's
//! progress as the server reports it, prints its diagnostics the way a compiler does, downloads
//! the PDF (and the log when something went wrong) and exits with a code a script can act on
//! (exit.rs). The server goes on through LaTeX errors, as editors expect, so a broken document
//! may still yield a PDF; the CLI fails it unless `--allow-errors`, as a CI job must.

use crate::api_error::ApiError;
use crate::client::{is_terminal, job_id, Client, ServerArgs, Until};
use crate::exit::{Exit, Failure};
use crate::local_files::write_replacing;
use crate::package_check;
use crate::project_files::{self, ProjectFile};
use crate::report::{self, Locations, OutputArgs, OutputFormat};
use crate::upload::{self, ByHash};
use anyhow::Context as _;
use clap::builder::PossibleValuesParser;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;
use strum::VariantArray as _;
use texfleet_core::model::Engine;

#[derive(clap::Args)]
pub struct CompileArgs {
    /// The main document (a .tex file).
    main: PathBuf,
    /// The project folder to send with the main document, which must be inside it. Its files
    /// keep their paths relative to it, and the compile runs in the main document's folder
    /// with the folder's top level searched too. Hidden files, what .gitignore excludes, TeX's
    /// auxiliary files and earlier outputs are not sent.
    #[arg(long, value_name = "DIR")]
    files: Option<PathBuf>,
    /// The TeX engine.
    #[arg(long, default_value = "pdflatex",
          value_parser = PossibleValuesParser::new(Engine::VARIANTS.iter().map(|e| e.as_str())))]
    engine: String,
    /// The TeX Live year to compile with (`texfleet info` lists the server's); default: the
    /// server's default year.
    #[arg(long, value_name = "YEAR", value_parser = year)]
    texlive: Option<String>,
    /// Where to write the PDF (for `preview`, the PNG); default: the main document's name
    /// with .pdf (.png). The log goes beside it (.log) when the compile failed or had errors.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Seconds the compile may take (the server's default when omitted; `GET /info` tells
    /// its maximum).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..))]
    timeout: Option<u32>,
    /// Stop at the first LaTeX error: the job fails (exit 1), no PDF is made, the log is
    /// saved.
    #[arg(long)]
    halt_on_error: bool,
    /// Exit 0 when the document compiled to a PDF despite LaTeX errors (default: exit 1 after
    /// writing the PDF and the log).
    #[arg(long)]
    allow_errors: bool,
    /// Compile afresh even when the project has an identical earlier result to reuse.
    #[arg(long)]
    no_cache: bool,
    /// A fast preview: every graphic drawn as a box with its file name.
    #[arg(long)]
    draft: bool,
    /// Count the words with TeX Live's texcount, as editors show them.
    #[arg(long)]
    wordcount: bool,
    /// Check the sources with chktex first: `warn` reports its findings with the
    /// diagnostics, `error` fails the job, without compiling it, when chktex finds anything.
    #[arg(long, value_parser = ["warn", "error"])]
    check: Option<String>,
    /// Render the first page as a PNG this many pixels wide, written beside the PDF (.png).
    #[arg(long, value_name = "PIXELS", value_parser = clap::value_parser!(u32).range(16..=1200))]
    thumbnail_width: Option<u32>,
    #[command(flatten)]
    output_format: OutputArgs,
    #[command(flatten)]
    server: ServerArgs,
}

/// A TeX Live year as the server names them: four digits.
fn year(value: &str) -> Result<String, String> {
    match value.len() == 4 && value.bytes().all(|b| b.is_ascii_digit()) {
        true => Ok(value.to_string()),
        false => Err("a TeX Live year is four digits, such as 2024".into()),
    }
}

/// Compiles and says how the command ends.
pub async fn run(args: CompileArgs) -> anyhow::Result<Exit> {
    compile(args, Keep::Pdf).await
}

/// Counts the words, by a compile that keeps no PDF, and says how the command ends.
pub async fn count_words(mut args: CompileArgs) -> anyhow::Result<Exit> {
    args.wordcount = true;
    compile(args, Keep::WordCount).await
}

/// Renders the first page as a PNG, by a compile that keeps no PDF, and says how the command
/// ends.
pub async fn preview(mut args: CompileArgs) -> anyhow::Result<Exit> {
    args.thumbnail_width.get_or_insert(PREVIEW_WIDTH);
    compile(args, Keep::Thumbnail).await
}

/// The width of `texfleet preview`'s image when none is asked for.
const PREVIEW_WIDTH: u32 = 400;

/// What the command keeps of a compile besides its diagnostics (and its log when it failed).
#[derive(PartialEq)]
enum Keep {
    /// The PDF, written to a file (and the thumbnail beside it, when asked for).
    Pdf,
    /// The word count, printed on stdout.
    WordCount,
    /// The first page's thumbnail, written to a file.
    Thumbnail,
}

async fn compile(args: CompileArgs, keep: Keep) -> anyhow::Result<Exit> {
    let format = args.output_format.format();
    let default_extension = match keep {
        Keep::Thumbnail => "png",
        _ => "pdf",
    };
    let pdf_path = args
        .output
        .clone()
        .unwrap_or_else(|| args.main.with_extension(default_extension));
    let thumbnail_path = match keep {
        Keep::Thumbnail => Some(pdf_path.clone()),
        _ => args.thumbnail_width.map(|_| pdf_path.with_extension("png")),
    };
    // What this command writes is never sent on its next run.
    let written: Vec<PathBuf> = [Some(pdf_path.clone()), thumbnail_path.clone()]
        .into_iter()
        .flatten()
        .collect();
    let (files, locations) = project(&args, &written)?;
    let client = Client::new(&args.server);
    let main = locations.main.clone().map(|(project, _)| project);
    let mut metadata = json!({ "project_id": client.project(), "main": main,
                               "engine": args.engine, "halt_on_error": args.halt_on_error,
                               "draft": args.draft, "wordcount": args.wordcount,
                               "check": args.check, "cache": !args.no_cache,
                               "thumbnail_width": args.thumbnail_width });
    if let Some(timeout) = args.timeout {
        metadata["timeout_seconds"] = json!(timeout);
    }
    if let Some(year) = &args.texlive {
        metadata["texlive"] = json!(year);
    }
    let contents = files
        .iter()
        .map(|file| {
            let content = std::fs::read(&file.local)
                .with_context(|| format!("reading {}", file.local.display()))?;
            Ok((file.path.clone(), content))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    package_check::warn_about_missing(&client, &contents, args.texlive.as_deref()).await;

    let started = Instant::now();
    let progress = |status: &str, id: &str| {
        if format != OutputFormat::Json {
            eprintln!(
                "[{:>6.1}s] {status}  (job {id})",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let key = uuid::Uuid::new_v4().to_string();
    // A folder goes by hash: only the files the project lacks are uploaded.
    let by_hash = match args.files.is_some() {
        true => {
            let quiet = format == OutputFormat::Json;
            upload::submit_by_hash(&client, &metadata, &contents, &key, quiet).await
        }
        false => Ok(ByHash::Unsupported),
    };
    let submitted = match by_hash {
        Ok(ByHash::Submitted(job, _)) => Ok(job),
        Ok(ByHash::Unsupported) => client.submit_files(&metadata, &contents, &key).await,
        Err(error) => Err(error),
    };
    let job = submitted.map_err(|error| name_local_files(error, &files))?;
    let id = job_id(&job)?;
    progress(job["status"].as_str().unwrap_or("?"), &id);
    let job = tokio::select! {
        job = follow(&client, job, &id, &progress) => job?,
        _ = tokio::signal::ctrl_c() => {
            client.cancel(&id).await.ok();
            if format != OutputFormat::Json {
                eprintln!("interrupted: cancelled job {id}");
            }
            return Ok(Exit::Interrupted);
        }
    };

    report::diagnostics(&job, format, &locations);
    let errors = report::error_count(&job);
    let succeeded = job["status"] == "Succeeded";
    let mut written_pdf = None;
    let write = |path: &Path, bytes: &[u8]| {
        write_replacing(path, bytes)?;
        if format != OutputFormat::Json {
            eprintln!(
                "wrote {} ({} bytes) in {:.1}s",
                path.display(),
                bytes.len(),
                started.elapsed().as_secs_f64()
            );
        }
        anyhow::Ok(Some(path.to_path_buf()))
    };
    if succeeded && keep == Keep::Pdf {
        written_pdf = write(&pdf_path, &client.output(&id, "pdf").await?)?;
    }
    let mut written_thumbnail = None;
    if let (Some(path), true) = (&thumbnail_path, job["links"]["thumbnail"].is_string()) {
        written_thumbnail = write(path, &client.output(&id, "thumbnail").await?)?;
    }
    let missing = match keep {
        Keep::WordCount => !job["word_count"].is_object(),
        Keep::Thumbnail => written_thumbnail.is_none(),
        Keep::Pdf => false,
    };
    let failed = !succeeded || (errors > 0 && !args.allow_errors) || missing;
    let mut written_log = None;
    if failed && job["links"]["log"].is_string() {
        let log_path = pdf_path.with_extension("log");
        let log = client.output(&id, "log").await?;
        write_replacing(&log_path, &log)?;
        written_log = Some(log_path);
    }
    if format == OutputFormat::Json {
        println!(
            "{}",
            json!({ "job": job, "pdf": written_pdf, "thumbnail": written_thumbnail,
                    "log": written_log })
        );
    } else {
        if !succeeded {
            let error = &job["error"];
            eprintln!(
                "error: the compile ended {}: {} ({})",
                job["status"].as_str().unwrap_or("?"),
                error["message"].as_str().unwrap_or(""),
                error["code"].as_str().unwrap_or("")
            );
        } else if failed {
            eprintln!(
                "error: the document has {errors} LaTeX error(s); --allow-errors accepts them"
            );
        }
        if let Some(log) = &written_log {
            eprintln!("the log is in {}", log.display());
        }
        if keep == Keep::WordCount {
            report::word_count(&job, &mut std::io::stdout());
        } else if args.wordcount {
            report::word_count(&job, &mut std::io::stderr());
        }
    }
    Ok(if failed {
        Exit::DocumentFailed
    } else {
        Exit::Success
    })
}

/// Follows the job until it is terminal, reporting when it starts: the server answers as soon
/// as the job leaves `Queued`, then when it ends.
async fn follow(
    client: &Client,
    mut job: Value,
    id: &str,
    progress: &impl Fn(&str, &str),
) -> anyhow::Result<Value> {
    if is_terminal(&job) {
        return Ok(job);
    }
    while job["status"] == "Queued" {
        job = client.job(id, 60, Until::Started).await?;
    }
    if job["status"] == "Running" {
        progress("Running", id);
        job = client.wait_terminal(id).await?;
    }
    progress(job["status"].as_str().unwrap_or("?"), id);
    Ok(job)
}

/// The files to send and where they are: the folder's (the main document among them), or the
/// main document alone.
fn project(
    args: &CompileArgs,
    written: &[PathBuf],
) -> anyhow::Result<(Vec<ProjectFile>, Locations)> {
    let given = args.main.display().to_string();
    let (files, root) = match &args.files {
        Some(dir) => (
            project_files::collect(dir, &args.main, written)?,
            Some(dir.clone()),
        ),
        None => {
            // A link could send a file of the user's own (a key, a credential) as the
            // document; with --files, links are never followed either.
            match std::fs::symlink_metadata(&args.main) {
                Ok(meta) if meta.is_file() => {}
                Ok(_) => {
                    return Err(Failure::usage(format!(
                        "{given}: not a regular file (links are not followed)"
                    )))
                }
                Err(_) => return Err(Failure::usage(format!("{given}: no such file"))),
            }
            let name = args.main.file_name().unwrap_or_default().to_string_lossy();
            let plain = name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && !name.starts_with(['.', '-']);
            let path = if plain {
                name.into_owned()
            } else {
                "main.tex".into()
            };
            let local = args.main.clone();
            (vec![ProjectFile { path, local }], None)
        }
    };
    let main_local = args.main.canonicalize()?;
    let main = files
        .iter()
        .find(|f| f.local.canonicalize().ok().as_ref() == Some(&main_local))
        .map(|f| f.path.clone())
        .unwrap_or_default();
    if main.contains(['+', ' ']) {
        return Err(Failure::usage(format!(
            "{given}: the main document's name may not contain '+' or spaces; rename it"
        )));
    }
    let locations = Locations {
        root,
        main: Some((main, given)),
    };
    Ok((files, locations))
}

/// A `422` names files by their place in the request (`files[2].path`); the user knows them by
/// their local paths.
fn name_local_files(error: anyhow::Error, files: &[ProjectFile]) -> anyhow::Error {
    match error.downcast::<ApiError>() {
        Ok(mut api) => {
            for (field, _) in &mut api.fields {
                let index = field
                    .strip_prefix("files[")
                    .and_then(|rest| rest.split(']').next())
                    .and_then(|digits| digits.parse::<usize>().ok());
                if let Some(file) = index.and_then(|i| files.get(i)) {
                    *field = file.local.display().to_string();
                }
            }
            api.into()
        }
        Err(error) => error,
    }
}
