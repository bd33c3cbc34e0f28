//! The reference editor at `/play`, in a real browser (headless Chromium through
//! chromedriver): a user types a document, compiles it, sees its page, clicks a diagnostic and
//! lands on its line, clicks in the page and lands on the line that made it, and sees the
//! line's boxes marked. Screenshots go to `target/screenshots/`.

use fantoccini::actions::{InputSource, MouseActions, PointerAction, MOUSE_BUTTON_LEFT};
use fantoccini::Locator;
use serde_json::Value;
use std::time::Duration;
use texfleet_e2e::{eventually, Browser, TestApp};

/// Line 4 is an error (a diagnostic); line 6 is the paragraph the test clicks in the page.
const DOCUMENT: &str =
    "\\documentclass{article}\n\\begin{document}\nFirst paragraph of the page.\n\
    \\undefinedcommand\n\nThe target paragraph, which a click on the page finds again.\n\
    \\end{document}\n";

/// The line of the editor's cursor, from 1.
async fn cursor_line(browser: &Browser) -> u64 {
    let script = "const s = document.getElementById('source'); \
                  return s.value.slice(0, s.selectionStart).split('\\n').length;";
    browser
        .client
        .execute(script, vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap()
}

/// Where the marks on the pages are, in pixels from their page's top.
async fn mark_tops(browser: &Browser) -> Vec<f64> {
    let script = "return [...document.querySelectorAll('.page .mark')].map(m => m.style.top);";
    let marks = browser.client.execute(script, vec![]).await.unwrap();
    marks
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|mark| mark.as_str()?.strip_suffix("px")?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_compiles_sees_the_page_and_jumps_between_source_and_page() {
    let app = TestApp::spawn().await;
    let browser = Browser::start().await;
    let client = &browser.client;
    client.goto(&format!("{}/play", app.url)).await.unwrap();
    let field = |css: &'static str| client.find(Locator::Css(css));
    field("#project")
        .await
        .unwrap()
        .send_keys(&app.project_id.to_string())
        .await
        .unwrap();
    field("#token")
        .await
        .unwrap()
        .send_keys(&app.token)
        .await
        .unwrap();
    let source = field("#source").await.unwrap();
    source.clear().await.unwrap();
    source.send_keys(DOCUMENT).await.unwrap();
    field("#compile").await.unwrap().click().await.unwrap();

    let image = client
        .wait()
        .at_most(Duration::from_secs(120))
        .for_element(Locator::Css(".page img[data-page='1']"))
        .await
        .unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("#words:not(:empty)"))
        .await
        .unwrap();
    let words = field("#words").await.unwrap().text().await.unwrap();
    assert!(words.starts_with("16 words in the text"), "{words}");
    let status = field("#status").await.unwrap().text().await.unwrap();
    assert!(status.starts_with("Succeeded"), "{status}");
    let shown: Value = client
        .execute(
            "const i = arguments[0], box = i.getBoundingClientRect(); \
             return [i.complete, i.naturalWidth, box.width, box.left, box.top];",
            vec![serde_json::to_value(&image).unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(shown[0], true, "the page image loaded: {shown}");
    assert_eq!(shown[1], 600, "{shown}");
    browser.screenshot("play-compiled").await;

    let diagnostic = field("#diagnostics li[data-line='4']").await.unwrap();
    assert!(diagnostic
        .text()
        .await
        .unwrap()
        .contains("Undefined control sequence"));
    diagnostic.click().await.unwrap();
    assert_eq!(cursor_line(&browser).await, 4, "the diagnostic's line");

    // Where line 6 is on the page (its box from the top left corner), from the API, then
    // clicked in the middle of that box in the image.
    let jobs = app
        .get_json(&format!("/projects/{}/compiles", app.project_id))
        .await;
    let id = jobs["items"][0]["id"].as_str().unwrap().to_string();
    let boxes = app
        .get_json(&format!("/compile/{id}/sync/code?file=main.tex&line=6"))
        .await;
    let target = &boxes["pdf"][0];
    assert_eq!(target["page"], 1, "{boxes:#}");
    let preview = app.get(&format!("/compile/{id}/pages/1?width=600")).await;
    let page_width: f64 = preview.headers()["page-size"]
        .to_str()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let number = |value: &Value| value.as_f64().unwrap();
    let scale = number(&shown[2]) / page_width;
    let x = (number(&target["h"]) + number(&target["width"]) / 2.0) * scale;
    let y = (number(&target["v"]) + number(&target["height"]) / 2.0) * scale;
    let click = MouseActions::new("mouse".into())
        .then(PointerAction::MoveTo {
            duration: None,
            x: number(&shown[3]) + x,
            y: number(&shown[4]) + y,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    client.perform_actions(click).await.unwrap();
    // The diagnostic's line was marked already: wait for the click's own answers, its line
    // selected and that line's box marked on the page.
    let top = number(&target["v"]) * scale;
    eventually(
        Duration::from_secs(10),
        "line 6 selected and marked",
        || async {
            cursor_line(&browser).await == 6
                && mark_tops(&browser)
                    .await
                    .iter()
                    .any(|mark| (mark - top).abs() < 1.0)
        },
    )
    .await;
    browser.screenshot("play-synced").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_editor_is_served_with_a_strict_policy_and_no_cors() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let answer = app
        .http
        .get(format!("{}/play", app.url))
        .header("Origin", "https://elsewhere.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let headers = answer.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let policy = headers["content-security-policy"].to_str().unwrap();
    for rule in [
        "default-src 'none'",
        "script-src 'self';",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(rule), "{policy}");
    }
    assert!(!policy.contains("unsafe"), "{policy}");
    assert!(!headers.contains_key("access-control-allow-origin"));
    let page = answer.text().await.unwrap();
    assert_eq!(
        page.matches("<script").count(),
        1,
        "one script, from a file"
    );
    assert!(page.contains("<script src=\"/play/play.js\" defer></script>"));
    let script = app
        .http
        .get(format!("{}/play/play.js", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert!(script.text().await.unwrap().contains("sessionStorage"));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_origins_an_operator_names_get_cors_headers() {
    let allowed = "https://editor.example";
    let app = TestApp::spawn_api_only(|config| config.cors_allowed_origins = allowed.into()).await;
    let preflight = |origin: &'static str| {
        app.http
            .request(reqwest::Method::OPTIONS, format!("{}/compile", app.url))
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "POST")
            .header(
                "Access-Control-Request-Headers",
                "authorization, content-type",
            )
            .send()
    };
    let answer = preflight(allowed).await.unwrap();
    assert_eq!(answer.headers()["access-control-allow-origin"], allowed);
    let methods = answer.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap();
    assert!(methods.contains("POST"), "{methods}");
    let other = preflight("https://elsewhere.example").await.unwrap();
    assert!(!other.headers().contains_key("access-control-allow-origin"));
    let job = app
        .http
        .get(format!("{}/compile/{}", app.url, uuid::Uuid::new_v4()))
        .bearer_auth(&app.token)
        .header("Origin", allowed)
        .send()
        .await
        .unwrap();
    assert_eq!(job.status(), 404);
    assert_eq!(job.headers()["access-control-allow-origin"], allowed);
    let exposed = job.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(exposed.contains("page-size"), "{exposed}");
}
