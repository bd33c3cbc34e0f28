//! The sandbox images the fleet runs (migration V15): what each holds, registered by the
//! schedulers that run it, read by the API's `GET /info/packages/{name}`.

use super::{DbResult, Pool, PooledClient};
use std::collections::BTreeMap;

/// Registers the image `image_id` of TeX Live `texlive` with its LaTeX packages and classes
/// (`<name>.sty` / `<name>.cls` and the version each file states), unless it is registered
/// already: an image never changes under its id.
pub async fn register_image(
    pool: &Pool,
    image_id: &str,
    texlive: &str,
    files: &BTreeMap<String, String>,
) -> DbResult<()> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    let inserted = transaction
        .execute(
            "INSERT INTO sandbox_images (image_id, texlive) VALUES ($1, $2)
             ON CONFLICT (image_id) DO NOTHING",
            &[&image_id, &texlive],
        )
        .await?;
    if inserted == 1 {
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        let versions: Vec<&str> = files.values().map(String::as_str).collect();
        transaction
            .execute(
                "INSERT INTO sandbox_image_files (image_id, file, version)
                 SELECT $1, file, version FROM unnest($2::text[], $3::text[]) AS f (file, version)",
                &[&image_id, &names, &versions],
            )
            .await?;
    }
    transaction.commit().await?;
    Ok(())
}

/// A package or class file of an image: its name and the version it states.
pub struct ImageFile {
    pub file: String,
    pub version: String,
}

/// The TeX Live year of `image_id` and its files `<name>.sty` and `<name>.cls`; None when the
/// image is not registered.
pub async fn image_files(
    client: &PooledClient,
    image_id: &str,
    name: &str,
) -> DbResult<Option<(String, Vec<ImageFile>)>> {
    let Some(image) = client
        .query_opt(
            "SELECT texlive FROM sandbox_images WHERE image_id = $1",
            &[&image_id],
        )
        .await?
    else {
        return Ok(None);
    };
    let files = client
        .query(
            "SELECT file, version FROM sandbox_image_files
             WHERE image_id = $1 AND file = ANY($2) ORDER BY file",
            &[
                &image_id,
                &vec![format!("{name}.cls"), format!("{name}.sty")],
            ],
        )
        .await?
        .iter()
        .map(|row| ImageFile {
            file: row.get(0),
            version: row.get(1),
        })
        .collect();
    Ok(Some((image.get(0), files)))
}
