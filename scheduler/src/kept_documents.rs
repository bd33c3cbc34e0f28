//! The caps on the compile state one project keeps ([`crate::compile_state`]): at most
//! `kept_documents_per_project` documents and `kept_bytes_per_project` bytes. Each document's
//! state is bounded (8 MiB of auxiliary files and a 64 MiB format), but without caps a project
//! could grow the bucket without end, one main path at a time. Only a compile that adds a
//! document or writes a format can pass a cap, so that is when the project is counted. Each
//! compile rewrites its document's `state.json`, so the documents whose newest object is oldest
//! are the ones compiled longest ago, and they go first; the one compiled last always stays.

use crate::Context;
use std::collections::HashMap;
use std::time::SystemTime;
use texfleet_core::model::project_documents_prefix;
use texfleet_core::storage::Listed;
use uuid::Uuid;

/// What a project may keep.
#[derive(Debug, Clone, Copy)]
struct Caps {
    documents: usize,
    bytes: u64,
}

/// Deletes the states of a project's documents beyond its caps. Failures are logged: the
/// bucket's lifecycle rule still expires what is left.
pub async fn trim(context: &Context, project_id: Uuid) {
    let prefix = project_documents_prefix(project_id);
    let objects = match context.storage.list_with_sizes(&prefix).await {
        Ok(objects) => objects,
        Err(error) => {
            tracing::warn!(%error, "could not list the project's kept documents");
            return;
        }
    };
    let caps = Caps {
        documents: context.config.kept_documents_per_project,
        bytes: context.config.kept_bytes_per_project,
    };
    for key in beyond_the_caps(&prefix, objects, caps) {
        if let Err(error) = context.storage.delete(&key).await {
            tracing::warn!(%error, key, "could not delete a dropped document's state");
        }
    }
}

/// The objects of every document past the caps, newest first, a document being the folder
/// below `prefix` and its time that of its newest object.
fn beyond_the_caps(prefix: &str, objects: Vec<Listed>, caps: Caps) -> Vec<String> {
    let mut documents: HashMap<String, (SystemTime, u64, Vec<String>)> = HashMap::new();
    for object in objects {
        let Some(document) = object
            .key
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('/'))
            .map(|(document, _)| document.to_string())
        else {
            continue;
        };
        let entry = documents
            .entry(document)
            .or_insert((SystemTime::UNIX_EPOCH, 0, Vec::new()));
        entry.0 = entry.0.max(object.written);
        entry.1 += object.bytes;
        entry.2.push(object.key);
    }
    let mut documents: Vec<_> = documents.into_values().collect();
    documents.sort_by_key(|(written, _, _)| std::cmp::Reverse(*written));
    let mut kept_bytes = 0;
    let mut dropped = Vec::new();
    for (index, (_, bytes, keys)) in documents.into_iter().enumerate() {
        kept_bytes += bytes;
        let within = index < caps.documents && kept_bytes <= caps.bytes;
        if index > 0 && !within {
            dropped.extend(keys);
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn drops_every_object_of_the_documents_compiled_longest_ago_past_either_cap() {
        let object = |key: &str, seconds, bytes| Listed {
            key: format!("projects/p/documents/{key}"),
            written: SystemTime::UNIX_EPOCH + Duration::from_secs(seconds),
            bytes,
        };
        let prefix = "projects/p/documents/";
        let objects = vec![
            object("old/state.json", 10, 1),
            object("old/preamble.fmt", 9, 1),
            // An old format, but the state beside it was written last: the newest document.
            object("new/state.json", 30, 1),
            object("new/preamble.fmt", 1, 100),
            object("mid/state.json", 20, 5),
            // Not in a document's folder: never deleted.
            object("stray", 0, 1),
        ];
        let dropped = |caps| {
            let mut dropped = beyond_the_caps(prefix, objects.clone(), caps);
            dropped.sort();
            dropped
        };
        let old = [
            "projects/p/documents/old/preamble.fmt",
            "projects/p/documents/old/state.json",
        ];
        let many = u64::MAX;
        assert_eq!(
            dropped(Caps {
                documents: 2,
                bytes: many
            }),
            old
        );
        assert!(dropped(Caps {
            documents: 3,
            bytes: many
        })
        .is_empty());
        // 101 bytes for the newest, 5 more for the next, 2 for the oldest.
        assert_eq!(
            dropped(Caps {
                documents: 3,
                bytes: 106
            }),
            old
        );
        assert_eq!(
            dropped(Caps {
                documents: 3,
                bytes: 1
            })
            .len(),
            3
        );
    }
}
