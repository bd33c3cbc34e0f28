//! What the sandbox image holds, read from the image itself when the scheduler starts and
//! registered in Postgres for the API (`db::register_image`): its TeX Live year (the image's
//! `org.texfleet.texlive` label, set by sandbox-image/base/build.sh) and the index of LaTeX
//! packages and classes that its build wrote. The index is read through the archive API from a
//! container that is created and never started, and bounded and checked like anything read
//! from a container.

use crate::docker::Sandbox;
use crate::Context;
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::io::Read;
use texfleet_core::db;
use uuid::Uuid;

/// The index of the image's packages and classes, which sandbox-image/base/package-index.py
/// writes.
const INDEX: &str = "/usr/share/texfleet/packages.json";
const MAX_INDEX_BYTES: usize = 16 * 1024 * 1024;
const MAX_FILES: usize = 100_000;
const MAX_NAME_BYTES: usize = 128;
const MAX_VERSION_CHARS: usize = 200;

/// Registers the image's year and packages, unless the fleet knows the image already.
pub async fn register(context: &Context, sandbox: &Sandbox) -> anyhow::Result<()> {
    let index = sandbox.read_image_file(INDEX).await?;
    let files = parse_index(&index)?;
    db::register_image(&context.db, sandbox.image_id(), sandbox.texlive(), &files).await?;
    tracing::info!(
        texlive = sandbox.texlive(),
        files = files.len(),
        "sandbox image registered"
    );
    Ok(())
}

/// `{"<name>.sty" | "<name>.cls": "<version>"}`, each name a plain file name and each value
/// a short line of text.
fn parse_index(bytes: &[u8]) -> anyhow::Result<BTreeMap<String, String>> {
    let index: BTreeMap<String, String> = serde_json::from_slice(bytes)?;
    anyhow::ensure!(
        index.len() <= MAX_FILES,
        "{} files in the index",
        index.len()
    );
    index
        .into_iter()
        .map(|(file, version)| {
            let plain = file.len() <= MAX_NAME_BYTES
                && (file.ends_with(".sty") || file.ends_with(".cls"))
                && file
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\');
            anyhow::ensure!(plain, "{file:?} is not a package or class file name");
            let version: String = version
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_VERSION_CHARS)
                .collect();
            Ok((file, version))
        })
        .collect()
}

impl Sandbox {
    /// One file of the image, through the archive API of a container that never starts.
    async fn read_image_file(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let label = format!("catalogue-{}", Uuid::new_v4());
        let container = self
            .create(&format!("texfleet-{label}"), &label, &["true"])
            .await?;
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(path)
            .build();
        let mut archive = Vec::new();
        let mut stream = self
            .docker
            .download_from_container(&container, Some(options));
        let mut read = Ok(());
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) if archive.len() + chunk.len() <= MAX_INDEX_BYTES + 4096 => {
                    archive.extend_from_slice(&chunk)
                }
                Ok(_) => {
                    read = Err(anyhow::anyhow!(
                        "{path} is larger than {MAX_INDEX_BYTES} bytes"
                    ));
                    break;
                }
                Err(error) => {
                    read = Err(error.into());
                    break;
                }
            }
        }
        drop(stream);
        self.discard(&container).await;
        read?;
        let mut entries = tar::Archive::new(archive.as_slice());
        let mut entry = entries
            .entries()?
            .next()
            .ok_or_else(|| anyhow::anyhow!("{path} is not in the image"))??;
        anyhow::ensure!(
            entry.header().entry_type().is_file(),
            "{path} is not a file"
        );
        let mut bytes = Vec::new();
        entry
            .by_ref()
            .take(MAX_INDEX_BYTES as u64)
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_holds_package_and_class_names_with_short_versions_only() {
        let index = parse_index(
            br#"{"article.cls": "2024/06/29 v1.4n Standard LaTeX document class",
                 "hyperref.sty": "2024-11-05 v7.01l\u0007 Hypertext"}"#,
        )
        .unwrap();
        assert_eq!(index["hyperref.sty"], "2024-11-05 v7.01l Hypertext");
        assert_eq!(index.len(), 2);
        for bad in [
            br#"{"../x.sty": ""}"#.as_slice(),
            br#"{"a.tex": ""}"#,
            br#"{"a b.sty": ""}"#,
            br#"["a.sty"]"#,
        ] {
            assert!(
                parse_index(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!(r#"{{"a.sty": "{}"}}"#, "v".repeat(1000));
        assert_eq!(parse_index(long.as_bytes()).unwrap()["a.sty"].len(), 200);
    }
}
