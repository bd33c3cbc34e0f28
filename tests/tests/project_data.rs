//! A project's files over time: what nothing keeps is collected, the CLI sends a folder by
//! hash so that an edit uploads only that file, and deleting a project deletes its data.

use serde_json::json;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{
    address_of, connect_from, eventually, large_tex, sha256_hex as sha256, texfleet_command,
    texfleet_in, TestApp, INPUT_BIG as MAIN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread")]
async fn files_nothing_keeps_are_collected_and_named_ones_stay() {
    let app = TestApp::spawn_with(|config| {
        config.project_files_grace_hours = 0;
        config.retention_interval_seconds = 1;
    })
    .await;
    let unused = app.upload_file(b"Nobody names me.\n").await;
    let named = app.upload_file(b"Named by a job.\n").await;
    let job = app
        .compile(json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "sha256": named }] }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let key = |hash: &str| format!("projects/{}/files/{hash}", app.project_id);
    eventually(
        Duration::from_secs(30),
        "the unused file is collected",
        || async {
            app.count_rows("project_files", &format!("sha256 = '\\x{unused}'"))
                .await
                == 0
        },
    )
    .await;
    assert!(app.storage.get_bytes(&key(&unused)).await.is_err());
    assert!(
        app.storage.get_bytes(&key(&named)).await.is_ok(),
        "a retained job names it"
    );
    assert_eq!(
        app.count_rows("project_files", &format!("sha256 = '\\x{named}'"))
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_uploads_what_the_project_lacks_and_an_edit_sends_only_that_file() {
    let app = TestApp::spawn().await;
    let folder = tempfile::tempdir().unwrap();
    let write =
        |path: &str, content: &[u8]| std::fs::write(folder.path().join(path), content).unwrap();
    write(
        "main.tex",
        b"\\documentclass{article}\\begin{document}\\input{one}\\input{two}\\end{document}\n",
    );
    write("one.tex", b"First.\n");
    write("two.tex", &large_tex(2 * 1024 * 1024, "Second.\n"));
    let compile = || {
        texfleet_in(
            &app,
            folder.path(),
            &["compile", "main.tex", "--files", "."],
        )
    };
    let uploads = || async {
        let client = app.pool.get().await.unwrap();
        let rows = client
            .query(
                "SELECT encode(sha256, 'hex'), last_uploaded_at FROM project_files ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        rows.iter()
            .map(|row| {
                (
                    row.get::<_, String>(0),
                    row.get::<_, std::time::SystemTime>(1),
                )
            })
            .collect::<Vec<_>>()
    };
    let first = compile();
    let stderr = String::from_utf8_lossy(&first.stderr).to_string();
    assert_eq!(first.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("uploading two.tex") && stderr.contains("uploaded 3 file(s)"),
        "{stderr}"
    );
    let pdf = std::fs::read(folder.path().join("main.pdf")).unwrap();
    assert!(texfleet_e2e::pdf_text(&pdf).contains("First. Second."));
    let after_first = uploads().await;
    assert_eq!(after_first.len(), 3);

    let unchanged = compile();
    let stderr = String::from_utf8_lossy(&unchanged.stderr).to_string();
    assert_eq!(unchanged.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("uploaded"), "nothing to upload: {stderr}");
    assert_eq!(uploads().await, after_first, "no file was sent again");

    write("one.tex", b"First, edited.\n");
    let edited = compile();
    let stderr = String::from_utf8_lossy(&edited.stderr).to_string();
    assert_eq!(edited.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("uploaded 1 file(s)"), "{stderr}");
    let after_edit = uploads().await;
    let new: Vec<_> = after_edit
        .iter()
        .filter(|file| !after_first.contains(file))
        .collect();
    assert_eq!(new.len(), 1, "only the edited file: {new:?}");
    assert_eq!(new[0].0, sha256(b"First, edited.\n"));
    let pdf = std::fs::read(folder.path().join("main.pdf")).unwrap();
    assert!(texfleet_e2e::pdf_text(&pdf).contains("First, edited. Second."));
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_project_deletes_its_jobs_outputs_state_and_files() {
    let app = TestApp::spawn_with(|config| {
        config.incremental_compiles = true;
        config.retention_interval_seconds = 1;
    })
    .await;
    let named = app.upload_file(b"Kept by the project.\n").await;
    let job = app
        .compile(json!({ "input_latex": MAIN, "files": [{ "path": "big.tex", "sha256": named }] }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let (other, other_token) = app.other_project().await;
    let other_job = app
        .post_as(
            &other_token,
            "/compile",
            &json!({ "project_id": other, "input_latex": MAIN,
            "files": [{ "path": "big.tex", "content": "Another project's.\n" }] }),
        )
        .await;
    assert_eq!(other_job.status(), 202);
    let other_job: serde_json::Value = other_job.json().await.unwrap();
    let project_keys = format!("projects/{}/", app.project_id);
    let kept = app.storage.list(&project_keys).await.unwrap();
    assert!(kept.len() >= 2, "a project file and kept state: {kept:?}");
    let pdf = job["pdf_storage_key"].as_str().unwrap().to_string();
    assert!(app.storage.get_bytes(&pdf).await.is_ok());
    assert_eq!(
        cached_files_of(&app).len(),
        1,
        "the scheduler keeps it on its disk"
    );

    delete_project(&app);
    assert!(app.storage.list(&project_keys).await.unwrap().is_empty());
    assert!(
        app.storage.get_bytes(&pdf).await.is_err(),
        "the outputs are gone"
    );
    let project = format!("'{}'", app.project_id);
    for table in ["projects", "api_tokens", "jobs", "project_files"] {
        let column = if table == "projects" {
            "id"
        } else {
            "project_id"
        };
        let rows = app
            .count_rows(table, &format!("{column} = {project}"))
            .await;
        assert_eq!(rows, 0, "{table}");
    }
    assert_eq!(app.get("/info").await.status(), 401, "its token is gone");
    eventually(
        Duration::from_secs(30),
        "the scheduler's copy is gone",
        || async { cached_files_of(&app).is_empty() },
    )
    .await;
    let other_job = app.wait_terminal_as(&other_token, other_job.id()).await;
    assert_eq!(
        other_job["status"], "Succeeded",
        "another project is untouched"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_under_way_when_its_project_is_deleted_leaves_nothing_stored() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let body = large_tex(64 * 1024, "Uploaded while deleted.");
    let head = format!(
        "PUT /projects/{}/files/{} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Length: {}\r\n\r\n",
        app.project_id,
        sha256(&body),
        app.token,
        body.len()
    );
    let mut upload = connect_from("127.0.0.1", address_of(&app)).await;
    upload.write_all(head.as_bytes()).await.unwrap();
    upload.write_all(&body[..body.len() / 2]).await.unwrap();
    let reserved = format!("project_id = '{}'", app.project_id);
    eventually(
        Duration::from_secs(10),
        "the upload is reserved",
        || async { app.count_rows("project_files", &reserved).await == 1 },
    )
    .await;
    delete_project(&app);
    upload.write_all(&body[body.len() / 2..]).await.unwrap();
    let mut answer = vec![0; 1024];
    let read = upload.read(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let project_keys = format!("projects/{}/", app.project_id);
    assert_eq!(
        app.storage.list(&project_keys).await.unwrap(),
        Vec::<String>::new()
    );
}

/// `texfleet project delete` of the app's project, which must succeed.
fn delete_project(app: &TestApp) {
    let output = texfleet_command(app)
        .env("TEXFLEET_DATABASE_URL", &app.config.database_url)
        .args([
            "project",
            "delete",
            "--project",
            &app.project_id.to_string(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// The app's project's files on the disk of a scheduler of this machine (each keeps them in
/// a folder of the temporary one, named by project and hash).
fn cached_files_of(app: &TestApp) -> Vec<std::path::PathBuf> {
    let project = format!("{}-", app.project_id);
    let folders = std::fs::read_dir(std::env::temp_dir()).unwrap().flatten();
    folders
        .filter(|folder| {
            folder
                .file_name()
                .to_string_lossy()
                .starts_with("texfleet-project-files-")
        })
        .flat_map(|folder| {
            std::fs::read_dir(folder.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|file| file.file_name().to_string_lossy().starts_with(&project))
        .map(|file| file.path())
        .collect()
}
