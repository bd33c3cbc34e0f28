//! First-page thumbnails (`"thumbnail_width"`): Ghostscript renders page 1 in the job's sandbox
//! after the compile; the scheduler stores it only if it is the PNG asked for, and the API
//! serves it with a strong `ETag`. A file the document leaves under the thumbnail's name is
//! never what is served, and a thumbnail never changes the job's verdict.

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
        log.contains("no image of page 1: its size could not be read"),
        "{log}"
    );
}

/// A PNG of `width` by `height` whose pixels are `pixel(x, y)` (RGB), as an image to include.
fn png(width: u32, height: u32, pixel: impl Fn(u32, u32) -> [u8; 3]) -> Vec<u8> {
    use std::io::Write as _;
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        let length = (data.len() as u32).to_be_bytes();
        [&length[..], kind, data, &crc.sum().to_be_bytes()].concat()
    };
    let mut header = [width.to_be_bytes(), height.to_be_bytes()].concat();
    header.extend([8, 2, 0, 0, 0]);
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0);
        raw.extend((0..width).flat_map(|x| pixel(x, y)));
    }
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    zlib.write_all(&raw).unwrap();
    let data = zlib.finish().unwrap();
    [
        &b"\x89PNG\r\n\x1a\n"[..],
        &chunk(b"IHDR", &header),
        &chunk(b"IDAT", &data),
        &chunk(b"IEND", b""),
    ]
    .concat()
}

/// A document with an error, which still gives a PDF (and a `Succeeded` job), whose Lua writes
/// `forged` under the thumbnail's name.
fn forging(forged: &[u8]) -> Value {
    let bytes: String = forged.iter().map(|b| format!("\\{b}")).collect();
    json!({
        "engine": "lualatex",
        "input_latex": "\\documentclass{article}\n\\begin{document}\nForging.\n\
            \\directlua{dofile(\"w.lua\")}\n\\undefinedcommand\n\\end{document}\n",
        "files": [{ "path": "w.lua", "content": format!(
            "local f = io.open(\"output.thumbnail.png\", \"wb\") f:write(\"{bytes}\") f:close()") }],
        "thumbnail_width": 200,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_png_a_document_with_errors_writes_is_never_its_thumbnail() {
    let app = TestApp::spawn().await;
    let forged = png(200, 100, |_, _| [255, 0, 0]);
    let job = app.compile(forging(&forged)).await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert!(
        !job["diagnostics"].as_array().unwrap().is_empty(),
        "{job:#}"
    );
    let served = thumbnail(&app, &job).await.1;
    assert!(served != forged, "the document's own PNG was served");
    assert_eq!(
        png_size(&served),
        Some((200, 283)),
        "Ghostscript's render of the page"
    );
}

/// Fills the work folder once the first page is out, then frees `reserve` bytes of it.
const FILL: &str =
    "local r = io.open(\"reserve.bin\", \"wb\") r:write(string.rep(\"r\", RESERVE)) r:close()\n\
    local block = string.rep(\"x\", 1048576)\n\
    for i = 1, 100000 do\n\
      local f = io.open(\"fill\" .. i .. \".bin\", \"wb\")\n\
      if not f then break end\n\
      local written, closed = f:write(block), f:close()\n\
      if not written or not closed then break end\n\
    end\n\
    os.remove(\"reserve.bin\")\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_thumbnail_with_no_room_left_is_not_made_and_the_job_s_verdict_stands() {
    let app = TestApp::spawn().await;
    // Noise compresses to nothing: its thumbnail is some 5 MB.
    let mut seed = 0x2545_f491_u32;
    let mut noise = || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    let pixels: Vec<[u8; 3]> = (0..1200 * 1553)
        .map(|_| noise().to_be_bytes()[..3].try_into().unwrap())
        .collect();
    let image = png(1200, 1553, |x, y| pixels[(y * 1200 + x) as usize]);
    let job = app
        .compile(json!({
            "engine": "lualatex",
            "input_latex": "\\documentclass{article}\n\
                \\usepackage[paperwidth=1200bp,paperheight=1553bp,margin=0pt]{geometry}\n\
                \\usepackage{graphicx}\\pagestyle{empty}\n\\begin{document}\n\
                \\noindent\\includegraphics[width=\\paperwidth,height=0.9\\paperheight]{noise.png}\n\
                \\clearpage\n\\directlua{dofile(\"fill.lua\")}\n\\end{document}\n",
            "files": [
                { "path": "noise.png", "content_base64": base64_of(&image) },
                { "path": "fill.lua", "content": FILL.replace("RESERVE", "5500000") },
            ],
            "thumbnail_width": 1200,
            "cache": false,
        }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["links"]["thumbnail"], Value::Null, "{job:#}");
    let log = app.log(job.id()).await;
    assert!(
        log.contains("no image of page 1: the work folder has no room for it"),
        "{log}"
    );
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
