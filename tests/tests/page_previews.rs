//! Page previews (`GET /compile/{id}/pages/{page}?width=W`): the first request for a page at a
//! width has a scheduler render it from the stored PDF in a sandbox; the image is stored beside
//! the PDF and served with a strong `ETag`. A page past the PDF's end, a PDF that bombs the
//! renderer, a project's queue of renders and another project's job are each answered plainly.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{eventually, texfleet_in, TestApp, ENDLESS};

/// Three A4 pages; only the second holds a black box.
const THREE_PAGES: &str = "\\documentclass[a4paper]{article}\n\\begin{document}\nOne.\n\
    \\newpage\n\\noindent\\rule{\\textwidth}{0.4\\textheight}\n\nTwo.\n\\newpage\nThree.\n\
    \\end{document}\n";

/// The width and height in a PNG's header, when `bytes` starts as a PNG does.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR") || bytes.len() < 24 {
        return None;
    }
    let number = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    Some((number(16), number(20)))
}

async fn page(
    app: &TestApp,
    job: &Value,
    page: &str,
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let response = app
        .get(&format!("/compile/{}/pages/{page}", job.id()))
        .await;
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.bytes().await.unwrap().to_vec())
}

/// How many renders of the job's pages the database holds, and how many attempts they took.
async fn renders(app: &TestApp, job: &Value) -> (i64, i64) {
    let client = app.pool.get().await.unwrap();
    let id: uuid::Uuid = job.id().parse().unwrap();
    let row = client
        .query_one(
            "SELECT count(*), coalesce(sum(attempts), 0) FROM page_previews WHERE job_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_is_rendered_once_at_the_width_asked_then_served_from_the_store() {
    let app = TestApp::spawn().await;
    let job = app.compile(json!({ "input_latex": THREE_PAGES })).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let short = job.id().split('-').next().unwrap().to_string();

    let (status, headers, second) = page(&app, &job, "2?width=300").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&second));
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(png_size(&second), Some((300, 424)), "A4 is 1:1.414");
    assert_eq!(headers["page-size"], "595.28 841.89", "A4 in points");
    let key = format!("compiles/{short}/pages/2-300.png");
    assert_eq!(app.storage.get_bytes(&key).await.unwrap(), second);
    let etag = headers["etag"].to_str().unwrap().to_string();
    let path = format!("/compile/{}/pages/2?width=300", job.id());
    assert_eq!(app.get_if_none_match(&path, &etag).await.status(), 304);
    let (_, _, again) = page(&app, &job, "2?width=300").await;
    assert_eq!(again, second);
    assert_eq!(
        renders(&app, &job).await,
        (1, 1),
        "rendered once, then kept"
    );

    let (status, _, first) = page(&app, &job, "1?width=300").await;
    assert_eq!(status, 200);
    assert_eq!(png_size(&first), Some((300, 424)));
    assert_ne!(first, second, "each page is its own");
    let (status, _, wide) = page(&app, &job, "3").await;
    assert_eq!(status, 200);
    assert_eq!(
        png_size(&wide),
        Some((800, 1131)),
        "800 pixels unless asked"
    );

    let (status, headers, body) = page(&app, &job, "4?width=300").await;
    assert_eq!(status, 404);
    assert_eq!(headers["content-type"], "application/problem+json");
    let problem: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("the PDF has 3 pages"),
        "{problem:#}"
    );
    for bad in [
        "0",
        "100001",
        "two",
        "1?width=15",
        "1?width=1201",
        "1?width=wide",
    ] {
        let (status, _, body) = page(&app, &job, bad).await;
        assert_eq!(status, 422, "{bad}: {}", String::from_utf8_lossy(&body));
    }
    assert_eq!(
        renders(&app, &job).await.0,
        4,
        "nothing out of bounds was queued"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_succeeded_job_of_the_project_has_pages() {
    let app = TestApp::spawn().await;
    let failed = app
        .compile(
            json!({ "input_latex": "\\documentclass{article}\\begin{document}\\undefined",
                         "halt_on_error": true }),
        )
        .await;
    assert_eq!(failed["status"], "Failed", "{failed:#}");
    let (status, _, body) = page(&app, &failed, "1").await;
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));

    let (_, other_token, other_job) = app.other_project_with_job().await;
    let path = format!("/compile/{}/pages/1", other_job.id());
    assert_eq!(app.get(&path).await.status(), 404, "another project's job");
    let ours = app.compile(json!({ "input_latex": THREE_PAGES })).await;
    let path = format!("/compile/{}/pages/1", ours.id());
    assert_eq!(app.get_as(&other_token, &path).await.status(), 404);
    assert_eq!(renders(&app, &ours).await.0, 0);
    assert_eq!(renders(&app, &failed).await.0, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_with_renders_under_way_is_told_to_retry() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    // A Succeeded job and eight renders of it that no scheduler takes.
    let id = uuid::Uuid::new_v4();
    app.execute(&format!(
        "INSERT INTO jobs (id, project_id, engine, texlive, timeout_seconds, max_attempts,
                           status, finished_at, pdf_storage_key)
         VALUES ('{id}', '{}', 'pdflatex', '2024', 30, 1, 'Succeeded', now(), 'x.pdf')",
        app.project_id
    ))
    .await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width)
         SELECT '{id}', '{}', page, 100 FROM generate_series(1, 8) AS page",
        app.project_id
    ))
    .await;
    let response = app.get(&format!("/compile/{id}/pages/9")).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(app.count_rows("page_previews", "true").await, 8);
}

/// A one-page PDF whose content stream inflates to `megabytes` of tiny filled squares: a
/// decompression bomb for whatever renders it (a few megabytes as stored). One mebibyte is
/// compressed once with a full flush, which makes its bytes stand alone, and repeated; the
/// checksum at the end is left wrong, which a renderer finds out only after the rest.
fn bomb_pdf(megabytes: usize) -> Vec<u8> {
    let squares = b"1 1 1 1 re f\n".repeat((1 << 20) / 13);
    let mut deflate = flate2::Compress::new(flate2::Compression::best(), false);
    let mut block = Vec::with_capacity(1 << 20);
    deflate
        .compress_vec(&squares, &mut block, flate2::FlushCompress::Full)
        .unwrap();
    let mut content = b"\x78\xda".to_vec();
    for _ in 0..megabytes {
        content.extend_from_slice(&block);
    }
    // An empty last block, then the checksum.
    content.extend_from_slice(b"\x03\x00\0\0\0\0");
    let mut pdf = b"%PDF-1.5\n".to_vec();
    let mut offsets = Vec::new();
    let objects: [Vec<u8>; 4] = [
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>".to_vec(),
        [
            format!(
                "<< /Length {} /Filter /FlateDecode >>\nstream\n",
                content.len()
            )
            .as_bytes(),
            &content,
            b"\nendstream",
        ]
        .concat(),
    ];
    for (number, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n", number + 1).as_bytes());
        pdf.extend(object);
        pdf.extend(b"\nendobj\n");
    }
    let xref = pdf.len();
    let size = objects.len() + 1;
    pdf.extend(format!("xref\n0 {size}\n0000000000 65535 f \n").as_bytes());
    for offset in offsets {
        pdf.extend(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend(
        format!("trailer\n<< /Size {size} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n").as_bytes(),
    );
    pdf
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_that_bombs_the_renderer_fails_alone_and_the_other_pages_render() {
    let app = TestApp::spawn().await;
    let job = app
        .compile(json!({
            "input_latex": "\\documentclass{article}\n\\usepackage{graphicx}\n\\begin{document}\n\
                Before.\n\\newpage\n\\includegraphics{bomb.pdf}\n\\end{document}\n",
            "files": [{ "path": "bomb.pdf", "content_base64": BASE64.encode(bomb_pdf(2048)) }],
        }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let (status, _, body) = page(&app, &job, "2?width=200").await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    let problem: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .starts_with("page 2 could not be rendered"),
        "{problem:#}"
    );
    let (status, _, first) = page(&app, &job, "1?width=200").await;
    assert_eq!(status, 200);
    assert_eq!(png_size(&first).map(|size| size.0), Some(200));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_writes_a_page_and_says_when_there_is_none() {
    let app = TestApp::spawn().await;
    let job = app.compile(json!({ "input_latex": THREE_PAGES })).await;
    let folder = tempfile::tempdir().unwrap();
    let id = job.id();
    let output = texfleet_in(&app, folder.path(), &["page", id, "2", "--width", "120"]);
    assert!(output.status.success(), "{output:?}");
    let written = std::fs::read(folder.path().join("page-2.png")).unwrap();
    assert_eq!(png_size(&written), Some((120, 170)));
    let (_, _, served) = page(&app, &job, "2?width=120").await;
    assert_eq!(written, served);

    let output = texfleet_in(&app, folder.path(), &["page", id, "4", "-o", "four.png"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a request refused: {output:?}"
    );
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("the PDF has 3 pages"), "{said}");
    assert!(!folder.path().join("four.png").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn compiles_holding_every_slot_leave_previews_rendering() {
    // Both of the scheduler's compile slots open to one project's endless compiles.
    let app = TestApp::spawn_with(|config| config.idle_project_slots = 0).await;
    let (_, other_token, theirs) = app.other_project_with_job().await;
    let finished = format!("id = '{}' AND status = 'Succeeded'", theirs.id());
    eventually(
        Duration::from_secs(60),
        "the other project's job",
        || async { app.count_jobs(&finished).await == 1 },
    )
    .await;
    let endless: Vec<Value> = futures::future::join_all(
        (0..2).map(|_| app.submit(json!({ "input_latex": ENDLESS, "timeout_seconds": 120 }))),
    )
    .await;
    eventually(Duration::from_secs(60), "both slots taken", || async {
        app.count_jobs("status = 'Running'").await == 2
    })
    .await;

    let path = format!("/compile/{}/pages/1?width=200", theirs.id());
    let page = app.get_as(&other_token, &path).await;
    assert_eq!(page.status(), 200, "{:?}", page.text().await);
    assert_eq!(
        app.count_jobs("status = 'Running'").await,
        2,
        "still compiling"
    );
    for job in &endless {
        app.cancel(job.id()).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_render_that_failed_is_tried_again_a_minute_later() {
    let app = TestApp::spawn().await;
    let job = app.compile(json!({ "input_latex": THREE_PAGES })).await;
    app.execute(&format!(
        "INSERT INTO page_previews (job_id, project_id, page, width, status, error_message,
                                    finished_at)
         VALUES ('{0}', '{1}', 1, 200, 'Failed', 'slow', now()),
                ('{0}', '{1}', 2, 200, 'Failed', 'slow', now() - interval '2 minutes')",
        job.id(),
        app.project_id
    ))
    .await;
    let (status, _, body) = page(&app, &job, "1?width=200").await;
    assert_eq!(
        status,
        404,
        "failed a moment ago: {}",
        String::from_utf8_lossy(&body)
    );
    let (status, _, png) = page(&app, &job, "2?width=200").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&png));
    assert_eq!(png_size(&png), Some((200, 283)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_of_an_older_year_is_rendered_by_the_newest_image() {
    let app = TestApp::spawn().await;
    let job = app
        .compile(json!({ "input_latex": THREE_PAGES, "texlive": "2022" }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let (status, _, png) = page(&app, &job, "1?width=100").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&png));
    let info = app.get_json("/info").await;
    let newest = info["texlive_years"].as_array().unwrap().last().unwrap()["sandbox_image"].clone();
    assert_ne!(
        job["sandbox_image"], newest,
        "the job's own year is older: {info:#}"
    );
    let client = app.pool.get().await.unwrap();
    let id: uuid::Uuid = job.id().parse().unwrap();
    let rendered_by: String = client
        .query_one(
            "SELECT image_id FROM page_previews WHERE job_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(serde_json::Value::from(rendered_by), newest);
}
