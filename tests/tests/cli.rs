//! The `texfleet` client commands as a CI job runs them: the real binary against the real
//! stack, judged by exit codes, stdout, stderr and the files it writes.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    answer_dropping_proxy, pdf_objects_of_subtype, pdf_text, texfleet_command, tiny_png, TestApp,
};

/// A folder of its own for a test's files, removed at the end.
struct Folder(tempfile::TempDir);

impl Folder {
    fn new() -> Folder {
        Folder(tempfile::tempdir().unwrap())
    }

    fn write(&self, path: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    fn path(&self, path: &str) -> PathBuf {
        self.0.path().join(path)
    }
}

/// `texfleet <args>` in `dir`, as the app's project with its token.
fn texfleet(app: &TestApp, dir: &Path, args: &[&str]) -> Output {
    texfleet_at(&app.url, &app.token, app, dir, args)
}

fn texfleet_at(url: &str, token: &str, app: &TestApp, dir: &Path, args: &[&str]) -> Output {
    texfleet_command(app)
        .args(args)
        .current_dir(dir)
        .env("TEXFLEET_URL", url)
        .env("TEXFLEET_TOKEN", token)
        // User errors are one line whatever the environment asks of backtraces.
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_folder_compiles_with_what_it_needs_and_without_what_a_compile_left() {
    let app = TestApp::spawn().await;
    // A job's files are deleted when it ends: a trigger keeps the paths the API stored.
    app.execute("CREATE TABLE stored_paths (path text)").await;
    app.execute(
        "CREATE FUNCTION keep_stored_path() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
         AS $$ BEGIN INSERT INTO public.stored_paths VALUES (NEW.path); RETURN NULL; END $$",
    )
    .await;
    app.execute(
        "CREATE TRIGGER keep_stored_paths AFTER INSERT ON job_files
         FOR EACH ROW EXECUTE FUNCTION keep_stored_path()",
    )
    .await;
    let folder = Folder::new();
    folder.write(
        "paper/main.tex",
        "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\n\
         Intro. \\input{chapters/one} \\input{macros}\n\
         \\includegraphics[width=1cm]{figures/my figure}\n\\end{document}\n",
    );
    folder.write("paper/chapters/one.tex", "From the chapter.");
    folder.write("macros.tex", "From the top level.");
    folder.write("paper/figures/my figure.png", tiny_png());
    // What an earlier compile left, and what git ignores: none of it may be sent (the
    // server refuses output.* beside the main document, and a stale .aux would be read).
    folder.write("paper/main.aux", "\\relax \\gdef\\stale{STALE-AUX}");
    folder.write("paper/main.pdf", "old");
    folder.write("paper/output.log", "old");
    folder.write(".gitignore", "secrets/\n");
    folder.write("secrets/token.tex", "\\input{nothing}");
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "paper/main.tex", "--files", "."],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Queued") && stderr.contains("Running") && stderr.contains("Succeeded"),
        "{stderr}"
    );
    assert_eq!(
        text(&output.stdout),
        "",
        "text mode writes nothing to stdout"
    );
    let pdf = std::fs::read(folder.path("paper/main.pdf")).unwrap();
    let words = pdf_text(&pdf);
    assert!(
        words.contains("From the chapter.") && words.contains("From the top level."),
        "{words}"
    );
    assert_eq!(
        pdf_objects_of_subtype(&pdf, "Image"),
        1,
        "the figure with a space is in"
    );
    let paths: Vec<String> = {
        let client = app.pool.get().await.unwrap();
        client
            .query("SELECT path FROM stored_paths ORDER BY path", &[])
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    assert_eq!(
        paths,
        [
            "macros.tex",
            "paper/chapters/one.tex",
            "paper/figures/my figure.png",
            "paper/main.tex"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_document_fails_the_job_with_its_error_its_context_and_the_log_saved() {
    let app = TestApp::spawn().await;
    let folder = Folder::new();
    folder.write(
        "broken.tex",
        "\\documentclass{article}\n\\begin{document}\n\nHere is \\nosuchmacro\n\\end{document}\n",
    );
    folder.write(
        "flawed.tex",
        "\\documentclass{article}\n\\begin{document}\nText \\nosuchmacro{} goes on.\n\\end{document}\n",
    );
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "broken.tex", "--halt-on-error"],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("broken.tex:4: error: Undefined control sequence.")
            && stderr.contains("l.4 Here is \\nosuchmacro"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches(": error: ").count(),
        1,
        "TeX's fatal-error line is part of the error: {stderr}"
    );
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(!folder.path("broken.pdf").exists());
    let log = std::fs::read_to_string(folder.path("broken.log")).expect("the log is saved");
    assert!(log.contains("Undefined control sequence"), "{log}");

    // A PDF despite errors: written, but a CI job fails unless it accepts the errors.
    let output = texfleet(&app, folder.0.path(), &["compile", "flawed.tex"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--allow-errors"), "{stderr}");
    assert!(folder.path("flawed.pdf").exists() && folder.path("flawed.log").exists());
    std::fs::remove_file(folder.path("flawed.pdf")).unwrap();
    // A language the installation lacks is an error too, though TeX goes on to a PDF.
    folder.write(
        "klingon.tex",
        "\\documentclass{article}\n\\usepackage[klingon]{babel}\n\\begin{document}\nQapla'\n\\end{document}\n",
    );
    let output = texfleet(&app, folder.0.path(), &["compile", "klingon.tex"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: Package babel Error: Unknown option 'klingon'"),
        "{stderr}"
    );
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "flawed.tex", "--allow-errors"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let words = pdf_text(&std::fs::read(folder.path("flawed.pdf")).unwrap());
    assert!(words.contains("goes on."), "{words}");
}

#[tokio::test(flavor = "multi_thread")]
async fn json_and_github_outputs_are_for_machines() {
    let app = TestApp::spawn().await;
    let folder = Folder::new();
    folder.write(
        "paper.tex",
        "\\documentclass{article}\\begin{document}\n\\input{ch/one}\n\\end{document}\n",
    );
    folder.write(
        "ch/one.tex",
        "One, two \\nosuchmacro{} three.\n\\cite{nobody}\n",
    );
    let output = texfleet(
        &app,
        folder.0.path(),
        &[
            "compile",
            "paper.tex",
            "--files",
            ".",
            "--json",
            "--allow-errors",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result: Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(result["job"]["status"], "Succeeded");
    assert!(result["pdf"].as_str().unwrap().ends_with("paper.pdf"));
    let id = result["job"].id().to_string();

    let output = texfleet(
        &app,
        folder.0.path(),
        &["status", &id, "--format", "github"],
    );
    assert_eq!(output.status.code(), Some(0));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("::error file=ch/one.tex,line=1,title=LaTeX::Undefined control sequence.%0Al.1 One, two \\nosuchmacro"),
        "{stdout}"
    );
    // A warning TeX gives no file for carries none, not the main document's.
    assert!(
        stdout.contains("::warning title=LaTeX::Citation `nobody' on page 1 undefined"),
        "{stdout}"
    );

    for (args, check) in [
        (vec!["status", id.as_str(), "--json"], "status"),
        (vec!["list", "--json", "--limit", "1"], "list"),
        (vec!["log", id.as_str(), "--json"], "log"),
    ] {
        let output = texfleet(&app, folder.0.path(), &args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        let value: Value = serde_json::from_slice(&output.stdout).unwrap();
        match check {
            "status" => assert_eq!(value["id"], id.as_str()),
            "list" => assert_eq!(value["items"][0]["id"], id.as_str()),
            _ => assert!(value["log"].as_str().unwrap().contains("nosuchmacro")),
        }
    }
    let output = texfleet(&app, folder.0.path(), &["log", &id]);
    assert!(text(&output.stdout).contains("This is pdfTeX"));
    // Cancelling a finished job is the user's mistake (exit 2), said in one line.
    let output = texfleet(&app, folder.0.path(), &["cancel", &id]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr).trim(),
        "error: the server answered 409 already_finished: the job is already Succeeded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_texlive_year_is_chosen_with_a_flag() {
    let app = TestApp::spawn().await;
    let folder = Folder::new();
    folder.write(
        "doc.tex",
        "\\documentclass{article}\\begin{document}LaTeX of \\fmtversion.\\end{document}",
    );
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "doc.tex", "--texlive", "2022", "--json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["job"]["texlive"], "2022", "{result:#}");
    let pdf = std::fs::read(folder.0.path().join("doc.pdf")).unwrap();
    assert!(texfleet_e2e::pdf_text(&pdf).contains("LaTeX of 2022"));
    // Not a year: refused before anything is sent.
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "doc.tex", "--texlive", "22"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("four digits"));
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_tell_a_script_what_went_wrong() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let folder = Folder::new();
    folder.write(
        "doc.tex",
        "\\documentclass{article}\\begin{document}x\\end{document}",
    );
    folder.write("files/doc.tex", "x");
    folder.write("files/bad;name.tex", "x");
    let unknown_job = uuid::Uuid::new_v4().to_string();
    for (args, code) in [
        (vec!["compile", "missing.tex"], 2),
        (vec!["compile", "doc.tex", "--engine", "tex"], 2),
        (vec!["list", "--status", "Done"], 2),
        (vec!["status", unknown_job.as_str()], 2),
    ] {
        let output = texfleet(&app, folder.0.path(), &args);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    // A file the server refuses is named by its local path, not by files[1].
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "files/doc.tex", "--files", "files"],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad;name.tex: may contain only"),
        "{stderr}"
    );
    assert!(!stderr.contains("files["), "{stderr}");

    let output = texfleet_at(&app.url, "not-a-token", &app, folder.0.path(), &["list"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        text(&output.stderr).lines().count(),
        1,
        "{}",
        text(&output.stderr)
    );
    // A trailing slash in the URL is fine.
    let output = texfleet_at(
        &format!("{}/", app.url),
        &app.token,
        &app,
        folder.0.path(),
        &["list"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));

    let closed = format!("http://127.0.0.1:{}", texfleet_e2e::free_port());
    let output = texfleet_at(&closed, &app.token, &app, folder.0.path(), &["list"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("retrying in 1 s"), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("error: no answer from"),
        "{stderr}"
    );

    let help = text(&texfleet(&app, folder.0.path(), &["compile", "--help"]).stdout);
    for documented in [
        "--halt-on-error",
        "--allow-errors",
        "--json",
        "github",
        "130",
        "xelatex",
    ] {
        assert!(help.contains(documented), "{documented}: {help}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_server_is_waited_for() {
    let app = TestApp::spawn_api_only(|config| {
        config.rate_limit_per_second = 1;
        config.rate_limit_burst = 1;
    })
    .await;
    let folder = Folder::new();
    folder.write(
        "doc.tex",
        "\\documentclass{article}\\begin{document}x\\end{document}",
    );
    // The burst is spent: the next request is a 429, retried after its Retry-After.
    let output = texfleet(&app, folder.0.path(), &["list"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let output = texfleet(&app, folder.0.path(), &["list"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("429 rate_limited") && stderr.contains("retrying"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_answer_is_retried_as_the_same_job() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let folder = Folder::new();
    folder.write(
        "doc.tex",
        "\\documentclass{article}\\begin{document}x\\end{document}",
    );
    // The submission reaches the server, its answer is lost: the retry, with the same
    // Idempotency-Key, is the same job.
    let proxy = answer_dropping_proxy(app.url.trim_start_matches("http://").to_string()).await;
    let mut child = spawn(
        &app,
        &format!("http://{proxy}"),
        folder.0.path(),
        &["compile", "doc.tex"],
    );
    // No scheduler runs here: the job stays queued, and the client says so once it has it.
    let (stderr, _) = read_until(&mut child, "Queued  (job");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        stderr.contains("no answer from") && stderr.contains("retrying"),
        "{stderr}"
    );
    assert_eq!(app.count_jobs("true").await, 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_cancels_the_job() {
    let app = TestApp::spawn().await;
    let folder = Folder::new();
    folder.write(
        "loop.tex",
        "\\documentclass{article}\\begin{document}\\loop\\iftrue\\repeat\\end{document}",
    );
    let mut child = spawn(
        &app,
        &app.url,
        folder.0.path(),
        &["compile", "loop.tex", "--timeout", "120"],
    );
    let (mut stderr, rest) = read_until(&mut child, "Running  (job");
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    stderr.extend(rest.iter().map(|line| line + "\n"));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelled job"), "{stderr}");
    assert_eq!(app.count_jobs("status = 'Cancelled'").await, 1, "{stderr}");
}

/// `texfleet <args>` started in the background, its stderr piped.
fn spawn(app: &TestApp, url: &str, dir: &Path, args: &[&str]) -> Child {
    texfleet_command(app)
        .args(args)
        .current_dir(dir)
        .env("TEXFLEET_URL", url)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child's stderr up to the first line that holds `wanted`; fails (killing the child) if
/// stderr ends first or a minute passes. The rest of stderr is read on in the background and
/// returned by the handle.
fn read_until(child: &mut Child, wanted: &str) -> (String, std::sync::mpsc::Receiver<String>) {
    let (lines, received) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    loop {
        match received.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(wanted) {
                    return (seen, received);
                }
            }
            Err(_) => {
                child.kill().ok();
                panic!("no line with {wanted:?} on stderr: {seen}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn compile_warns_before_it_sends_a_document_that_loads_a_package_the_server_lacks() {
    let app = TestApp::spawn().await;
    // Once the scheduler has registered its image's packages, the server can answer.
    texfleet_e2e::eventually(
        std::time::Duration::from_secs(60),
        "packages registered",
        || async { app.get("/info/packages/article").await.status() == 200 },
    )
    .await;
    let folder = Folder::new();
    folder.write(
        "main.tex",
        "\\documentclass{article}\n\\usepackage{amsmath,nosuchpackage-texfleet}\n\
         \\usepackage{mine}\n\\begin{document}x\\end{document}\n",
    );
    folder.write("mine.sty", "\\ProvidesPackage{mine}");
    let output = texfleet(
        &app,
        folder.0.path(),
        &["compile", "main.tex", "--files", ".", "--allow-errors"],
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "warning: main.tex:2: the server's TeX Live 2024 has no package or class nosuchpackage-texfleet"
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("amsmath") && !stderr.contains("package or class mine"),
        "{stderr}"
    );
}
