//! The job's status, decided from what the scheduler observed of a sandbox run. Only facts we
//! observed ourselves (our deadline, the stdout cap, the engine's OOM flag, the PDF bytes) can
//! make a job succeed or fail; the supervisor's report only refines which limit a failed job hit.

use crate::docker::DockerError;
use texfleet_core::model::{ErrorCode, JobError, JobStatus};
use texfleet_core::storage::StorageError;
use texfleet_sandbox::Limit;

/// Why a compile ended without an outcome to record. The messages are what a client may see
/// (in `error.message` once attempts run out): they name no Docker or S3 internals, which
/// stay in the source, for the logs.
#[derive(Debug, thiserror::Error)]
pub enum Interrupted {
    /// A failure of our infrastructure rather than of the document: worth another attempt.
    #[error("the sandbox could not be run")]
    Sandbox(#[source] DockerError),
    /// The container was killed from outside (SIGKILL of its init, not by our deadline nor the
    /// memory limit): nothing inside a sandbox can do that, so the host or an operator did.
    #[error("the sandbox was stopped from outside")]
    KilledFromOutside,
    #[error("the outputs could not be stored")]
    Storage(#[from] StorageError),
    #[error("the project files could not be fetched")]
    Files(#[from] crate::project_files::FetchError),
    #[error("the job was taken from this scheduler")]
    Stopped,
    /// Claimed, but of a TeX Live year this scheduler has no image of (claims prevent it).
    #[error("this scheduler has no sandbox image of the job's TeX Live year")]
    Unserved,
}

/// Exit status of a container whose init was killed by SIGKILL (128 + 9).
pub const KILLED: i64 = 137;

/// What a finished sandbox run showed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observed {
    /// Our outer deadline passed and we killed the container.
    pub deadline_hit: bool,
    /// More than the cap came out on stdout, or an output was over its cap.
    pub output_over_cap: bool,
    /// The kernel's OOM killer fired in the container.
    pub oom_killed: bool,
    /// The limit the supervisor's report names, if any.
    pub reported_limit: Option<Limit>,
    /// A valid report came out of the sandbox (see `collect`).
    pub has_report: bool,
    /// A PDF we are willing to store came out.
    pub pdf_ok: bool,
    /// The log has at least one error diagnostic.
    pub has_errors: bool,
    /// How the compile driver ended, by the report: `Some(0)` when every engine pass and
    /// tool it needed ended well. The log and the PDF are the document's to write (LuaTeX's
    /// `wrapup_run` can rewrite both after a failed pass), the driver's exit status is not.
    pub driver_exit: Option<i32>,
    /// The signal that killed the compile driver, by the report.
    pub driver_signal: Option<i32>,
    pub halt_on_error: bool,
    /// The job's check is `"error"` and chktex found something or could not run: the
    /// document was not compiled. (The driver says so; a driver the document forged could only
    /// fail its own job.)
    pub check_stopped: bool,
}

/// Which failure wins when several apply, in order: timeout, output limit, memory, a missing
/// or invalid report, a killed driver, a check that stopped the compile, no PDF, errors under
/// `halt_on_error` (in the log or in the driver's exit status). A container that ended by itself
/// without a valid report failed the document, not our infrastructure: it is not retried.
/// `first_error` is the message of the log's first error, shown when no PDF came out.
pub fn decide(
    observed: &Observed,
    timeout_seconds: u32,
    first_error: Option<&str>,
) -> (JobStatus, Option<JobError>) {
    let limit = observed.reported_limit;
    let failure = if observed.deadline_hit || matches!(limit, Some(Limit::Timeout | Limit::CpuTime))
    {
        Some((
            JobStatus::TimedOut,
            ErrorCode::Timeout,
            format!("compile exceeded {timeout_seconds} seconds"),
        ))
    } else if observed.output_over_cap || limit == Some(Limit::Output) {
        Some((
            JobStatus::Failed,
            ErrorCode::OutputLimit,
            "the PDF or the log exceeded its size limit".to_string(),
        ))
    } else if observed.oom_killed || limit == Some(Limit::Memory) {
        Some((
            JobStatus::Failed,
            ErrorCode::MemoryLimit,
            "compile exceeded the memory limit".to_string(),
        ))
    } else if !observed.has_report {
        Some((
            JobStatus::Failed,
            ErrorCode::CompileError,
            "the compile ended without a valid report from its sandbox".to_string(),
        ))
    } else if let Some(signal) = observed.driver_signal {
        Some((
            JobStatus::Failed,
            ErrorCode::CompileError,
            format!("the compile was killed by signal {signal}"),
        ))
    } else if observed.check_stopped {
        Some((
            JobStatus::Failed,
            ErrorCode::CompileError,
            "the document was not compiled: the check is \"error\" and chktex found problems (see the diagnostics) or could not run (see the log)".to_string(),
        ))
    } else if !observed.pdf_ok {
        let message = first_error.map_or("no PDF was produced".to_string(), |error| {
            format!("no PDF was produced: {error}")
        });
        Some((JobStatus::Failed, ErrorCode::CompileError, message))
    } else if observed.halt_on_error && (observed.has_errors || observed.driver_exit != Some(0)) {
        Some((
            JobStatus::Failed,
            ErrorCode::CompileError,
            "the document has errors and halt_on_error is set".to_string(),
        ))
    } else {
        None
    };
    match failure {
        Some((status, code, message)) => (status, Some(JobError { code, message })),
        None => (JobStatus::Succeeded, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: Observed = Observed {
        deadline_hit: false,
        output_over_cap: false,
        oom_killed: false,
        reported_limit: None,
        has_report: true,
        pdf_ok: true,
        has_errors: false,
        driver_exit: Some(0),
        driver_signal: None,
        halt_on_error: false,
        check_stopped: false,
    };

    /// A decision: the status and error code.
    type Decided = (JobStatus, Option<ErrorCode>);

    #[test]
    fn the_first_failure_in_order_wins() {
        let table: &[(&str, Observed, Decided)] = &[
            ("clean", CLEAN, (JobStatus::Succeeded, None)),
            (
                "errors without halt_on_error still succeed",
                Observed {
                    has_errors: true,
                    ..CLEAN
                },
                (JobStatus::Succeeded, None),
            ),
            (
                "errors with halt_on_error",
                Observed {
                    has_errors: true,
                    halt_on_error: true,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::CompileError)),
            ),
            (
                "a failed engine with halt_on_error, whatever the log says",
                Observed {
                    driver_exit: Some(1),
                    halt_on_error: true,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::CompileError)),
            ),
            (
                "a failed engine without halt_on_error still succeeds",
                Observed {
                    driver_exit: Some(1),
                    ..CLEAN
                },
                (JobStatus::Succeeded, None),
            ),
            (
                "a killed driver, whatever PDF came out",
                Observed {
                    driver_exit: None,
                    driver_signal: Some(9),
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::CompileError)),
            ),
            (
                "a check that stopped the compile, whatever PDF came out",
                Observed {
                    check_stopped: true,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::CompileError)),
            ),
            (
                "no PDF",
                Observed {
                    pdf_ok: false,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::CompileError)),
            ),
            (
                "no valid report is the document's failure, whatever PDF came out",
                Observed {
                    has_report: false,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::CompileError)),
            ),
            (
                "memory beats a missing report",
                Observed {
                    has_report: false,
                    oom_killed: true,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::MemoryLimit)),
            ),
            (
                "reported memory limit",
                Observed {
                    reported_limit: Some(Limit::Memory),
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::MemoryLimit)),
            ),
            (
                "output beats memory",
                Observed {
                    output_over_cap: true,
                    oom_killed: true,
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::OutputLimit)),
            ),
            (
                "reported output limit",
                Observed {
                    reported_limit: Some(Limit::Output),
                    ..CLEAN
                },
                (JobStatus::Failed, Some(ErrorCode::OutputLimit)),
            ),
            (
                "timeout beats everything",
                Observed {
                    deadline_hit: true,
                    output_over_cap: true,
                    oom_killed: true,
                    has_report: false,
                    ..CLEAN
                },
                (JobStatus::TimedOut, Some(ErrorCode::Timeout)),
            ),
            (
                "reported CPU time is a timeout",
                Observed {
                    reported_limit: Some(Limit::CpuTime),
                    ..CLEAN
                },
                (JobStatus::TimedOut, Some(ErrorCode::Timeout)),
            ),
        ];
        for (name, observed, expected) in table {
            let (status, error) = decide(observed, 10, Some("Undefined control sequence."));
            assert_eq!(&(status, error.map(|e| e.code)), expected, "{name}");
        }
    }

    #[test]
    fn a_missing_pdf_names_the_first_error() {
        let observed = Observed {
            pdf_ok: false,
            ..CLEAN
        };
        let (_, error) = decide(&observed, 10, Some("Undefined control sequence."));
        assert_eq!(
            error.unwrap().message,
            "no PDF was produced: Undefined control sequence."
        );
    }
}
