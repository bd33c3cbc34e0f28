//! `GET /info`: a client learns what the service compiles with and the limits in force, from
//! the running service.

use std::time::Duration;
use texfleet_e2e::TestApp;

#[tokio::test(flavor = "multi_thread")]
async fn info_names_the_installation_the_limits_and_the_running_image() {
    let app = TestApp::spawn_with(|config| {
        config.max_timeout_seconds = 123;
        config.max_body_bytes = 3 * 1024 * 1024;
    })
    .await;
    let response = app
        .http
        .get(format!("{}/info", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);

    let docker = bollard::Docker::connect_with_defaults().unwrap();
    let mut images = Vec::new();
    for (year, image) in &app.config.sandbox_images {
        let id = docker.inspect_image(image).await.unwrap().id.unwrap();
        images.push((year.clone(), id));
    }
    // The scheduler reports its images in a heartbeat soon after it starts.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let info = loop {
        let info = app.get_json("/info").await;
        if info["sandbox_image"] != serde_json::Value::Null
            || tokio::time::Instant::now() > deadline
        {
            break info;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let default = &app.config.default_texlive;
    let (_, default_image) = images.iter().find(|(year, _)| year == default).unwrap();
    assert_eq!(info["sandbox_image"], default_image.as_str(), "{info:#}");
    assert_eq!(info["year"], default.as_str());
    assert!(info["texlive"]
        .as_str()
        .unwrap()
        .contains(&format!("TeX Live {default}")));
    // Every year, oldest first, with the image the scheduler runs for it.
    let years = info["texlive_years"].as_array().unwrap();
    assert_eq!(years.len(), images.len(), "{info:#}");
    for (listed, (year, image)) in years.iter().zip(&images) {
        assert_eq!(listed["year"], year.as_str());
        assert_eq!(listed["sandbox_image"], image.as_str());
        assert!(listed["texlive"].as_str().unwrap().contains("Debian"));
    }
    assert_eq!(
        info["engines"],
        serde_json::json!(["pdflatex", "xelatex", "lualatex"])
    );
    let names = |key: &str| -> Vec<String> {
        info[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    for pack in [
        "texlive-lang-german",
        "texlive-lang-other",
        "texlive-lang-chinese",
    ] {
        assert!(
            names("language_packs").contains(&pack.to_string()),
            "{info:#}"
        );
    }
    assert!(names("collections").contains(&"texlive-latex-extra".to_string()));
    assert!(!names("collections")
        .iter()
        .any(|n| n.starts_with("texlive-lang-")));
    assert!(names("other_packages").contains(&"ghostscript".to_string()));
    let limits = &info["limits"];
    assert_eq!(limits["max_timeout_seconds"], 123);
    assert_eq!(limits["max_body_bytes"], 3 * 1024 * 1024);
    assert_eq!(
        limits["default_timeout_seconds"],
        app.config.default_timeout_seconds
    );
    assert_eq!(limits["max_files"], 500);
    assert_eq!(
        limits["max_queued_bytes_per_project"],
        app.config.max_queued_bytes_per_project
    );
    assert_eq!(limits["memory_mb"], app.config.sandbox_memory_mb);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_learns_whether_a_package_is_installed_without_a_compile() {
    let app = TestApp::spawn().await;
    let ask = |name: &'static str| {
        let app = &app;
        async move {
            let response = app.get(&format!("/info/packages/{name}")).await;
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };
    // The scheduler registers its image's packages as it starts.
    let class = texfleet_e2e::eventually_some(
        Duration::from_secs(60),
        "the image's packages registered",
        || async {
            let (status, answer) = ask("IEEEtran").await;
            (status == 200).then_some(answer)
        },
    )
    .await;
    assert_eq!(class["installed"], true, "{class:#}");
    assert_eq!(class["texlive"], "2024");
    assert_eq!(class["files"][0]["file"], "IEEEtran.cls");
    assert_eq!(class["files"][0]["kind"], "class");
    assert!(class["files"][0]["version"]
        .as_str()
        .unwrap()
        .contains("1.8"));
    let (_, package) = ask("siunitx").await;
    assert_eq!(package["files"][0]["kind"], "package", "{package:#}");
    let (status, missing) = ask("no-such-package-anywhere").await;
    assert_eq!((status, missing["installed"].clone()), (200, false.into()));
    assert_eq!(missing["files"], serde_json::json!([]));
    let (status, problem) = ask("..%2Fetc").await;
    assert_eq!(status, 422, "{problem:#}");
    assert_eq!(problem["errors"][0]["field"], "name");
}
