use super::*;

#[test]
fn environment_overrides_file_and_defaults() {
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file(
            "texfleet.toml",
            "s3_bucket = \"from-file\"\nsandbox_cpus = 2.5",
        )?;
        jail.set_env("TEXFLEET_S3_BUCKET", "from-env");
        let config = Config::load(Some(Path::new("texfleet.toml"))).map_err(|e| *e)?;
        assert_eq!(config.s3_bucket, "from-env");
        assert_eq!(config.sandbox_cpus, 2.5);
        assert_eq!(config.listen_addr, Config::default().listen_addr);
        Ok(())
    });
}

/// The example settings of `deploy/config/`, which operators copy, name only settings
/// that exist (a misspelt one would stop the service at start).
#[test]
fn deployment_examples_load() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/config");
    let mut loaded = 0;
    for entry in std::fs::read_dir(examples).unwrap() {
        let path = entry.unwrap().path();
        figment::Jail::expect_with(|jail| {
            jail.clear_env();
            Config::load(Some(&path)).map_err(|e| *e)?;
            Ok(())
        });
        loaded += 1;
    }
    assert_eq!(loaded, 3);
}

/// Every setting has a row in docs/CONFIGURATION.md, and every row is a setting.
#[test]
fn the_settings_document_names_every_setting() {
    let page = include_str!("../../../docs/CONFIGURATION.md");
    let documented: std::collections::BTreeSet<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .flat_map(|row| row.split(" |").next())
        .flat_map(|names| names.split(", "))
        .map(|name| name.trim_matches('`'))
        .collect();
    let defaults = serde_json::to_value(Config::default()).unwrap();
    let settings: std::collections::BTreeSet<&str> = defaults
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(documented, settings);
}

#[test]
fn a_project_s_queue_holds_at_least_one_body_of_the_largest_size() {
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file(
            "texfleet.toml",
            "max_body_bytes = 2000\nmax_queued_bytes_per_project = 1999",
        )?;
        let refused = Config::load(Some(Path::new("texfleet.toml"))).unwrap_err();
        assert!(refused
            .to_string()
            .contains("max_queued_bytes_per_project (1999)"));
        jail.create_file(
            "texfleet.toml",
            "max_body_bytes = 2000\nmax_queued_bytes_per_project = 2000",
        )?;
        Config::load(Some(Path::new("texfleet.toml"))).map_err(|e| *e)?;
        Ok(())
    });
}

#[test]
fn a_project_s_share_of_answers_holds_a_page_of_jobs() {
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file("texfleet.toml", "max_sending_bytes = 8388607")?;
        let refused = Config::load(Some(Path::new("texfleet.toml"))).unwrap_err();
        assert!(refused.to_string().contains("max_sending_bytes (8388607)"));
        jail.create_file("texfleet.toml", "max_sending_bytes = 8388608")?;
        Config::load(Some(Path::new("texfleet.toml"))).map_err(|e| *e)?;
        Ok(())
    });
}

#[test]
fn unknown_settings_are_rejected() {
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file("texfleet.toml", "s3_buckett = \"typo\"")?;
        assert!(Config::load(Some(Path::new("texfleet.toml"))).is_err());
        Ok(())
    });
}

#[test]
fn sandbox_images_come_by_year_from_the_environment_and_name_the_default() {
    figment::Jail::expect_with(|jail| {
        jail.clear_env();
        jail.set_env(
            "TEXFLEET_SANDBOX_IMAGES",
            r#"{2022="texfleet-sandbox:2022-ab12",2026="texfleet-sandbox:2026-cd34"}"#,
        );
        jail.set_env("TEXFLEET_DEFAULT_TEXLIVE", "2026");
        let config = Config::load(None).map_err(|e| *e)?;
        assert_eq!(config.sandbox_images["2022"], "texfleet-sandbox:2022-ab12");
        assert_eq!(config.texlive_years(), ["2022", "2026"]);
        assert_eq!(config.texlive_years_problem(), None);
        jail.set_env("TEXFLEET_DEFAULT_TEXLIVE", "2024");
        let refused = Config::load(None).map_err(|e| *e)?.texlive_years_problem();
        assert!(refused.unwrap().contains("2022, 2026"));
        Ok(())
    });
}
