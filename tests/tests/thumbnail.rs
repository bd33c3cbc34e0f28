//! First-page thumbnails (`"thumbnail_width"`): Ghostscript renders page 1 in the job's sandbox
//! after the compile; the scheduler stores it only if it is the PNG asked for, and the API
//! serves it with a strong `ETag`. A file the document leaves under the thumbnail's name is
//! never what is served.

use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{texfleet_in, TestApp};

/// An A4 page whose top half is a black box: its thumbnail is not a blank page's.
const BOXED: &str = "\\documentclass[a4paper]{article}\n\\begin{document}\n\
    \\noindent\\rule{\\textwidth}{0.4\\textheight}\n\nBoxed.\n\\end{document}\n";
const PLAIN: &str =
    "\\documentclass[a4paper]{article}\n\\begin{document}\nPlain.\n\\end{document}\n";
/// The same page, shown turned a quarter (`/Rotate 90`): landscape.
const TURNED: &str = "\\documentclass[a4paper]{article}\n\\pdfpageattr{/Rotate 90}\n\
    \\begin{document}\nTurned.\n\\end{document}\n";

/// The width and height in a PNG's header, when `bytes` starts as a PNG does.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR") || bytes.len() < 24 {
        return None;
    }
    let number = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    Some((number(16), number(20)))
}

async fn thumbnail(app: &TestApp, job: &Value) -> (reqwest::header::HeaderMap, Vec<u8>) {
    let response = app.get(&format!("/compile/{}/thumbnail", job.id())).await;
    assert_eq!(response.status(), 200, "{job:#}");
    let headers = response.headers().clone();
    (headers, response.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_asked_for_a_thumbnail_serves_its_first_page_that_wide_shaped_as_the_page() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let plain = app.compile(json!({ "input_latex": BOXED })).await;
    assert_eq!(plain["status"], "Succeeded", "{plain:#}");
    assert_eq!(plain["links"]["thumbnail"], Value::Null, "{plain:#}");
    let none = app.get(&format!("/compile/{}/thumbnail", plain.id())).await;
    assert_eq!(none.status(), 404);

    let job = app
        .compile(json!({ "input_latex": BOXED, "thumbnail_width": 200 }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(
        job["reused_from"],
        Value::Null,
        "a result of its own: {job:#}"
    );
    let id = job.id();
    let short = id.split('-').next().unwrap();
    let key = format!("compiles/{short}/thumbnail.png");
    assert_eq!(job["thumbnail_storage_key"], key.as_str(), "{job:#}");
    assert_eq!(
        job["links"]["thumbnail"],
        format!("/compile/{id}/thumbnail")
    );
    let (headers, boxed) = thumbnail(&app, &job).await;
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(png_size(&boxed), Some((200, 283)), "A4 is 1:1.414");
    assert_eq!(app.storage.get_bytes(&key).await.unwrap(), boxed);
    let etag = headers["etag"].to_str().unwrap().to_string();
    let cached = app
        .get_if_none_match(&format!("/compile/{id}/thumbnail"), &etag)
        .await;
    assert_eq!(cached.status(), 304);

    let again = app
        .compile(json!({ "input_latex": BOXED, "thumbnail_width": 200 }))
        .await;
    assert_eq!(again["reused_from"], job["id"], "{again:#}");
    assert_eq!(thumbnail(&app, &again).await.1, boxed);
    let wider = app
        .compile(json!({ "input_latex": BOXED, "thumbnail_width": 300 }))
        .await;
    assert_eq!(wider["reused_from"], Value::Null, "{wider:#}");
    assert_eq!(png_size(&thumbnail(&app, &wider).await.1), Some((300, 424)));

    let blank = app
        .compile(json!({ "input_latex": PLAIN, "thumbnail_width": 200 }))
        .await;
    let blank = thumbnail(&app, &blank).await.1;
    assert_eq!(png_size(&blank), Some((200, 283)));
    assert_ne!(blank, boxed, "the page is drawn, not a blank of its size");

    let turned = app
        .compile(json!({ "input_latex": TURNED, "thumbnail_width": 200 }))
        .await;
    assert_eq!(turned["status"], "Succeeded", "{turned:#}");
    assert_eq!(
        png_size(&thumbnail(&app, &turned).await.1),
        Some((200, 141))
    );
}

/// A page that also writes a file under the thumbnail's name beside itself.
const PLANTING: &str = "\\documentclass[a4paper]{article}\n\\newwrite\\plant\n\
    \\immediate\\openout\\plant=output.thumbnail.png\n\\immediate\\write\\plant{FORGED}\n\
    \\immediate\\closeout\\plant\n\\begin{document}\nPlain.\n\\end{document}\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_file_the_document_leaves_under_the_thumbnail_s_name_is_never_served() {
    let app = TestApp::spawn().await;
    let uploaded = app
        .post_compile(&json!({ "project_id": app.project_id, "input_latex": PLAIN,
                               "files": [{ "path": "output.thumbnail.png", "content": "x" }] }))
        .await;
    assert_eq!(uploaded.status(), 422, "the compiler's name is reserved");

    let unasked = app.compile(json!({ "input_latex": PLANTING })).await;
    assert_eq!(unasked["status"], "Succeeded", "{unasked:#}");
    assert_eq!(unasked["links"]["thumbnail"], Value::Null, "{unasked:#}");
    let short = unasked.id().split('-').next().unwrap().to_string();
    assert!(app
        .storage
        .get_bytes(&format!("compiles/{short}/thumbnail.png"))
        .await
        .is_err());

    let asked = app
        .compile(json!({ "input_latex": PLANTING, "thumbnail_width": 200 }))
        .await;
    assert_eq!(asked["status"], "Succeeded", "{asked:#}");
    let served = thumbnail(&app, &asked).await.1;
    assert_eq!(
        png_size(&served),
        Some((200, 283)),
        "Ghostscript's, not the document's"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_whose_size_is_no_page_s_compiles_without_a_thumbnail() {
    let app = TestApp::spawn().await;
    let job = app
        .compile(json!({
            "input_latex": "\\documentclass{article}\n\\pdfpagewidth=0.5pt\n\
                \\begin{document}\nSliver.\n\\end{document}\n",
            "thumbnail_width": 200,
        }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["links"]["thumbnail"], Value::Null, "{job:#}");
    let log = app.log(job.id()).await;
    assert!(
        log.contains("no thumbnail: the first page's size could not be read"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_writes_the_first_page_as_a_png_and_never_sends_it_back() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("main.tex"), BOXED).unwrap();
    let preview = |app: &TestApp| {
        texfleet_in(
            app,
            folder.path(),
            &[
                "preview",
                "main.tex",
                "--files",
                ".",
                "--thumbnail-width",
                "120",
                "--format",
                "json",
            ],
        )
    };
    let output = preview(&app);
    assert!(output.status.success(), "{output:?}");
    let written = std::fs::read(folder.path().join("main.png")).unwrap();
    assert_eq!(png_size(&written), Some((120, 170)));
    assert!(!folder.path().join("main.pdf").exists());
    let first: Value = serde_json::from_slice(&output.stdout).unwrap();

    let output = preview(&app);
    assert!(output.status.success(), "{output:?}");
    let second: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        second["job"]["reused_from"], first["job"]["id"],
        "main.png was not sent: the project is unchanged"
    );

    let compile = |app: &TestApp| {
        let output = texfleet_in(
            app,
            folder.path(),
            &[
                "compile",
                "main.tex",
                "--files",
                ".",
                "--thumbnail-width",
                "64",
                "--json",
            ],
        );
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let first = compile(&app);
    assert!(folder.path().join("main.pdf").exists());
    let beside = std::fs::read(folder.path().join("main.png")).unwrap();
    assert_eq!(png_size(&beside), Some((64, 91)));
    let second = compile(&app);
    assert_eq!(
        second["job"]["reused_from"], first["job"]["id"],
        "neither main.pdf nor main.png was sent"
    );
}
