//! Takes the compile's results out of the sandbox's stdout, trusting nothing in it.
//!
//! The stream must be a tar archive whose first entry is the report, carrying this run's
//! nonce, followed by the outputs with exactly the expected names, each at most once, each a
//! regular file up to its cap. Anything else (a second report, an unknown or repeated name, a
//! link, a report without the nonce or with values out of bounds) makes the whole stream
//! invalid: the job then has no report, and no PDF from it is ever stored.

use std::io::Read;
use texfleet_sandbox::{
    DriverState, Report, DRIVER_STATE_FILE, FORMAT_FILE, LOG_FILE, MAX_FORMAT_BYTES,
    MAX_STATE_BYTES, MAX_THUMBNAIL_BYTES, PDF_FILE, REPORT_FILE, SYNCTEX_FILE, THUMBNAIL_FILE,
};

const MAX_REPORT_BYTES: u64 = 64 * 1024;
const MAX_NOTES: usize = 20;
const MAX_NOTE_CHARS: usize = 300;

#[derive(Debug, Default)]
pub struct Collected {
    pub report: Option<Report>,
    pub pdf: Option<Vec<u8>>,
    pub log: Option<Vec<u8>>,
    pub synctex: Option<Vec<u8>>,
    /// What the driver left for the next compile of the document; None when it was larger
    /// than its cap or not what the protocol says (it speeds compiles up, nothing more).
    pub state: Option<DriverState>,
    /// A dumped preamble format, when it fits its cap.
    pub format: Option<Vec<u8>>,
    /// The first page's thumbnail, when it fits its cap (checked before it is stored).
    pub thumbnail: Option<Vec<u8>>,
    /// An output was larger than its cap.
    pub over_cap: bool,
}

/// What the report may say, from what the scheduler itself knows of the run.
pub struct Bounds {
    pub nonce: String,
    /// The longest the compile can have run: the timeout plus the kill grace.
    pub max_duration_ms: u64,
    pub max_rss_kb: u64,
    pub max_pdf_bytes: u64,
    pub max_log_bytes: u64,
    pub max_synctex_bytes: u64,
}

pub fn collect(stdout: &[u8], bounds: &Bounds) -> Collected {
    let mut collected = Collected::default();
    match read_archive(stdout, bounds, &mut collected) {
        Ok(()) => collected,
        Err(reason) => {
            tracing::warn!(reason, "sandbox output refused");
            Collected::default()
        }
    }
}

fn read_archive(stdout: &[u8], bounds: &Bounds, collected: &mut Collected) -> Result<(), String> {
    let mut archive = tar::Archive::new(stdout);
    let mut seen_optional = std::collections::HashSet::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("not an archive: {e}"))?;
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| format!("damaged archive: {e}"))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if !entry.header().entry_type().is_file() {
            return Err(format!("entry {name:?} is not a regular file"));
        }
        if (index == 0) != (name == REPORT_FILE) {
            return Err(format!(
                "entry {index} is {name:?}; the report must come first, once"
            ));
        }
        let (slot, cap) = match name.as_str() {
            REPORT_FILE => {
                let mut bytes = Vec::new();
                (&mut entry)
                    .take(MAX_REPORT_BYTES)
                    .read_to_end(&mut bytes)
                    .map_err(|e| format!("unreadable report: {e}"))?;
                let report = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("unreadable report: {e}"))?;
                collected.report = Some(checked(report, bounds)?);
                continue;
            }
            PDF_FILE => (&mut collected.pdf, bounds.max_pdf_bytes),
            LOG_FILE => (&mut collected.log, bounds.max_log_bytes),
            SYNCTEX_FILE => (&mut collected.synctex, bounds.max_synctex_bytes),
            DRIVER_STATE_FILE | FORMAT_FILE | THUMBNAIL_FILE => {
                if !seen_optional.insert(name.clone()) {
                    return Err(format!("entry {name:?} appears twice"));
                }
                let cap = match name.as_str() {
                    DRIVER_STATE_FILE => MAX_STATE_BYTES,
                    THUMBNAIL_FILE => MAX_THUMBNAIL_BYTES,
                    _ => MAX_FORMAT_BYTES,
                };
                let bytes = read_entry(&mut entry, &name, cap)?;
                if bytes.len() as u64 > cap {
                    continue;
                }
                match name.as_str() {
                    DRIVER_STATE_FILE => {
                        collected.state = serde_json::from_slice(&bytes)
                            .ok()
                            .map(DriverState::bounded)
                    }
                    THUMBNAIL_FILE => collected.thumbnail = Some(bytes),
                    _ => collected.format = Some(bytes),
                }
                continue;
            }
            _ => return Err(format!("unexpected entry {name:?}")),
        };
        if slot.is_some() {
            return Err(format!("entry {name:?} appears twice"));
        }
        let mut bytes = read_entry(&mut entry, &name, cap)?;
        if bytes.len() as u64 > cap {
            collected.over_cap = true;
            bytes.truncate(cap as usize);
        }
        *slot = Some(bytes);
    }
    if collected.report.is_none() {
        return Err("no report".to_string());
    }
    Ok(())
}

/// Up to `cap + 1` bytes of an entry: one more than its cap tells that it was larger.
fn read_entry(entry: &mut impl Read, name: &str, cap: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    entry
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("unreadable entry {name:?}: {e}"))?;
    Ok(bytes)
}

/// The report if it carries the nonce and every value is within what the run could produce;
/// its notes are cut to size and cleaned of control characters.
fn checked(mut report: Report, bounds: &Bounds) -> Result<Report, String> {
    if report.nonce != bounds.nonce {
        return Err("the report does not carry this run's nonce".to_string());
    }
    if report.duration_ms > bounds.max_duration_ms {
        return Err(format!(
            "duration_ms {} is out of bounds",
            report.duration_ms
        ));
    }
    // CPU time across processes may exceed wall time on several cores, not by more than that.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    if report.cpu_ms > bounds.max_duration_ms.saturating_mul(cores) {
        return Err(format!("cpu_ms {} is out of bounds", report.cpu_ms));
    }
    if report.max_rss_kb > bounds.max_rss_kb {
        return Err(format!("max_rss_kb {} is out of bounds", report.max_rss_kb));
    }
    if report
        .signal
        .is_some_and(|signal| !(1..=64).contains(&signal))
    {
        return Err("signal out of bounds".to_string());
    }
    report.notes.truncate(MAX_NOTES);
    for note in &mut report.notes {
        *note = note
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_NOTE_CHARS)
            .collect();
    }
    Ok(report)
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

    const BOUNDS: Bounds = Bounds {
        nonce: String::new(),
        max_duration_ms: 10_000,
        max_rss_kb: 1024 * 1024,
        max_pdf_bytes: 100,
        max_log_bytes: 4,
        max_synctex_bytes: 100,
    };

    fn bounds() -> Bounds {
        Bounds {
            nonce: "n0nce".into(),
            ..BOUNDS
        }
    }

    fn report(nonce: &str, duration_ms: u64) -> Vec<u8> {
        format!(r#"{{"nonce":"{nonce}","exit_code":0,"signal":null,"limit":null,"duration_ms":{duration_ms},"cpu_ms":4,"max_rss_kb":1,"notes":["a\u0000b"]}}"#).into_bytes()
    }

    const REGULAR: tar::EntryType = tar::EntryType::Regular;

    #[test]
    fn takes_the_report_then_the_expected_files() {
        let report = report("n0nce", 5);
        let bytes = archive(&[
            (REPORT_FILE, REGULAR, &report),
            (PDF_FILE, REGULAR, b"%PDF-1.5 pdf"),
            (LOG_FILE, REGULAR, b"0123456789"),
            (SYNCTEX_FILE, REGULAR, b"sync"),
            (THUMBNAIL_FILE, REGULAR, b"png"),
        ]);
        let collected = collect(&bytes, &bounds());
        let report = collected.report.unwrap();
        assert_eq!(report.duration_ms, 5);
        assert_eq!(report.notes, ["ab"], "control characters are dropped");
        assert_eq!(collected.pdf.as_deref(), Some(&b"%PDF-1.5 pdf"[..]));
        assert_eq!(collected.log.as_deref(), Some(&b"0123"[..]));
        assert_eq!(collected.synctex.as_deref(), Some(&b"sync"[..]));
        assert_eq!(collected.thumbnail.as_deref(), Some(&b"png"[..]));
        assert!(collected.over_cap);
    }

    #[test]
    fn refuses_forged_repeated_misplaced_or_unbounded_reports() {
        let honest = report("n0nce", 5);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "wrong nonce",
                archive(&[(REPORT_FILE, REGULAR, &report("guess", 5))]),
            ),
            (
                "duration out of bounds",
                archive(&[(REPORT_FILE, REGULAR, &report("n0nce", u64::MAX))]),
            ),
            (
                "second report",
                archive(&[
                    (REPORT_FILE, REGULAR, &honest),
                    (REPORT_FILE, REGULAR, &honest),
                ]),
            ),
            (
                "report not first",
                archive(&[(LOG_FILE, REGULAR, b"x"), (REPORT_FILE, REGULAR, &honest)]),
            ),
            (
                "duplicate pdf",
                archive(&[
                    (REPORT_FILE, REGULAR, &honest),
                    (PDF_FILE, REGULAR, b"a"),
                    (PDF_FILE, REGULAR, b"b"),
                ]),
            ),
            (
                "unknown name",
                archive(&[
                    (REPORT_FILE, REGULAR, &honest),
                    ("../../etc/cron.d/x", REGULAR, b"x"),
                ]),
            ),
            (
                "symlink",
                archive(&[
                    (REPORT_FILE, REGULAR, &honest),
                    (PDF_FILE, tar::EntryType::Symlink, b""),
                ]),
            ),
            ("no report", archive(&[(PDF_FILE, REGULAR, b"%PDF")])),
            ("garbage", b"not a tar archive at all".to_vec()),
        ];
        for (name, bytes) in cases {
            let collected = collect(&bytes, &bounds());
            assert!(
                collected.report.is_none() && collected.pdf.is_none() && collected.log.is_none(),
                "{name} was accepted"
            );
        }
    }

    #[test]
    fn takes_what_is_handed_on_only_when_well_formed_within_its_cap_and_once() {
        let report = report("n0nce", 5);
        let state = br#"{"next":{"files":[{"path":"output.aux","content_base64":"eA=="}],"tools":{}},"dump":{"result":"built","reads":["a.sty"]}}"#;
        let collected = collect(
            &archive(&[
                (REPORT_FILE, REGULAR, &report),
                (DRIVER_STATE_FILE, REGULAR, state),
                (FORMAT_FILE, REGULAR, b"fmt"),
            ]),
            &bounds(),
        );
        let kept = collected.state.unwrap();
        assert_eq!(kept.next.files[0].path, "output.aux");
        assert_eq!(
            kept.dump,
            Some(texfleet_sandbox::Dump::Built {
                reads: vec!["a.sty".into()]
            })
        );
        assert_eq!(collected.format.as_deref(), Some(&b"fmt"[..]));

        // Not the protocol: no state, and the compile's own outputs are still taken.
        let collected = collect(
            &archive(&[
                (REPORT_FILE, REGULAR, &report),
                (DRIVER_STATE_FILE, REGULAR, b"{\"next\":7}"),
                (LOG_FILE, REGULAR, b"ok"),
            ]),
            &bounds(),
        );
        assert!(collected.state.is_none() && collected.log.is_some());
        // Over its cap: dropped, not truncated, and no output limit for the job.
        let mut huge = br#"{"next":{"files":[],"tools":{}},"dump":null}"#.to_vec();
        huge.resize(MAX_STATE_BYTES as usize + 1, b' ');
        let collected = collect(
            &archive(&[
                (REPORT_FILE, REGULAR, &report),
                (DRIVER_STATE_FILE, REGULAR, &huge),
            ]),
            &bounds(),
        );
        assert!(collected.report.is_some() && collected.state.is_none() && !collected.over_cap);
        // Twice: the whole stream is refused.
        let twice = archive(&[
            (REPORT_FILE, REGULAR, &report),
            (FORMAT_FILE, REGULAR, b"a"),
            (FORMAT_FILE, REGULAR, b"b"),
        ]);
        assert!(collect(&twice, &bounds()).report.is_none());
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
