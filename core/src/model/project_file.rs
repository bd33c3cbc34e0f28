//! Project files by content: a project uploads a file's bytes once, and its submissions name
//! them by SHA-256 from then on, so that an edit sends only what changed. The store is per
//! project (never shared, so that no project learns what another holds).

use uuid::Uuid;

/// A SHA-256, as the routes and requests spell it: 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> ContentHash {
        use sha2::{Digest, Sha256};
        ContentHash(Sha256::digest(bytes).into())
    }

    /// Parses 64 hex digits (either case); anything else is None.
    pub fn parse(text: &str) -> Option<ContentHash> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut bytes = [0; 32];
        for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(ContentHash(bytes))
    }

    /// Lowercase hex.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Display for ContentHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

/// A file of a job named by the hash of a project file rather than sent with the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    pub path: String,
    pub sha256: ContentHash,
}

/// `projects/<project_id>/files/<sha256 hex>`: below the project, so that deleting a project's
/// data deletes its files.
pub fn project_file_key(project_id: Uuid, sha256: &ContentHash) -> String {
    format!("{}{sha256}", project_files_prefix(project_id))
}

/// Where a project's files live.
fn project_files_prefix(project_id: Uuid) -> String {
    format!("{}files/", super::project_prefix(project_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints_and_nothing_else() {
        let hash = ContentHash::of(b"abc");
        assert_eq!(
            hash.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(ContentHash::parse(&hash.hex()), Some(hash));
        assert_eq!(ContentHash::parse(&hash.hex().to_uppercase()), Some(hash));
        for bad in [
            "",
            "ab",
            &hash.hex()[1..],
            &format!("{}0", hash.hex()),
            &"g".repeat(64),
        ] {
            assert_eq!(ContentHash::parse(bad), None, "{bad:?}");
        }
        // Multi-byte characters never reach from_str_radix.
        assert_eq!(ContentHash::parse(&"é".repeat(32)), None);
    }
}
