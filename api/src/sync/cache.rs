//! The parsed SyncTeX files kept for the next queries (an editor asks on every click), and the
//! places to parse. Each project has a share of both: one project's files, however large or
//! many, neither push every other project's out of the cache nor hold every place to parse.

use super::synctex::Synctex;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

/// What the parsed files kept may weigh, in all.
const KEPT_BYTES: usize = 192 * 1024 * 1024;
/// What one project's kept files may weigh: beyond it, its own least recently queried go.
const KEPT_BYTES_PER_PROJECT: usize = KEPT_BYTES / 2;
/// What one parsed file may weigh: two of the largest fit in a project's share, four in the
/// cache, so that queries going between two large files do not parse each every time.
pub(super) const MAX_WEIGHT: usize = KEPT_BYTES / 4;
/// Files that cannot be queried, remembered (a few megabytes) so that each is read once: a
/// party would need this many jobs of its own to have one read again.
const UNREADABLE_KEPT: usize = 65_536;
/// Parses at once, each on a blocking thread; a project has one of them at most.
const PARSES: usize = 2;

/// The parsed SyncTeX files of the last jobs queried, and the places to parse.
pub struct SyncCache {
    parsed: Mutex<Kept>,
    parsing: Arc<Semaphore>,
    /// Each project's one place to parse, while a query of it holds or waits for one.
    projects_parsing: Mutex<HashMap<Uuid, Arc<Semaphore>>>,
}

/// Parsed files by their object's key, with their project, the least recently queried dropped
/// first, and the keys of files that cannot be queried.
struct Kept {
    files: lru::LruCache<String, (Uuid, Arc<Synctex>)>,
    bytes: usize,
    per_project: HashMap<Uuid, usize>,
    unreadable: lru::LruCache<String, &'static str>,
}

/// A place to parse: the project's own and one of the [`PARSES`].
pub(super) struct PlaceToParse {
    _project: OwnedSemaphorePermit,
    _any: OwnedSemaphorePermit,
}

impl SyncCache {
    pub fn new() -> SyncCache {
        SyncCache {
            parsed: Mutex::new(Kept {
                files: lru::LruCache::unbounded(),
                bytes: 0,
                per_project: HashMap::new(),
                unreadable: lru::LruCache::new(
                    std::num::NonZeroUsize::new(UNREADABLE_KEPT).expect("not 0"),
                ),
            }),
            parsing: Arc::new(Semaphore::new(PARSES)),
            projects_parsing: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<Result<Arc<Synctex>, &'static str>> {
        let mut kept = self.parsed.lock().expect("not poisoned");
        if let Some(why) = kept.unreadable.get(key) {
            return Some(Err(*why));
        }
        kept.files.get(key).map(|(_, synctex)| Ok(synctex.clone()))
    }

    /// Waits for a place to parse a file of `project`.
    pub(super) async fn place_to_parse(&self, project: Uuid) -> PlaceToParse {
        let own = {
            let mut places = self.projects_parsing.lock().expect("not poisoned");
            // A place that no query holds or waits for is forgotten.
            places.retain(|_, place| Arc::strong_count(place) > 1);
            places
                .entry(project)
                .or_insert_with(|| Arc::new(Semaphore::new(1)))
                .clone()
        };
        let own = own.acquire_owned().await.expect("never closed");
        let any = self.parsing.clone().acquire_owned().await;
        PlaceToParse {
            _project: own,
            _any: any.expect("never closed"),
        }
    }

    pub(super) fn keep(
        &self,
        key: String,
        project: Uuid,
        parsed: Result<Arc<Synctex>, &'static str>,
    ) {
        let mut kept = self.parsed.lock().expect("not poisoned");
        let synctex = match parsed {
            Ok(synctex) => synctex,
            Err(why) => {
                kept.unreadable.put(key, why);
                return;
            }
        };
        let weight = synctex.weight();
        if let Some((owner, replaced)) = kept.files.put(key, (project, synctex)) {
            kept.forget(owner, replaced.weight());
        }
        kept.bytes += weight;
        *kept.per_project.entry(project).or_default() += weight;
        while kept.per_project.get(&project).copied().unwrap_or(0) > KEPT_BYTES_PER_PROJECT {
            let oldest = kept
                .files
                .iter()
                .rev()
                .find(|(_, (owner, _))| *owner == project)
                .map(|(key, _)| key.clone());
            let Some((owner, dropped)) = oldest.and_then(|key| kept.files.pop(&key)) else {
                break;
            };
            kept.forget(owner, dropped.weight());
        }
        while kept.bytes > KEPT_BYTES {
            let Some((_, (owner, dropped))) = kept.files.pop_lru() else {
                break;
            };
            kept.forget(owner, dropped.weight());
        }
    }
}

impl Kept {
    fn forget(&mut self, project: Uuid, weight: usize) {
        self.bytes -= weight;
        if let Some(held) = self.per_project.get_mut(&project) {
            *held -= weight;
            if *held == 0 {
                self.per_project.remove(&project);
            }
        }
    }
}
