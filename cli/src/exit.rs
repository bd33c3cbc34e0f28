//! How the client commands end, as exit codes a script can act on (listed in `texfleet --help`
//! and docs/CLIENT.md), and the one line that says why.

use crate::api_error::ApiError;
use std::process::ExitCode;

/// The classes of ending, each its own exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything worked.
    Success = 0,
    /// The document failed: a compile error, a timeout, a limit, a cancelled job, or errors in
    /// a PDF without `--allow-errors`.
    DocumentFailed = 1,
    /// The command or its input is wrong: flags, local files, a request the server refused
    /// as invalid, an unknown job.
    Usage = 2,
    /// The token is missing, wrong, revoked, expired or for another project.
    Auth = 3,
    /// The server or the network is unavailable (after retries): worth trying again later.
    Unavailable = 4,
    /// Interrupted (Ctrl-C); a running job was cancelled.
    Interrupted = 130,
}

/// The text `texfleet --help` shows under the commands.
pub const EXIT_CODES_HELP: &str = "\
Exit codes of the client commands (compile, status, log, cancel, list, page, webhook):
  0    success
  1    the document failed (compile error, timeout, a limit, cancelled; errors without --allow-errors);
       for webhook verify: the signature is not valid
  2    usage: bad flags or local files, a request the server refused as invalid, an unknown job
  3    authentication or permission: no, bad, revoked or expired token, or another project's
  4    the server or the network is unavailable (after retries): try again later
  130  interrupted by Ctrl-C (the job was cancelled)";

/// An ending of a given class with its message, for errors that are not the server's.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Failure {
            exit: Exit::Usage,
            message: message.into(),
        })
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The class of an error that ended a client command.
pub fn classify(error: &anyhow::Error) -> Exit {
    for cause in error.chain() {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            return failure.exit;
        }
        if let Some(api) = cause.downcast_ref::<ApiError>() {
            return match api.status {
                401 | 403 => Exit::Auth,
                429 | 500..=599 => Exit::Unavailable,
                _ => Exit::Usage,
            };
        }
        if cause.downcast_ref::<reqwest::Error>().is_some() {
            return Exit::Unavailable;
        }
        if cause.downcast_ref::<std::io::Error>().is_some() {
            return Exit::Usage;
        }
    }
    Exit::Unavailable
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_the_documented_codes() {
        let api = |status| {
            anyhow::Error::new(ApiError {
                status,
                code: String::new(),
                detail: String::new(),
                fields: Vec::new(),
                missing_sha256: Vec::new(),
            })
        };
        assert_eq!(classify(&api(401)), Exit::Auth);
        assert_eq!(classify(&api(403)), Exit::Auth);
        assert_eq!(classify(&api(404)), Exit::Usage);
        assert_eq!(classify(&api(422)), Exit::Usage);
        assert_eq!(classify(&api(429)), Exit::Unavailable);
        assert_eq!(classify(&api(503)), Exit::Unavailable);
        assert_eq!(classify(&Failure::usage("x")), Exit::Usage);
        let local = anyhow::Error::new(std::io::Error::other("x")).context("reading a.tex");
        assert_eq!(classify(&local), Exit::Usage);
        for (exit, code) in [
            (Exit::DocumentFailed, 1),
            (Exit::Usage, 2),
            (Exit::Auth, 3),
            (Exit::Unavailable, 4),
            (Exit::Interrupted, 130),
        ] {
            assert!(EXIT_CODES_HELP.contains(&format!("  {code} ")), "{exit:?}");
        }
    }
}
