//! Takes the compile's results out of the sandbox's stdout, trusting nothing in it.
//!
//! The supervisor runs beside hostile code, so its archive is read as hostile too: only regular
//! entries with exactly the expected names are taken, each at most once and only up to its cap;
//! links, directories, devices and unknown names are passed over and logged.

use std::io::Read;
use texfleet_sandbox::{Report, LOG_FILE, PDF_FILE, REPORT_FILE};

const MAX_REPORT_BYTES: u64 = 64 * 1024;

#[derive(Debug, Default)]
pub struct Collected {
    pub report: Option<Report>,
    pub pdf: Option<Vec<u8>>,
    pub log: Option<Vec<u8>>,
    /// An output was larger than its cap.
    pub over_cap: bool,
}

pub fn collect(stdout: &[u8], max_pdf_bytes: u64, max_log_bytes: u64) -> Collected {
    let mut collected = Collected::default();
    let mut archive = tar::Archive::new(stdout);
    let entries = match archive.entries() {
        Ok(entries) => entries,
        Err(error) => {
            tracing::warn!(%error, "sandbox output is not an archive");
            return collected;
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                tracing::warn!(%error, "sandbox archive is damaged; stopped reading it");
                break;
            }
        };
        let name = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&name).into_owned();
        if !entry.header().entry_type().is_file() {
            tracing::warn!(name, "sandbox archive entry is not a regular file; ignored");
            continue;
        }
        let (slot, cap) = match name.as_str() {
            PDF_FILE => (&mut collected.pdf, max_pdf_bytes),
            LOG_FILE => (&mut collected.log, max_log_bytes),
            REPORT_FILE => {
                let mut bytes = Vec::new();
                if (&mut entry)
                    .take(MAX_REPORT_BYTES)
                    .read_to_end(&mut bytes)
                    .is_ok()
                {
                    collected.report = serde_json::from_slice(&bytes).ok();
                }
                continue;
            }
            _ => {
                tracing::warn!(name, "unexpected entry in sandbox archive; ignored");
                continue;
            }
        };
        if slot.is_some() {
            tracing::warn!(name, "duplicate entry in sandbox archive; ignored");
            continue;
        }
        let mut bytes = Vec::new();
        if (&mut entry).take(cap + 1).read_to_end(&mut bytes).is_err() {
            break;
        }
        if bytes.len() as u64 > cap {
            collected.over_cap = true;
            bytes.truncate(cap as usize);
        }
        *slot = Some(bytes);
    }
    collected
}

/// A PDF we are willing to store: a PDF header at the start and an end-of-file marker near the
/// end, with something between them.
pub fn is_valid_pdf(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(1024)..];
    bytes.len() > 64 && bytes.starts_with(b"%PDF-") && tail.windows(5).any(|w| w == b"%%EOF")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive as a hostile sandbox could write it: names are set raw, `..` included.
    fn archive(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, content) in entries {
            let mut header = tar::Header::new_old();
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_entry_type(*kind);
            header.set_size(content.len() as u64);
            if *kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").unwrap();
            }
            header.set_cksum();
            builder.append(&header, *content).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn takes_expected_regular_files() {
        let report = br#"{"exit_code":0,"signal":null,"limit":null,"duration_ms":5,"cpu_ms":4,"max_rss_kb":1,"notes":[]}"#;
        let bytes = archive(&[
            (REPORT_FILE, tar::EntryType::Regular, report),
            (PDF_FILE, tar::EntryType::Regular, b"%PDF-1.5 pdf"),
            (LOG_FILE, tar::EntryType::Regular, b"log"),
        ]);
        let collected = collect(&bytes, 100, 100);
        assert_eq!(collected.report.unwrap().duration_ms, 5);
        assert_eq!(collected.pdf.as_deref(), Some(&b"%PDF-1.5 pdf"[..]));
        assert_eq!(collected.log.as_deref(), Some(&b"log"[..]));
        assert!(!collected.over_cap);
    }

    #[test]
    fn ignores_links_unknown_names_and_duplicates_and_caps_sizes() {
        let bytes = archive(&[
            (PDF_FILE, tar::EntryType::Symlink, b""),
            ("../../etc/cron.d/x", tar::EntryType::Regular, b"x"),
            (LOG_FILE, tar::EntryType::Regular, b"0123456789"),
            (LOG_FILE, tar::EntryType::Regular, b"second"),
        ]);
        let collected = collect(&bytes, 100, 4);
        assert!(collected.pdf.is_none());
        assert!(collected.report.is_none());
        assert_eq!(collected.log.as_deref(), Some(&b"0123"[..]));
        assert!(collected.over_cap);
    }

    #[test]
    fn garbage_yields_nothing() {
        let collected = collect(b"not a tar archive at all", 100, 100);
        assert!(collected.report.is_none() && collected.pdf.is_none() && collected.log.is_none());
    }

    #[test]
    fn pdf_validity() {
        let mut pdf = b"%PDF-1.7\n".to_vec();
        pdf.extend(std::iter::repeat_n(b'x', 100));
        pdf.extend_from_slice(b"\n%%EOF\n");
        assert!(is_valid_pdf(&pdf));
        assert!(!is_valid_pdf(b""));
        assert!(!is_valid_pdf(&pdf[..50]));
        assert!(!is_valid_pdf(&[b"<html>".as_slice(), &pdf].concat()));
    }
}
