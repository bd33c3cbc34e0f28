//! `texfleet compile`: the client. Submits a document (and a folder of files beside it),
//! shows the job's progress, prints its diagnostics the way a compiler does
//! (`file:line: error: message`), downloads the PDF and exits non-zero when the compile failed
//! or, unless `--allow-errors`, when the document has errors (the server goes on through
//! errors, as editors do, so a broken document may still yield a PDF; a CI job must fail).

use crate::client::{job_id, Client, ServerArgs};
use anyhow::Context as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct CompileArgs {
    /// The main document.
    main: PathBuf,
    /// A folder whose files (images, chapters, bibliographies) are sent along, at their paths
    /// relative to it.
    #[arg(long)]
    files: Option<PathBuf>,
    #[arg(long, default_value = "pdflatex")]
    engine: String,
    /// Where to write the PDF; default: the main document's name with `.pdf`.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Seconds the compile may take (the server's default and maximum apply).
    #[arg(long)]
    timeout: Option<u32>,
    /// Stop the compile at the first LaTeX error: the job fails and no PDF is made.
    #[arg(long)]
    halt_on_error: bool,
    /// Exit 0 when the document compiled to a PDF despite errors (default: exit 1, after
    /// writing the PDF).
    #[arg(long)]
    allow_errors: bool,
    #[command(flatten)]
    server: ServerArgs,
}

/// Compiles and returns whether the job succeeded.
pub async fn run(args: CompileArgs) -> anyhow::Result<bool> {
    let source = std::fs::read_to_string(&args.main)
        .with_context(|| format!("reading {}", args.main.display()))?;
    let client = Client::new(&args.server);
    let mut body = json!({ "project_id": client.project(), "input_latex": source, "engine": args.engine,
                           "halt_on_error": args.halt_on_error });
    if let Some(timeout) = args.timeout {
        body["timeout_seconds"] = json!(timeout);
    }
    if let Some(dir) = &args.files {
        body["files"] = Value::Array(collect_files(dir, &args.main)?);
    }
    let started = Instant::now();
    let mut job = client.submit(&body, None).await?;
    let id = job_id(&job)?;
    let mut shown = String::new();
    loop {
        let status = job["status"].as_str().unwrap_or("?").to_string();
        if status != shown {
            eprintln!(
                "[{:>6.1}s] {status}  (job {id})",
                started.elapsed().as_secs_f64()
            );
            shown = status.clone();
        }
        if !matches!(status.as_str(), "Queued" | "Running") {
            break;
        }
        // The server holds the answer until the job changes or two seconds pass: no busy loop.
        job = client.job(&id, 2).await?;
    }

    let shown_name = args.main.display().to_string();
    let diagnostics = job["diagnostics"].as_array().cloned().unwrap_or_default();
    for diagnostic in &diagnostics {
        eprintln!("{}", format_diagnostic(diagnostic, &shown_name));
    }
    let errors = diagnostics
        .iter()
        .filter(|d| d["severity"] == "error")
        .count();
    if job["status"] != "Succeeded" {
        let error = &job["error"];
        eprintln!(
            "error: the compile ended {}: {} ({})",
            job["status"].as_str().unwrap_or("?"),
            error["message"].as_str().unwrap_or(""),
            error["code"].as_str().unwrap_or("")
        );
        return Ok(false);
    }
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| args.main.with_extension("pdf"));
    let pdf = client.pdf(&id).await?;
    std::fs::write(&output, &pdf).with_context(|| format!("writing {}", output.display()))?;
    eprintln!(
        "wrote {} ({} bytes) in {:.1}s",
        output.display(),
        pdf.len(),
        started.elapsed().as_secs_f64()
    );
    if errors > 0 && !args.allow_errors {
        eprintln!("error: the document has {errors} LaTeX error(s); --allow-errors accepts them");
        return Ok(false);
    }
    Ok(true)
}

/// `file:line: error: message`, as compilers print them (and as problem matchers read them);
/// the server's `main.tex` is shown under the name of the file the user gave, and a diagnostic
/// of no known file gets no location rather than the main document's.
fn format_diagnostic(diagnostic: &Value, main_name: &str) -> String {
    let file = match diagnostic["file"].as_str() {
        Some("main.tex") => Some(main_name),
        other => other,
    };
    let location = match (file, diagnostic["line"].as_u64()) {
        (Some(file), Some(line)) => format!("{file}:{line}: "),
        (Some(file), None) => format!("{file}: "),
        (None, _) => String::new(),
    };
    let severity = if diagnostic["severity"] == "warning" {
        "warning"
    } else {
        "error"
    };
    format!(
        "{location}{severity}: {}",
        diagnostic["message"].as_str().unwrap_or("")
    )
}

/// Every regular file below `dir` except the main document and hidden files, at its path
/// relative to `dir`, base64-encoded (binary files travel unchanged).
fn collect_files(dir: &Path, main: &Path) -> anyhow::Result<Vec<Value>> {
    let main = main.canonicalize().ok();
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?
        {
            let path = entry?.path();
            let hidden = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'));
            if hidden || path.canonicalize().ok() == main {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else if path.is_file() {
                let relative = path.strip_prefix(dir)?.to_string_lossy().into_owned();
                files.push(json!({ "path": relative, "content_base64": BASE64.encode(std::fs::read(&path)?) }));
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_read_like_a_compiler_s() {
        let error = json!({ "severity": "error", "file": "main.tex", "line": 4, "message": "Undefined control sequence." });
        assert_eq!(
            format_diagnostic(&error, "thesis.tex"),
            "thesis.tex:4: error: Undefined control sequence."
        );
        let warning = json!({ "severity": "warning", "file": "ch1.tex", "line": null, "message": "Overfull" });
        assert_eq!(
            format_diagnostic(&warning, "thesis.tex"),
            "ch1.tex: warning: Overfull"
        );
        let nowhere = json!({ "severity": "warning", "file": null, "line": 5, "message": "Citation `x' undefined" });
        assert_eq!(
            format_diagnostic(&nowhere, "thesis.tex"),
            "warning: Citation `x' undefined"
        );
    }
}
