//! The sandbox images a scheduler runs, one per TeX Live year (`sandbox_images`), all on one
//! Docker engine. A job compiles in the image of its own year; the scheduler claims only jobs
//! of these years. Engine-wide calls (ping, listing and removing containers) go through any
//! of them: they share the engine.

use crate::docker::Sandbox;
use std::collections::BTreeMap;
use texfleet_core::Config;

pub struct Sandboxes {
    by_year: BTreeMap<String, Sandbox>,
}

impl Sandboxes {
    /// Connects to the engine and finds every image of `sandbox_images` there, each labelled
    /// with the year it is configured for.
    pub async fn connect(
        config: &Config,
        scheduler_id: &str,
        deployment: &str,
    ) -> anyhow::Result<Sandboxes> {
        anyhow::ensure!(
            !config.sandbox_images.is_empty(),
            "sandbox_images is not set (TEXFLEET_SANDBOX_IMAGES='{{2024=\"texfleet-sandbox:2024-…\"}}')"
        );
        let docker = crate::docker_connect::connect_engine(config).await?;
        let mut by_year = BTreeMap::new();
        for (year, image) in &config.sandbox_images {
            let sandbox = Sandbox::of_image(
                docker.clone(),
                config,
                image,
                year,
                scheduler_id,
                deployment,
            )
            .await?;
            by_year.insert(year.clone(), sandbox);
        }
        Ok(Sandboxes { by_year })
    }

    /// The sandbox of TeX Live `year`, if this scheduler runs one.
    pub fn of(&self, year: &str) -> Option<&Sandbox> {
        self.by_year.get(year)
    }

    /// The years this scheduler serves, oldest first.
    pub fn years(&self) -> Vec<String> {
        self.by_year.keys().cloned().collect()
    }

    /// Each year's image id, as the heartbeat reports them.
    pub fn image_ids(&self) -> BTreeMap<String, String> {
        self.by_year
            .iter()
            .map(|(year, sandbox)| (year.clone(), sandbox.image_id().to_string()))
            .collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Sandbox> {
        self.by_year.values()
    }

    /// A sandbox for calls that concern the engine, not an image.
    pub fn engine(&self) -> &Sandbox {
        self.by_year
            .values()
            .next()
            .expect("connect refuses an empty map")
    }

    /// Waits for the container removals still under way in every image.
    pub async fn settle(&self) {
        for sandbox in self.iter() {
            sandbox.settle().await;
        }
    }
}
