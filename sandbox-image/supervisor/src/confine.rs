//! What confines every process of the compile, beyond its uid: resource limits, the
//! environment, the OOM killer's preference, and Landlock, which lets the compile read only
//! the TeX trees, fonts and libraries, and write only its work directory and `/tmp`, whatever
//! the engine's own file checks allow. Landlock's signal scope keeps the compile from
//! signalling anything outside it (the supervisor, init), a second line behind the uids.

use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, RestrictionStatus, Ruleset,
    RulesetAttr, Scope, ABI,
};
use nix::sys::resource::{setrlimit, Resource};
use std::io;
use std::path::Path;
use texfleet_sandbox::execution::enforce;
use texfleet_sandbox::{JobSpec, MAX_THUMBNAIL_BYTES, WORK_DIR};

const MAX_OPEN_FILES: u64 = 256;
/// Per-job caches: luaotfload executes its cache files, so they never outlive the job.
pub const TEXMF_VAR: &str = "/tmp/texmf-var";
/// The compile's home, which does not exist: TEXMFHOME, fontconfig's and Ghostscript's
/// per-user files would otherwise be files the document writes.
pub const HOME: &str = "/nonexistent";

/// The newest Landlock ABI this code was written and tested against.
const LANDLOCK_ABI: ABI = ABI::V6;

/// Read-only hierarchies: programs and their libraries, the TeX trees and fonts, the linker's
/// cache and preload list, and the configuration of TeX, fontconfig, Ghostscript, the paper
/// sizes and Java. Nothing else of the image (no `/proc`, `/sys`, `/etc/passwd`, `/etc/hosts`),
/// nothing of the host.
const READABLE: &[&str] = &[
    "/usr",
    "/etc/texmf",
    "/etc/fonts",
    // fontconfig's cache of every font, built with the image: without it XeTeX would scan
    // every font file on each run.
    "/var/cache/fontconfig",
    "/etc/ghostscript",
    "/etc/paperspecs",
    "/etc/papersize",
    "/etc/libpaper.d",
    // Java's security settings, which the JVM of bib2gls reads at start.
    "/etc/java-17-openjdk",
    "/etc/java-21-openjdk",
    "/etc/java-25-openjdk",
    "/etc/ld.so.cache",
    // The library every program of TeX Live 2026 loads first (kpathsea-guard.c): unread, it
    // would be silently skipped.
    "/etc/ld.so.preload",
    "/var/lib/texmf",
    "/dev/urandom",
];
/// Read-write hierarchies of the compile: the job's tmpfs mounts.
pub const WRITABLE: &[&str] = &[WORK_DIR, "/tmp"];
/// What TeX itself may reach of them (a further layer on each engine run): of `/tmp` only the
/// job's caches. The rest of `/tmp` is the driver's (a tool's output, page renderings, the
/// shell escape's record), which a document must neither read nor write, whatever the
/// engine's own checks let through.
pub const ENGINE_WRITABLE: &[&str] = &[WORK_DIR, TEXMF_VAR];

/// Limits inherited by every process of the compile. CPU time is per process; the
/// supervisor's deadline bounds the whole compile.
pub fn set_limits(spec: &JobSpec) -> io::Result<()> {
    let cpu_seconds = u64::from(spec.timeout_seconds) + 1;
    let limits = [
        (Resource::RLIMIT_CPU, cpu_seconds),
        (Resource::RLIMIT_FSIZE, largest_file(spec) + 1),
        (Resource::RLIMIT_NOFILE, MAX_OPEN_FILES),
        (Resource::RLIMIT_CORE, 0),
    ];
    for (resource, limit) in limits {
        setrlimit(resource, limit, limit)
            .map_err(|e| io::Error::other(format!("setting {resource:?} to {limit}: {e}")))?;
    }
    Ok(())
}

/// The largest file the compile may write: the largest output cap, or more than the largest
/// source, which the driver writes under the same limit and which must not look like a file
/// that reached it.
pub fn largest_file(spec: &JobSpec) -> u64 {
    let largest_source = spec.files.iter().map(|file| match &file.streamed {
        Some(streamed) => streamed.bytes,
        None => file.content_base64.len() as u64 / 4 * 3,
    });
    spec.max_pdf_bytes
        .max(spec.max_log_bytes)
        .max(spec.max_synctex_bytes)
        .max(spec.thumbnail_width.map_or(0, |_| MAX_THUMBNAIL_BYTES))
        .max(largest_source.max().map_or(0, |bytes| bytes + 1))
}

/// When memory runs out, the kernel kills the compile rather than the supervisor. Best
/// effort: gVisor, whose memory limit is enforced outside it, has no such file.
pub fn prefer_for_oom_kill() -> io::Result<()> {
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    Ok(())
}

/// Restricts this process and all it starts to reading [`READABLE`] and `writable`, and
/// changing `writable` only. Best effort where the kernel lacks Landlock (gVisor, old
/// kernels): `texfleet sandbox check` reports what is enforced, and the scheduler refuses to
/// start where it is required and missing.
pub fn restrict_files(writable: &[&str]) -> io::Result<RestrictionStatus> {
    restrict(&[], writable)
}

/// [`restrict_files`] with `readable` besides [`READABLE`], and nothing writable.
pub fn restrict_to_reading(readable: &[&str]) -> io::Result<RestrictionStatus> {
    restrict(readable, &[])
}

fn restrict(readable: &[&str], writable: &[&str]) -> io::Result<RestrictionStatus> {
    let all = AccessFs::from_all(LANDLOCK_ABI);
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let mut rules = Vec::new();
    let file_rights = AccessFs::from_file(LANDLOCK_ABI);
    for (paths, access) in [(READABLE, read), (readable, read), (writable, all)] {
        for path in paths {
            // A path missing from this image has nothing to allow; a file takes only the
            // rights a file can have (asking more would leave the ruleset partly enforced).
            let Ok(metadata) = std::fs::metadata(path) else {
                continue;
            };
            let access = if metadata.is_dir() {
                access
            } else {
                access & file_rights
            };
            if let Ok(fd) = PathFd::new(path) {
                rules.push(PathBeneath::new(fd, access));
            }
        }
    }
    // /dev/null is read and written, never listed or executed.
    if let Ok(fd) = PathFd::new("/dev/null") {
        rules.push(PathBeneath::new(
            fd,
            AccessFs::ReadFile | AccessFs::WriteFile,
        ));
    }
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|ruleset| ruleset.scope(Scope::from_all(LANDLOCK_ABI)))
        .and_then(|ruleset| ruleset.create());
    enforce(ruleset, rules)
}

/// The whole environment of the compile: an allowlist, so nothing of the container's or the
/// host's environment leaks in. `directory` is the main document's folder, relative to the
/// work directory.
pub fn environment(spec: &JobSpec, directory: &Path) -> Vec<String> {
    let mut environment: Vec<String> = [
        "PATH=/usr/bin",
        "LANG=C.UTF-8",
        "TMPDIR=/tmp",
        // One log line per message, so that diagnostics can be parsed.
        "max_print_line=10000",
        "error_line=254",
        "half_error_line=238",
        // Metafont-only fonts would be made by shell scripts; there is no shell.
        "MKTEXPK=0",
        "MKTEXTFM=0",
        "MKTEXMF=0",
        "MKTEXFMT=0",
        "MKTEXTEX=0",
        // Dates in the PDF, \today included, come from SOURCE_DATE_EPOCH, so that the same
        // request gives the same bytes.
        "FORCE_SOURCE_DATE=1",
    ]
    .iter()
    .map(|entry| entry.to_string())
    .collect();
    environment.push(format!("HOME={HOME}"));
    // Caches are read from the image's (prebuilt, read-only) and written to the job's.
    environment.push(format!("TEXMFVAR={TEXMF_VAR}"));
    environment.push(format!("SOURCE_DATE_EPOCH={}", spec.source_date_epoch));
    if directory != Path::new("") {
        // A main document in a folder: its folder first, then the project's top level, then
        // TeX's own trees (the trailing colon).
        for variable in ["TEXINPUTS", "BIBINPUTS", "BSTINPUTS"] {
            environment.push(format!("{variable}=.:{WORK_DIR}:"));
        }
    }
    environment
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::disk_limit_reached;

    #[test]
    fn a_source_larger_than_every_output_cap_neither_passes_the_limit_nor_looks_cut() {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "nonce": "", "engine": "pdflatex", "halt_on_error": false, "timeout_seconds": 1,
            "max_pdf_bytes": 100, "max_log_bytes": 10, "max_synctex_bytes": 10,
            "main": "main.tex", "source_date_epoch": 0,
            "files": [{ "path": "main.tex", "content_base64": "eA==" },
                      { "path": "big.png", "streamed": { "bytes": 1000, "sha256": "" } }],
        }))
        .unwrap();
        assert!(largest_file(&spec) > 1000);
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("big.png"), vec![0; 1000]).unwrap();
        assert_eq!(
            disk_limit_reached(work.path(), largest_file(&spec) + 1),
            None
        );
        let at_the_limit = vec![0; largest_file(&spec) as usize];
        std::fs::write(work.path().join("output.pdf"), at_the_limit).unwrap();
        assert!(disk_limit_reached(work.path(), largest_file(&spec) + 1).is_some());
    }
}
