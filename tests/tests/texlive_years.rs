//! TeX Live years side by side: a job compiles with the year it names, in that year's image,
//! and neither the result cache nor the preamble format cache ever crosses years. Schedulers
//! with different images each claim only the jobs of their own years, and a job no scheduler
//! can run waits, counted.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use texfleet_e2e::ApiObject as _;
use texfleet_e2e::{eventually, free_port, scheduler_metric, SchedulerProcess, TestApp};

/// The LaTeX format's date, which each TeX Live year's image has its own of.
const FORMAT_VERSION: &str =
    "\\documentclass{article}\n\\begin{document}\nLaTeX of \\fmtversion.\n\\end{document}\n";

/// The images' ids by year, as the engine knows them.
async fn image_ids(app: &TestApp) -> BTreeMap<String, String> {
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    let mut ids = BTreeMap::new();
    for (year, image) in &app.config.sandbox_images {
        let id = docker.inspect_image(image).await.unwrap().id.unwrap();
        ids.insert(year.clone(), id);
    }
    ids
}

/// The date LaTeX printed in a job's PDF: `LaTeX of <date>.`
async fn format_date(app: &TestApp, job: &Value) -> String {
    let text = app.text_of(job.id()).await;
    let after = text.split("LaTeX of ").nth(1).expect("the document's text");
    after.split('.').next().unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_year_compiles_with_its_own_latex_in_its_own_image() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let ids = image_ids(&app).await;
    assert!(ids.len() >= 3, "three years are configured: {ids:?}");
    let mut dates = BTreeMap::new();
    for year in ids.keys() {
        let job = app
            .compile(json!({ "input_latex": FORMAT_VERSION, "texlive": year }))
            .await;
        assert_eq!(job["status"], "Succeeded", "{job:#}");
        assert_eq!(job["texlive"], year.as_str());
        assert_eq!(job["sandbox_image"], ids[year].as_str(), "{job:#}");
        dates.insert(year.clone(), format_date(&app, &job).await);
    }
    // LaTeX's release of each year: 2022-11-01 in TeX Live 2022, 2024-11-01 in 2024, ...
    for (year, date) in &dates {
        let (year, latex): (i32, i32) = (year.parse().unwrap(), date[..4].parse().unwrap());
        assert!(
            latex == year || latex == year - 1,
            "TeX Live {year}: LaTeX {date}"
        );
    }
    let distinct: std::collections::BTreeSet<_> = dates.values().collect();
    assert_eq!(distinct.len(), dates.len(), "{dates:?}");

    // A year the server does not have is refused, naming those it has.
    let response = app
        .post_compile(
            &json!({ "project_id": app.project_id, "input_latex": "x", "texlive": "2019" }),
        )
        .await;
    assert_eq!(response.status(), 422);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "texlive", "{problem:#}");
    let message = problem["errors"][0]["message"].as_str().unwrap();
    assert!(
        ids.keys().all(|year| message.contains(year.as_str())),
        "{message}"
    );

    // Without a year, the default year's.
    let job = app.compile(json!({ "input_latex": FORMAT_VERSION })).await;
    assert_eq!(job["texlive"], app.config.default_texlive.as_str());
}

/// IEEE's conference template, as IEEEtran ships it (tests/real-documents/ieeetran-bare-conf).
const IEEE_TEMPLATE: &str =
    include_str!("../real-documents/ieeetran-bare-conf/files/bare_conf.tex");

#[tokio::test(flavor = "multi_thread")]
async fn ieee_s_conference_template_compiles_in_every_year() {
    let app = TestApp::spawn().await;
    for year in app.config.sandbox_images.keys() {
        let job = app
            .compile(json!({ "input_latex": IEEE_TEMPLATE, "texlive": year }))
            .await;
        assert_eq!(job["status"], "Succeeded", "TeX Live {year}: {job:#}");
        let text = app.text_of(job.id()).await;
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for phrase in [
            "Bare Demo of IEEEtran.cls",
            "for IEEE Conferences",
            "NTRODUCTION",
        ] {
            assert!(
                text.contains(phrase),
                "TeX Live {year}: no {phrase:?} in {text}"
            );
        }
    }
}

/// MetaPost drawn by luamplib, whose macros (`plain.mp`) come with texlive-metapost, in every
/// year that offers LuaLaTeX.
#[tokio::test(flavor = "multi_thread")]
async fn luamplib_draws_in_every_year_with_lualatex() {
    let app = TestApp::spawn().await;
    let info = app.get_json("/info").await;
    for listed in info["texlive_years"].as_array().unwrap() {
        if !listed["engines"]
            .as_array()
            .unwrap()
            .contains(&json!("lualatex"))
        {
            continue;
        }
        let year = &listed["year"];
        let job = app
            .compile(json!({ "engine": "lualatex", "texlive": year, "input_latex":
                "\\documentclass{article}\\usepackage{luamplib}\\begin{document}\\begin{mplibcode}\n\
                 beginfig(1); draw fullcircle scaled 2cm; label(btex Drawn etex, origin); endfig;\n\
                 \\end{mplibcode}\\end{document}" }))
            .await;
        assert_eq!(job["status"], "Succeeded", "TeX Live {year}: {job:#}");
        let text = app.text_of(job.id()).await;
        assert!(text.contains("Drawn"), "TeX Live {year}: {text:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn neither_the_result_cache_nor_the_preamble_format_crosses_years() {
    let app = TestApp::spawn_with(|config| config.result_cache = true).await;
    let (old, new) = ("2022", app.config.default_texlive.clone());
    let first = app
        .compile(json!({ "input_latex": FORMAT_VERSION, "texlive": new }))
        .await;
    assert_eq!(first["status"], "Succeeded", "{first:#}");
    // The same request in the same year is the cache's; in another year, a compile of its own.
    let again = app
        .submit(json!({ "input_latex": FORMAT_VERSION, "texlive": new }))
        .await;
    assert_eq!(again["reused_from"], first["id"], "{again:#}");
    let other_year = app
        .compile(json!({ "input_latex": FORMAT_VERSION, "texlive": old }))
        .await;
    assert_eq!(other_year["reused_from"], Value::Null, "{other_year:#}");
    assert_eq!(other_year["texlive"], old);
    assert_ne!(
        format_date(&app, &other_year).await,
        format_date(&app, &first).await
    );

    // The preamble's format, dumped by one year's compile, loads into that year's next compile
    // of the document and never into another year's.
    let edited = |word: &str| {
        format!("\\documentclass{{article}}\n\\usepackage{{amsmath}}\n\\begin{{document}}\n{word} LaTeX of \\fmtversion.\n\\end{{document}}\n")
    };
    let dumped = app
        .compile(json!({ "input_latex": edited("One"), "texlive": new }))
        .await;
    assert_eq!(dumped["preamble_cache"], "miss", "{dumped:#}");
    let loaded = app
        .compile(json!({ "input_latex": edited("Two"), "texlive": new }))
        .await;
    assert_eq!(loaded["preamble_cache"], "hit", "{loaded:#}");
    let elsewhere = app
        .compile(json!({ "input_latex": edited("Three"), "texlive": old }))
        .await;
    assert_eq!(elsewhere["status"], "Succeeded", "{elsewhere:#}");
    assert_eq!(elsewhere["preamble_cache"], "miss", "{elsewhere:#}");
    assert_eq!(
        format_date(&app, &elsewhere).await,
        format_date(&app, &other_year).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn schedulers_of_different_years_each_claim_their_own_and_an_unserved_year_waits() {
    let app = TestApp::spawn_api_only(|_| {}).await;
    let ids = image_ids(&app).await;
    let (old, new) = ("2022".to_string(), app.config.default_texlive.clone());
    let only = |year: &str| {
        let mut config = app.config.clone();
        config.sandbox_images.retain(|known, _| known == year);
        config.scheduler_slots = 1;
        config
    };
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut new_config = only(&new);
    new_config.scheduler_metrics_addr = metrics.clone();
    let _new_scheduler =
        SchedulerProcess::spawn(&new_config, &format!("new-{}", uuid::Uuid::new_v4()));
    let waiting = app
        .submit(json!({ "input_latex": FORMAT_VERSION, "texlive": old }))
        .await;
    let served = app
        .compile(json!({ "input_latex": FORMAT_VERSION, "texlive": new }))
        .await;
    assert_eq!(served["sandbox_image"], ids[&new].as_str(), "{served:#}");
    // The scheduler of the default year never takes the other year's job: it waits, counted.
    let http = reqwest::Client::new();
    let unserved = || scheduler_metric(&http, &metrics, "texfleet_queue_unserved_jobs");
    eventually(
        Duration::from_secs(30),
        "the unserved job is counted",
        || async { unserved().await == Some(1.0) },
    )
    .await;
    let id = waiting.id();
    assert_eq!(
        app.get_json(&format!("/compile/{id}")).await["status"],
        "Queued"
    );

    // A scheduler of that year takes it.
    let _old_scheduler =
        SchedulerProcess::spawn(&only(&old), &format!("old-{}", uuid::Uuid::new_v4()));
    let done = app.wait_terminal(id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "Succeeded", "{done:#}");
    assert_eq!(done["sandbox_image"], ids[&old].as_str());
    eventually(Duration::from_secs(30), "nothing is unserved", || async {
        unserved().await == Some(0.0)
    })
    .await;
}
