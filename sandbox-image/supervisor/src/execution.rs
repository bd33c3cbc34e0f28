//! What a process of the compile may execute: a Landlock layer set in the process before it
//! execs a program, shared by the compile driver (each engine and tool) and the restricted
//! shell (each command it runs for TeX).

use landlock::{
    AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, RestrictionStatus, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope,
};
use std::io;

/// The dynamic loaders an ELF program may name: the kernel opens its loader for execution
/// too, so a program confined by [`restrict_execution`] must be allowed to run it.
const ELF_LOADERS: &[&str] = &["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"];

/// A further Landlock layer for one program, set in its process before exec: from then on it
/// may execute only `program` itself, the ELF loader and `others`, and signal nothing outside
/// itself (not the driver). A slip of a tool (a `system()` or `exec` on a path the document
/// named) then starts nothing. It is no boundary against native code: the ELF loader, which
/// the kernel needs to start any dynamically linked program, runs any readable binary given
/// as its argument, and Landlock checks only the file passed to execve.
pub fn restrict_execution(program: &str, others: &[String]) -> io::Result<()> {
    let mut rules = Vec::new();
    let allowed = std::iter::once(program)
        .chain(others.iter().map(String::as_str))
        .chain(ELF_LOADERS.iter().copied());
    for path in allowed {
        if let Ok(fd) = PathFd::new(path) {
            rules.push(PathBeneath::new(fd, AccessFs::Execute));
        }
    }
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::Execute)
        .and_then(|ruleset| ruleset.scope(Scope::Signal))
        .and_then(|ruleset| ruleset.create());
    enforce(ruleset, rules).map(drop)
}

/// Adds `rules` to a new ruleset and restricts this process (and all it starts) with it.
pub fn enforce(
    ruleset: Result<RulesetCreated, RulesetError>,
    rules: Vec<PathBeneath<PathFd>>,
) -> io::Result<RestrictionStatus> {
    ruleset
        .and_then(|ruleset| {
            rules
                .into_iter()
                .try_fold(ruleset, |ruleset, rule| ruleset.add_rule(rule))
        })
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(io::Error::other)
}
