//! The cap on how many documents of one project have a compile state kept
//! ([`crate::compile_state`]). Each document's state is bounded (8 MiB of auxiliary files and a
//! 64 MiB format), but without a cap a project could grow the bucket without end, one main path
//! at a time. Only a project's first compile of a document can add one, so that is when the
//! project's documents are counted; each compile rewrites its document's `state.json`, so the
//! documents whose newest object is oldest are the ones compiled longest ago, and go first.

use crate::Context;
use std::collections::HashMap;
use std::time::SystemTime;
use texfleet_core::model::project_documents_prefix;
use uuid::Uuid;

/// Deletes the states of a project's documents beyond the newest `config.kept_documents_per_project`.
/// Failures are logged: the bucket's lifecycle rule still expires what is left.
pub async fn trim(context: &Context, project_id: Uuid) {
    let prefix = project_documents_prefix(project_id);
    let objects = match context.storage.list_written(&prefix).await {
        Ok(objects) => objects,
        Err(error) => {
            tracing::warn!(%error, "could not list the project's kept documents");
            return;
        }
    };
    let keep = context.config.kept_documents_per_project.max(1);
    for key in beyond_the_newest(&prefix, objects, keep) {
        if let Err(error) = context.storage.delete(&key).await {
            tracing::warn!(%error, key, "could not delete a dropped document's state");
        }
    }
}

/// The objects of every document but the `keep` written to last, a document being the folder
/// below `prefix` and its time that of its newest object.
fn beyond_the_newest(prefix: &str, objects: Vec<(String, SystemTime)>, keep: usize) -> Vec<String> {
    let mut documents: HashMap<String, (SystemTime, Vec<String>)> = HashMap::new();
    for (key, written) in objects {
        let Some(document) = key
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('/'))
            .map(|(document, _)| document.to_string())
        else {
            continue;
        };
        let entry = documents
            .entry(document)
            .or_insert((SystemTime::UNIX_EPOCH, Vec::new()));
        entry.0 = entry.0.max(written);
        entry.1.push(key);
    }
    let mut documents: Vec<_> = documents.into_values().collect();
    documents.sort_by_key(|(written, _)| std::cmp::Reverse(*written));
    documents
        .into_iter()
        .skip(keep)
        .flat_map(|(_, objects)| objects)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn drops_every_object_of_the_documents_compiled_longest_ago() {
        let at = |seconds| SystemTime::UNIX_EPOCH + Duration::from_secs(seconds);
        let prefix = "projects/p/documents/";
        let objects = vec![
            ("projects/p/documents/old/state.json".to_string(), at(10)),
            ("projects/p/documents/old/preamble.fmt".to_string(), at(9)),
            // An old format, but the state beside it was written last: the newest document.
            ("projects/p/documents/new/state.json".to_string(), at(30)),
            ("projects/p/documents/new/preamble.fmt".to_string(), at(1)),
            ("projects/p/documents/mid/state.json".to_string(), at(20)),
            // Not in a document's folder: never deleted.
            ("projects/p/documents/stray".to_string(), at(0)),
        ];
        let mut dropped = beyond_the_newest(prefix, objects.clone(), 2);
        dropped.sort();
        assert_eq!(
            dropped,
            [
                "projects/p/documents/old/preamble.fmt",
                "projects/p/documents/old/state.json"
            ]
        );
        assert!(beyond_the_newest(prefix, objects, 3).is_empty());
    }
}
