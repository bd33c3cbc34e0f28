//! Project files streamed into the sandbox raw after the job's spec: whole and in order, a
//! project past what the spec could carry included; keyed by their hash for the preamble
//! format; laid out again when a compile from kept files starts again from nothing.

use serde_json::json;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{TestApp, INPUT_BIG as MAIN};

/// `bytes` bytes that differ from file to file by `seed`.
fn figure(bytes: usize, seed: u8) -> Vec<u8> {
    (0..bytes)
        .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 12) as u8 ^ seed)
        .collect()
}

/// Uppercase hex, as `\pdfmdfivesum` prints it.
fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest as _;
    let digest = md5::Md5::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02X}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_of_a_hundred_megabytes_reaches_the_sandbox_whole() {
    let app = TestApp::spawn().await;
    // Past the 128 MiB of base64 the spec may carry, in the order the spec names them, and a
    // file larger than any output may be.
    let figures = [
        figure(60 * 1024 * 1024, 1),
        figure(36 * 1024 * 1024, 2),
        figure(5, 3),
    ];
    let mut files = Vec::new();
    let mut main = String::from("\\documentclass{article}\\begin{document}\n");
    for (n, content) in figures.iter().enumerate() {
        let hash = app.upload_file(content).await;
        let path = format!("figures/f{n}.bin");
        main.push_str(&format!(
            "{n}: \\pdffilesize{{{path}}} \\pdfmdfivesum file {{{path}}}\\par\n"
        ));
        files.push(json!({ "path": path, "sha256": hash }));
    }
    main.push_str("\\end{document}\n");
    let job = app
        .compile(json!({ "input_latex": main, "files": files }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    let text = app.text_of(job.id()).await;
    for (n, content) in figures.iter().enumerate() {
        let seen = format!("{n}: {} {}", content.len(), md5_hex(content));
        assert!(text.contains(&seen), "{seen} not in {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_format_from_a_style_named_by_hash_is_kept_until_the_style_changes_or_is_rewritten() {
    let app = TestApp::spawn().await;
    let compile = |style: String, body: &str| {
        let main = format!(
            "\\documentclass{{article}}\\usepackage{{style}}\n\\begin{{document}}\\hello. {body}\\end{{document}}\n"
        );
        let app = &app;
        async move {
            let files = [json!({ "path": "style.sty", "sha256": style })];
            app.compile(json!({ "input_latex": main, "files": files }))
                .await
        }
    };
    let one = app.upload_file(b"\\def\\hello{Style one}\n").await;
    let first = compile(one.clone(), "First.").await;
    assert_eq!(first["preamble_cache"], "miss", "{first:#}");
    let second = compile(one.clone(), "Second.").await;
    assert_eq!(second["preamble_cache"], "hit", "{second:#}");
    assert!(app
        .text_of(second.id())
        .await
        .contains("Style one. Second."));

    let two = app.upload_file(b"\\def\\hello{Style two}\n").await;
    let changed = compile(two, "Third.").await;
    assert_eq!(changed["preamble_cache"], "miss", "{changed:#}");
    assert!(app
        .text_of(changed.id())
        .await
        .contains("Style two. Third."));

    // A body that rewrites the streamed style before the dump: no format from it.
    let rewrite = "\\newwrite\\w\\immediate\\openout\\w=style.sty \
        \\immediate\\write\\w{\\string\\def\\string\\hello{Planted}}\\immediate\\closeout\\w";
    let three = app.upload_file(b"\\def\\hello{Style three}\n").await;
    let rewritten = compile(three, rewrite).await;
    assert_eq!(rewritten["status"], "Succeeded", "{rewritten:#}");
    let log = app.log(rewritten.id()).await;
    assert!(log.contains("the compile rewrote style.sty"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_from_kept_files_that_fails_starts_again_with_its_streamed_files() {
    let app = TestApp::spawn().await;
    let hash = app.upload_file(b"From a named file.\n").await;
    // More than half the work directory: they cannot be there twice.
    let mut files = vec![json!({ "path": "big.tex", "sha256": hash })];
    for seed in [1, 2] {
        let hash = app.upload_file(&figure(66 * 1024 * 1024, seed)).await;
        files.push(json!({ "path": format!("figures/f{seed}.bin"), "sha256": hash }));
    }
    let clean = app
        .compile(json!({ "input_latex": MAIN, "files": files }))
        .await;
    assert_eq!(clean["status"], "Succeeded", "{clean:#}");
    // The pass from the clean compile's files fails: the compile runs again from nothing.
    let typo = MAIN.replace("\\input{big}", "\\input{big}\\oops");
    let job = app
        .compile(json!({ "input_latex": typo, "files": files }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert!(
        job["diagnostics"]
            .to_string()
            .contains("Undefined control sequence"),
        "{job:#}"
    );
    assert!(app.text_of(job.id()).await.contains("From a named file."));
    let log = app.log(job.id()).await;
    assert!(log.contains("again from nothing"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compile_from_kept_files_that_rewrote_a_streamed_file_runs_again_in_a_new_sandbox() {
    let app = TestApp::spawn().await;
    let data = app.upload_file(b"As sent.\n").await;
    let files = [json!({ "path": "data.txt", "sha256": data })];
    // The first compile leaves a mark in its .aux; the second, from that .aux, keeps the mark,
    // rewrites the streamed file and fails in every pass, so its compile from nothing in the
    // same sandbox cannot start.
    let marks = "\\documentclass{article}\\makeatletter\
        \\AtBeginDocument{\\immediate\\write\\@auxout{\\gdef\\string\\marked{}}}\n\
        \\begin{document}\\input{data.txt}\\end{document}\n";
    let first = app
        .compile(json!({ "input_latex": marks, "files": files }))
        .await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let rewrites = "\\documentclass{article}\\makeatletter\\AtBeginDocument{\\ifdefined\\marked\
        \\immediate\\write\\@auxout{\\gdef\\string\\marked{}}\
        \\newwrite\\w\\immediate\\openout\\w=data.txt \\immediate\\write\\w{Rewritten.}\
        \\immediate\\closeout\\w \\undefinedcs\\fi}\n\
        \\begin{document}\\input{data.txt} Second.\\end{document}\n";
    let job = app
        .compile(json!({ "input_latex": rewrites, "files": files }))
        .await;
    assert_eq!(job["status"], "Succeeded", "{job:#}");
    assert_eq!(job["incremental"], false, "{job:#}");
    let text = app.text_of(job.id()).await;
    assert!(text.contains("As sent. Second."), "{text}");
}
