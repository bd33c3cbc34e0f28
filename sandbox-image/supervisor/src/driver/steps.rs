//! The steps of a compile: every program the driver runs (engine passes, and the tools
//! between them, bibtex, biber, makeindex and what builds on it, each only when its input
//! changed since it last ran), with the environment they run in, and the trace of what ran,
//! what was skipped and why, which the driver appends to the job's log.

use super::fingerprints::fingerprint;
use crate::process::{self, Exit, Program};
use nix::sys::resource::Resource;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::time::Instant;
use texfleet_sandbox::shell_escape;

/// The longest excerpt of a failing tool's own log copied into the job's log.
const MAX_TOOL_LOG_BYTES: usize = 4096;
/// Where a tool's standard output and error go, to be shown when it fails.
const TOOL_OUTPUT: &str = "/tmp/texfleet-tool-output";
/// The most lines of each kind about the shell escape one pass copies into the log, and how
/// much of the shell's record is read.
const MAX_SHELL_ESCAPE_LINES: usize = 20;
const MAX_RECORD_BYTES: u64 = 256 * 1024;

/// The steps of one compile, as they run.
pub struct Steps {
    pub environment: Vec<String>,
    /// The input signature each tool run last saw, by what it ran on (`bibtex output`).
    last_inputs: HashMap<String, u64>,
    /// Lines for the job's log.
    pub trace: Vec<String>,
    /// Whether Landlock confines every program (not under gVisor or an old kernel): tools
    /// whose only bound on reads is Landlock run only then.
    pub files_confined: bool,
    /// When set, no program starts past it, and each is ended then (an alarm, see
    /// [`super::on_alarm`]): what only speeds up the next compile must not take this one's
    /// timeout.
    pub until: Option<Instant>,
}

impl Steps {
    pub fn new(environment: Vec<String>) -> Steps {
        Steps {
            environment,
            last_inputs: HashMap::new(),
            trace: Vec::new(),
            files_confined: false,
            until: None,
        }
    }

    /// Runs `program` when `signature` (of what it reads) differs from its last run's, or when
    /// `output` is not what that run left (missing, or written since by another tool: biber
    /// and bibtex both write the `.bbl`). `tool_log` is the file where the program explains
    /// itself. Returns whether `output` changed, which calls for another pass.
    pub fn run_if_changed(
        &mut self,
        program: Program,
        signature: u64,
        output: &Path,
        tool_log: &Path,
    ) -> bool {
        let key = program.args.join(" ");
        let before = fingerprint(output);
        if before.is_some() && self.last_inputs.get(&key) == Some(&ran_on(signature, before)) {
            return false;
        }
        if self.run(&program).is_some_and(|exit| !exit.success()) {
            self.copy_log(tool_log);
        }
        let after = fingerprint(output);
        self.last_inputs.insert(key, ran_on(signature, after));
        after != before
    }

    /// Runs `program` to its end and records it in the trace, with what it printed when it
    /// failed. Returns how it ended, or None when it could not be started.
    pub fn run(&mut self, program: &Program) -> Option<Exit> {
        self.run_limited(program, &[])
    }

    /// [`Steps::run`] under limits of its own, below those the compile inherits.
    pub fn run_limited(&mut self, program: &Program, limits: &[(Resource, u64)]) -> Option<Exit> {
        let command = program.args.join(" ");
        // Past `until`, the alarm ends the program and whatever it started.
        let alarm = match self.until {
            Some(until) => match until.saturating_duration_since(Instant::now()).as_secs() {
                0 => {
                    self.trace
                        .push(format!("texfleet: did not run {command}: out of time"));
                    return None;
                }
                left => Some(left as u32),
            },
            None => None,
        };
        // A new file: what the last program left there may be a link or a FIFO.
        let _ = std::fs::remove_file(TOOL_OUTPUT);
        let output = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(TOOL_OUTPUT);
        let exit = match output {
            Ok(output) => process::run_within(program, Some(&output), limits, alarm),
            Err(error) => Err(error),
        };
        process::end_strays();
        match exit {
            Ok(exit) => {
                self.trace
                    .push(format!("texfleet: ran {command} ({})", describe(exit)));
                if !exit.success() {
                    self.copy_log(Path::new(TOOL_OUTPUT));
                }
                Some(exit)
            }
            Err(error) => {
                self.trace
                    .push(format!("texfleet: could not run {command}: {error}"));
                None
            }
        }
    }

    /// [`Steps::run_limited`], ended at `until` if it has not ended by then (and earlier when
    /// [`Steps::until`] is earlier).
    pub fn run_by(
        &mut self,
        program: &Program,
        limits: &[(Resource, u64)],
        until: Instant,
    ) -> Option<Exit> {
        let earlier = self
            .until
            .replace(self.until.map_or(until, |u| u.min(until)));
        let exit = self.run_limited(program, limits);
        self.until = earlier;
        exit
    }

    /// Takes the input signatures of an earlier compile's tool runs, whose outputs were restored.
    pub fn remember(&mut self, signatures: &BTreeMap<String, u64>) {
        self.last_inputs.extend(
            signatures
                .iter()
                .map(|(tool, signature)| (tool.clone(), *signature)),
        );
    }

    /// Forgets every tool's last inputs: the next of each runs whatever its input.
    pub fn forget(&mut self) {
        self.last_inputs.clear();
    }

    /// The input signature of each tool's last run, for the next compile.
    pub fn signatures(&self) -> BTreeMap<String, u64> {
        self.last_inputs
            .iter()
            .map(|(tool, signature)| (tool.clone(), *signature))
            .collect()
    }

    /// What the last program run printed, at most `max` bytes of it.
    pub fn last_output(&self, max: u64) -> Vec<u8> {
        read_bounded(Path::new(TOOL_OUTPUT), max)
    }

    /// Records that a step was not taken, and why.
    pub fn skip(&mut self, why: String) {
        if !self.trace.contains(&format!("texfleet: skipped {why}")) {
            self.trace.push(format!("texfleet: skipped {why}"));
        }
    }

    /// What the shell escape did during a pass, as the restricted shell recorded it: the
    /// commands it refused, then those it ran, each list cut with a count of the rest. The
    /// record is emptied for the next pass.
    pub fn note_shell_escapes(&mut self) {
        let record = read_bounded(Path::new(shell_escape::RECORD_FILE), MAX_RECORD_BYTES);
        let record = String::from_utf8_lossy(&record);
        let _ = std::fs::remove_file(shell_escape::RECORD_FILE);
        if record.len() as u64 >= MAX_RECORD_BYTES {
            self.trace.push(format!(
                "texfleet: the shell escape's record passed {MAX_RECORD_BYTES} bytes; what came after is not shown"
            ));
        }
        for prefix in [shell_escape::REFUSAL, shell_escape::RAN] {
            let lines: Vec<&str> = record.lines().filter(|l| l.starts_with(prefix)).collect();
            self.trace.extend(
                lines.iter().take(MAX_SHELL_ESCAPE_LINES).map(|line| {
                    format!("texfleet: {}", line.chars().take(400).collect::<String>())
                }),
            );
            if lines.len() > MAX_SHELL_ESCAPE_LINES {
                self.trace.push(format!(
                    "texfleet: and {} more lines like that",
                    lines.len() - MAX_SHELL_ESCAPE_LINES
                ));
            }
        }
    }

    fn copy_log(&mut self, tool_log: &Path) {
        let Ok(bytes) = std::fs::read(tool_log) else {
            return;
        };
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_TOOL_LOG_BYTES)]);
        self.trace
            .push(format!("texfleet: {}:", tool_log.display()));
        self.trace
            .extend(text.lines().map(|line| format!("  {line}")));
    }
}

pub fn describe(exit: Exit) -> String {
    match exit {
        Exit::Code(code) => format!("exit {code}"),
        Exit::Signal(signal) => format!("killed by signal {signal}"),
    }
}

/// What a tool's run is remembered by: the signature of its input and what it left.
fn ran_on(signature: u64, output: Option<u64>) -> u64 {
    signature_of(&format!("{signature} {output:?}"))
}

/// A signature of some text: what a tool reads of a larger file (an aux file's citations).
pub fn signature_of(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The start of a file the compile may have written, read without following a link or
/// blocking on a FIFO; empty when there is none.
fn read_bounded(path: &Path, max: u64) -> Vec<u8> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = Vec::new();
    let opened = File::options()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    if let Ok(file) = opened {
        let _ = file.take(max).read_to_end(&mut bytes);
    }
    bytes
}
