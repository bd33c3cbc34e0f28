//! The project files a job names by hash, fetched before its compile: from this scheduler's
//! disk cache when a recent job of the project used them (an edit of one file compiles the
//! same figures again), else from S3, checked against their hash on the way (a store that
//! returns other bytes fails the attempt, never the document). The cache is bounded by
//! `project_files_cache_bytes`, least recently used first out, keyed by project and hash
//! (a project never reads another's copy), and starts empty with each process. The files are
//! streamed into the sandbox from there ([`crate::sandbox_input`]), never held in memory
//! whole; only a main document named by hash is read into the spec (up to 16 MiB).

use crate::job_spec::streaming_time;
use crate::metrics;
use crate::sandbox_input::OpenedFile;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use texfleet_core::model::{project_file_key, ClaimedJob, ContentHash, SourceFile};
use texfleet_core::storage::{Storage, StorageError};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};
use uuid::Uuid;

/// Files kept on this scheduler's disk for the next compiles.
pub struct FileCache {
    folder: PathBuf,
    limit: u64,
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    /// Each file's size and when it was last used (a counter).
    files: HashMap<(Uuid, ContentHash), (u64, u64)>,
    bytes: u64,
    clock: u64,
}

impl FileCache {
    /// A cache in `folder`, emptied now, of at most `limit` bytes (0: no cache).
    pub fn new(folder: PathBuf, limit: u64) -> std::io::Result<FileCache> {
        match std::fs::remove_dir_all(&folder) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        std::fs::create_dir_all(&folder)?;
        Ok(FileCache {
            folder,
            limit,
            index: Mutex::default(),
        })
    }

    /// This scheduler's own folder below the system's temporary one.
    pub fn folder_of(owner: &str) -> PathBuf {
        let name: String = owner
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        std::env::temp_dir().join(format!("texfleet-project-files-{name}"))
    }

    fn path(&self, project: Uuid, sha256: &ContentHash) -> PathBuf {
        self.folder.join(format!("{project}-{sha256}"))
    }

    /// Marks a file used, if it is here.
    fn touch(&self, project: Uuid, sha256: &ContentHash) -> bool {
        let mut index = self.index.lock().expect("not poisoned");
        index.clock += 1;
        let now = index.clock;
        match index.files.get_mut(&(project, *sha256)) {
            Some((_, used)) => {
                *used = now;
                true
            }
            None => false,
        }
    }

    /// Records a file written at its path, and deletes the least recently used ones past the
    /// limit.
    fn add(&self, project: Uuid, sha256: ContentHash, size: u64) {
        let evicted = {
            let mut index = self.index.lock().expect("not poisoned");
            index.clock += 1;
            let now = index.clock;
            if index.files.insert((project, sha256), (size, now)).is_none() {
                index.bytes += size;
            }
            let mut evicted = Vec::new();
            while index.bytes > self.limit {
                let Some((&key, &(size, _))) =
                    index.files.iter().min_by_key(|(_, (_, used))| *used)
                else {
                    break;
                };
                index.files.remove(&key);
                index.bytes -= size;
                evicted.push(key);
            }
            metrics::PROJECT_FILE_CACHE_BYTES.set(index.bytes as i64);
            evicted
        };
        self.delete(&evicted);
    }

    /// Deletes the copies of `files`, out of the index already.
    fn delete(&self, files: &[(Uuid, ContentHash)]) {
        for (project, sha256) in files {
            let _ = std::fs::remove_file(self.path(*project, sha256));
        }
    }
}

impl FileCache {
    /// Every file here, by project and hash.
    pub fn files(&self) -> Vec<(Uuid, ContentHash)> {
        let index = self.index.lock().expect("not poisoned");
        index.files.keys().copied().collect()
    }

    /// Deletes `files` from here (a job that opened one keeps reading it).
    pub fn forget(&self, files: &[(Uuid, ContentHash)]) {
        {
            let mut index = self.index.lock().expect("not poisoned");
            for key in files {
                if let Some((size, _)) = index.files.remove(key) {
                    index.bytes -= size;
                }
            }
            metrics::PROJECT_FILE_CACHE_BYTES.set(index.bytes as i64);
        }
        self.delete(files);
    }
}

impl Drop for FileCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// Why a job's project files could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("the store returned other bytes for project file {0}")]
    Corrupt(ContentHash),
    #[error("the disk cache failed: {0}")]
    Disk(#[from] std::io::Error),
    /// Slower than the job's timeout and the floor rate of its bytes allow
    /// ([`crate::job_spec::deadline`]): a job's time bounds how long it holds a slot.
    #[error("the project files took longer to arrive than the job's timeout allows")]
    OutOfTime,
}

/// A job's files as its compile takes them: the main document read into `job.files`, the
/// other files it names by hash left in `job.stored_files` and opened, in that order, in
/// `streamed`.
pub struct Fetched {
    pub job: ClaimedJob,
    pub streamed: Vec<OpenedFile>,
}

/// The largest main document named by hash that is read into the spec; a larger one is
/// streamed, and its preamble is not kept as a format (the scheduler does not read it).
const MAX_READ_MAIN_BYTES: u64 = 16 * 1024 * 1024;

/// `job`'s project files, fetched into the disk cache and opened there, within `allowed` and
/// the time each file downloaded takes at the floor rate.
pub async fn fetch(
    cache: &FileCache,
    storage: &Storage,
    mut job: ClaimedJob,
    allowed: Duration,
) -> Result<Fetched, FetchError> {
    let mut deadline = Instant::now() + allowed;
    let mut streamed = Vec::new();
    let mut stored_files = Vec::new();
    for named in std::mem::take(&mut job.stored_files) {
        let project = job.project_id;
        let mut opened = open(cache, storage, project, &named.sha256, &mut deadline).await?;
        if named.path == job.main && opened.size <= MAX_READ_MAIN_BYTES {
            let mut content = Vec::with_capacity(opened.size as usize);
            opened.file.read_to_end(&mut content).await?;
            job.files.push(SourceFile {
                path: named.path,
                content,
            });
        } else {
            stored_files.push(named);
            streamed.push(opened);
        }
    }
    job.stored_files = stored_files;
    Ok(Fetched { job, streamed })
}

/// The project file from the disk cache, or else from S3 through it.
async fn open(
    cache: &FileCache,
    storage: &Storage,
    project: Uuid,
    sha256: &ContentHash,
    deadline: &mut Instant,
) -> Result<OpenedFile, FetchError> {
    let path = cache.path(project, sha256);
    let hit = cache.touch(project, sha256);
    metrics::PROJECT_FILE_CACHE
        .with_label_values(&[if hit { "hit" } else { "miss" }])
        .inc();
    if hit {
        match tokio::fs::File::open(&path).await {
            Ok(file) => {
                let size = file.metadata().await?.len();
                return Ok(OpenedFile { size, file });
            }
            // Evicted by another job between the touch and the open.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
    }
    let opened = download(storage, project, sha256, &path, deadline).await?;
    cache.add(project, *sha256, opened.size);
    Ok(opened)
}

/// Reads the project file from S3 and writes it to `path` as it arrives (through a temporary
/// file beside it, renamed only once its hash is checked), and returns it open at its start.
/// `deadline` gains the file's time at the floor rate once its length is known.
async fn download(
    storage: &Storage,
    project: Uuid,
    sha256: &ContentHash,
    path: &Path,
    deadline: &mut Instant,
) -> Result<OpenedFile, FetchError> {
    let got = timeout_at(*deadline, storage.get(&project_file_key(project, sha256))).await;
    let mut object = got.map_err(|_| FetchError::OutOfTime)??;
    let length = object.content_length.unwrap_or(0).max(0) as u64;
    *deadline += streaming_time(length);
    let deadline = *deadline;
    let partial = path.with_extension(format!("part-{:016x}", rand::random::<u64>()));
    let written = async {
        let mut file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&partial)
            .await?;
        let mut hasher = Sha256::new();
        let mut size = 0;
        while let Some(chunk) = timeout_at(deadline, object.body.try_next())
            .await
            .map_err(|_| FetchError::OutOfTime)?
            .map_err(|error| StorageError::Failed {
                context: error.to_string(),
                source: Box::new(error),
            })?
        {
            hasher.update(&chunk);
            size += chunk.len() as u64;
            file.write_all(&chunk).await?;
        }
        file.flush().await?;
        if ContentHash(hasher.finalize().into()) != *sha256 {
            return Err(FetchError::Corrupt(*sha256));
        }
        tokio::fs::rename(&partial, path).await?;
        file.seek(std::io::SeekFrom::Start(0)).await?;
        Ok(OpenedFile { size, file })
    }
    .await;
    if written.is_err() {
        let _ = tokio::fs::remove_file(&partial).await;
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_files_go_first_past_the_limit() {
        let folder = std::env::temp_dir().join(format!("texfleet-cache-test-{}", Uuid::new_v4()));
        let cache = FileCache::new(folder.clone(), 10).unwrap();
        let project = Uuid::new_v4();
        let [a, b, c] = [b"a", b"b", b"c"].map(|bytes| ContentHash::of(bytes));
        for (hash, size) in [(a, 4), (b, 4)] {
            std::fs::write(cache.path(project, &hash), vec![0; size]).unwrap();
            cache.add(project, hash, size as u64);
        }
        assert!(cache.touch(project, &a));
        std::fs::write(cache.path(project, &c), [0; 4]).unwrap();
        cache.add(project, c, 4);
        assert!(cache.touch(project, &a) && cache.touch(project, &c));
        assert!(!cache.touch(project, &b), "b was the least recently used");
        assert!(!cache.path(project, &b).exists());
        assert!(
            !cache.touch(Uuid::new_v4(), &a),
            "another project's copy is not this one's"
        );
        drop(cache);
        assert!(!folder.exists(), "the cache goes with its scheduler");
    }
}
