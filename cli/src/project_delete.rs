//! `texfleet project delete`: a project's data gone, as an operator erases a customer's. Its
//! tokens are revoked and its unfinished jobs cancelled (`db::close_project`); then its objects
//! are deleted (each job's outputs and page previews, its documents' kept state and its project
//! files, all below `projects/<id>/`); its rows go last (`db::delete_project`), so that a
//! deletion cut short is run again. A job a scheduler was finishing meanwhile cannot record
//! its outcome, and that scheduler deletes what it stored; an upload under way finds its
//! reservation gone, and the API deletes what it stored.

use anyhow::Context as _;
use texfleet_core::model::{page_previews_prefix, project_prefix, storage_keys};
use texfleet_core::storage::Storage;
use texfleet_core::{db, Config};
use uuid::Uuid;

/// Deletes `project`'s data and says what went.
pub async fn run(config: &Config, project: Uuid) -> anyhow::Result<()> {
    let pool = db::pool(config, &config.database_url)?;
    let client = pool.get().await?;
    anyhow::ensure!(
        db::project_exists(&**client, project).await?,
        "no project {project}"
    );
    let jobs = db::close_project(&**client, project).await?;
    let storage = Storage::new(config);
    let mut objects = 0;
    for &job in &jobs {
        let previews = storage.list(&page_previews_prefix(job)).await?;
        for key in storage_keys(job).into_iter().chain(previews) {
            storage
                .delete(&key)
                .await
                .with_context(|| format!("deleting {key}"))?;
            objects += 1;
        }
    }
    objects += delete_below(&storage, project).await?;
    db::delete_project(&**client, project).await?;
    // An upload under way stored its file after the first listing: once the rows are gone,
    // one still under way deletes what it stores itself.
    objects += delete_below(&storage, project).await?;
    println!(
        "deleted project {project}: {} job(s), {objects} object(s) or keys",
        jobs.len()
    );
    Ok(())
}

/// Deletes every object below the project's prefix; returns how many.
async fn delete_below(storage: &Storage, project: Uuid) -> anyhow::Result<usize> {
    let keys = storage.list(&project_prefix(project)).await?;
    for key in &keys {
        storage
            .delete(key)
            .await
            .with_context(|| format!("deleting {key}"))?;
    }
    Ok(keys.len())
}
