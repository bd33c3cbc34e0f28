//! Draft compiles (`"draft": true`): every graphic a box with its file name, a result of its
//! own in the result cache, and the document's preamble format left to the final compiles.

use base64::Engine as _;
use serde_json::{json, Value};
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{pdf_objects_of_subtype, pdf_text, texfleet_in, tiny_png, TestApp};

fn figure(body: &str, draft: bool) -> Value {
    json!({
        "input_latex": format!("\\documentclass{{article}}\\usepackage{{graphicx}}\n\
            \\begin{{document}}{body} \\includegraphics[width=1cm]{{dot.png}}\\end{{document}}\n"),
        "files": [{ "path": "dot.png",
                    "content_base64": base64::engine::general_purpose::STANDARD.encode(tiny_png()) }],
        "draft": draft,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_draws_graphics_as_boxes_and_is_a_result_of_its_own() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let first = app.compile(figure("Figure:", false)).await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    let pdf = app.pdf_of(first.id()).await;
    assert_eq!(pdf_objects_of_subtype(&pdf, "Image"), 1);
    assert!(!pdf_text(&pdf).contains("dot.png"));

    // The same sources in draft: compiled, not the final result reused.
    let draft = app.compile(figure("Figure:", true)).await;
    assert_eq!(draft["status"], "Succeeded", "{draft:#}");
    assert_eq!(draft["reused_from"], Value::Null, "{draft:#}");
    assert_eq!(draft["preamble_cache"], "unavailable", "{draft:#}");
    let pdf = app.pdf_of(draft.id()).await;
    assert_eq!(pdf_objects_of_subtype(&pdf, "Image"), 0);
    let text = pdf_text(&pdf);
    assert!(
        text.contains("Figure:") && text.contains("dot.png"),
        "{text}"
    );
    let again = app.compile(figure("Figure:", true)).await;
    assert_eq!(again["reused_from"], draft["id"], "{again:#}");

    // The final compiles keep their preamble format.
    let edited = app.compile(figure("Edited:", false)).await;
    assert_eq!(edited["preamble_cache"], "hit", "{edited:#}");
    let pdf = app.pdf_of(edited.id()).await;
    assert_eq!(pdf_objects_of_subtype(&pdf, "Image"), 1);
    assert!(pdf_text(&pdf).contains("Edited:"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_in_every_engine_draws_its_graphics_as_boxes() {
    let app = TestApp::spawn().await;
    for engine in ["xelatex", "lualatex"] {
        let mut request = figure(&format!("In {engine}:"), true);
        request["engine"] = json!(engine);
        let job = app.compile(request).await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        let pdf = app.pdf_of(job.id()).await;
        assert_eq!(pdf_objects_of_subtype(&pdf, "Image"), 0, "{engine}");
        assert!(pdf_text(&pdf).contains("dot.png"), "{engine}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_compiles_a_draft() {
    let app = TestApp::spawn().await;
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("main.tex"),
        "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\
         By the CLI: \\includegraphics[width=1cm]{dot.png}\\end{document}\n",
    )
    .unwrap();
    std::fs::write(folder.path().join("dot.png"), tiny_png()).unwrap();
    let output = texfleet_in(
        &app,
        folder.path(),
        &["compile", "main.tex", "--files", ".", "--draft"],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let pdf = std::fs::read(folder.path().join("main.pdf")).unwrap();
    assert_eq!(pdf_objects_of_subtype(&pdf, "Image"), 0);
    assert!(pdf_text(&pdf).contains("dot.png"));
}
