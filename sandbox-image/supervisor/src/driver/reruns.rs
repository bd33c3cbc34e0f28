//! What the log says about another pass: a file TeX looked for and missed that now exists (a
//! `.toc` written at the end: "No file output.toc."), or a package asking for a rerun. File
//! names from the log are only compared with files on disk, never passed to a program.

use super::fingerprints::fingerprint;
use std::path::PathBuf;
use texfleet_sandbox::is_plain_relative;

/// Files the log says TeX looked for and did not find ("No file output.toc."), which exist now.
pub fn missing_then_present(log: &str) -> Vec<PathBuf> {
    log.lines()
        .filter_map(|line| line.strip_prefix("No file ")?.strip_suffix('.'))
        .map(PathBuf::from)
        .filter(|path| is_plain_relative(path) && fingerprint(path).is_some())
        .collect()
}

/// Whether a package asked in the log for another run.
pub fn log_asks_for_rerun(log: &str) -> bool {
    const REQUESTS: &[&str] = &[
        "Rerun to get",
        "Label(s) may have changed",
        "Please rerun LaTeX",
        "Rerun LaTeX",
        "rerun LaTeX",
        "has changed. Rerun",
    ];
    // biblatex's "Please (re)run Biber ... and rerun LaTeX afterwards" is for the tool, which
    // the driver runs when its input changed; repeated while biber is skipped, it would only
    // cost passes.
    log.lines()
        .filter(|line| !line.contains("rerun LaTeX afterwards"))
        .any(|line| REQUESTS.iter().any(|request| line.contains(request)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rerun_requests_are_recognised() {
        assert!(log_asks_for_rerun(
            "LaTeX Warning: Label(s) may have changed. Rerun to get cross-references right."
        ));
        assert!(log_asks_for_rerun(
            "Package rerunfilecheck Warning: File `output.out' has changed. Rerun to get outlines right"
        ));
        assert!(!log_asks_for_rerun(
            "LaTeX Warning: Citation `x' undefined."
        ));
        assert!(!log_asks_for_rerun(
            "Package biblatex Warning: Please (re)run Biber on the file:\n(biblatex)                output\n(biblatex)                and rerun LaTeX afterwards."
        ));
        assert!(log_asks_for_rerun(
            "Package biblatex Warning: Please rerun LaTeX."
        ));
    }
}
