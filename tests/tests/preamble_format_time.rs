//! A preamble format and the compile's timeout: passes that load a format get at most half of
//! it, in time and in CPU, and a format that makes them slow is dropped; the dump and its check
//! stop before the timeout.

use serde_json::json;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{second_after, succeeded_text, write_file, TestApp};

#[tokio::test(flavor = "multi_thread")]
async fn a_format_that_makes_passes_loop_is_dropped_and_costs_a_compile_half_its_time_only() {
    let app = TestApp::spawn().await;
    // \greet loops in the format only: the preamble tells that it is being dumped.
    let document = |body: &str| {
        json!({ "input_latex": format!(
            "\\documentclass{{article}}\n\\makeatletter\n\\ifcsname MYLATEX@cleanup\\endcsname\
             \\gdef\\greet{{\\greet}}\\else\\gdef\\greet{{Hello}}\\fi\n\\makeatother\n\
             \\begin{{document}}\n{body}\n\\end{{document}}\n") })
    };
    let honest = second_after(&app, document("Draft."), document("\\greet{} world.")).await;
    assert!(succeeded_text(&app, &honest).await.contains("Hello world."));
    assert_eq!(honest["preamble_cache"], "miss", "{honest:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_check_of_the_format_that_would_run_past_the_timeout_stops_in_time() {
    let app = TestApp::spawn().await;
    // The pass that checks the format, the first to find flag.tex, never ends.
    let request = json!({ "timeout_seconds": 12, "input_latex": format!(
        "\\documentclass{{article}}\n\\begin{{document}}\
         \\IfFileExists{{flag.tex}}{{\\loop\\iftrue\\repeat}}{{{}}}Spun.\\end{{document}}",
        write_file("flag.tex", "x")
    ) });
    let first = app.compile(request.clone()).await;
    let log = app.log(first.id()).await;
    assert_eq!(first["status"], "Succeeded", "{first:#}\n{log}");
    assert!(
        log.contains("keeping the preamble as a format: it ran out of time"),
        "{log}"
    );
    assert!(succeeded_text(&app, &first).await.contains("Spun."));
    // Out of time is not the preamble's fault: the next compile tries again.
    let second = app.compile(request).await;
    assert_eq!(second["status"], "Succeeded", "{second:#}");
    assert_eq!(second["preamble_cache"], "miss", "{second:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_format_that_waits_on_the_shell_escape_is_dropped() {
    let app = TestApp::spawn().await;
    // The format's hook waits on the restricted shell escape, which costs TeX no CPU, until a
    // file that only the body writes exists: the dump's check finds it, a later compile not.
    let document = |body: &str| {
        json!({ "timeout_seconds": 10, "input_latex": format!(
            "\\documentclass{{article}}\n\\makeatletter\n\\ifdefined\\MYLATEX@cleanup \\gdef\\slowfmt{{1}}\\fi\n\\makeatother\n\
             \\AtBeginDocument{{\\ifdefined\\slowfmt\\IfFileExists{{marker.txt}}{{}}{{\\loop\\ifnum\\pdfelapsedtime<1114112 \
             \\immediate\\write18{{kpsewhich main.tex}}\\repeat}}\\fi}}\n\\begin{{document}}\n\
             \\newwrite\\mk\\immediate\\openout\\mk=marker.txt \\immediate\\write\\mk{{x}}\\immediate\\closeout\\mk\n{body}\n\\end{{document}}\n") })
    };
    let slowed = second_after(&app, document("First."), document("Second.")).await;
    assert!(succeeded_text(&app, &slowed).await.contains("Second."));
    let log = app.log(slowed.id()).await;
    assert!(
        log.contains("a pass with the project's preamble format ran out of its time"),
        "{log}"
    );
    // Dropped: the job says so, and the preamble is not dumped again while it is unchanged.
    assert_eq!(slowed["preamble_cache"], "miss", "{slowed:#}");
    let third = app.compile(document("Third.")).await;
    assert_eq!(third["preamble_cache"], "unavailable", "{third:#}");
    assert!(succeeded_text(&app, &third).await.contains("Third."));
}
