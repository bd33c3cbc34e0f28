//! Databases made and dropped beside the deployment's own: each end-to-end test runs against
//! a database of its own, and so does `texfleet bench`'s ingest measurement.

use super::connect;

/// Creates an empty database beside the one `admin_url` names and returns its URL;
/// `admin_url` must be URL-form and name a role that may create databases.
pub async fn create_database(admin_url: &str, name: &str) -> anyhow::Result<String> {
    let client = connect(admin_url).await?;
    client
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await?;
    let (prefix, _) = admin_url
        .rsplit_once('/')
        .ok_or_else(|| anyhow::anyhow!("a URL-form database URL"))?;
    Ok(format!("{prefix}/{name}"))
}

/// Drops a database made by [`create_database`], whoever is still connected to it.
pub async fn drop_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let client = connect(admin_url).await?;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .await?;
    Ok(())
}
