//! Indexes and their kin, through makeindex: every `.idx` the pass wrote (makeidx, imakeidx's
//! several indexes, splitidx's shared file split here) and nomencl's `.nlo`; glossaries run
//! makeindex through [`makeindex`] too. Style files come from the document only through names
//! checked like every other: imakeidx's `options=-s style.ist`, read back from the message it
//! logs when it cannot run makeindex itself.

use super::fingerprints::{contents_of_kinds, fingerprint};
use super::names::{is_safe_name, is_safe_path};
use super::recorder::Recorded;
use super::steps::{signature_of, Steps};
use crate::process::Program;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use texfleet_sandbox::JOB_NAME;

const MAKEINDEX: &str = "/usr/bin/makeindex";
/// The index splitidx writes entries to when the document names none.
const DEFAULT_SPLIT_INDEX: &str = "idx";
/// makeindex options a document may ask for through imakeidx (besides `-s <style>`).
const ALLOWED_FLAGS: &[&str] = &["-l", "-g", "-c", "-r"];

/// Runs makeindex wherever an index's input changed; true when an output changed.
pub fn run(steps: &mut Steps, recorded: &Recorded, log: &str) -> bool {
    let mut changed = false;
    let requested = requested_options(log);
    let mut indexes: Vec<PathBuf> = recorded
        .outputs
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .cloned()
        .collect();
    if let Some(split) = split_shared_index(steps) {
        let shared = Path::new(JOB_NAME).with_extension("idx");
        indexes.retain(|idx| idx != &shared);
        indexes.extend(split);
    }
    for idx in indexes {
        let name = idx.to_string_lossy().into_owned();
        if !is_safe_path(&name) {
            steps.skip(format!("makeindex on {name:?}: not a safe name"));
            continue;
        }
        let mut args: Vec<String> = requested.get(&name).cloned().unwrap_or_default();
        args.push(name);
        let ind = idx.with_extension("ind");
        changed |= makeindex(steps, &args, &idx, &ind, "ilg");
        // splitidx prints its default index (`idx`) from the job's own .ind.
        if idx == Path::new(&format!("{JOB_NAME}-{DEFAULT_SPLIT_INDEX}.idx")) {
            changed |= copy_if_changed(&ind, &Path::new(JOB_NAME).with_extension("ind"));
        }
    }
    let nomenclature = Path::new(JOB_NAME).with_extension("nlo");
    if recorded.outputs.contains(&nomenclature) {
        let args = [
            "-s",
            "nomencl.ist",
            "-t",
            &format!("{JOB_NAME}.nlg"),
            "-o",
            &format!("{JOB_NAME}.nls"),
            &format!("{JOB_NAME}.nlo"),
        ]
        .map(String::from);
        changed |= makeindex(
            steps,
            &args,
            &nomenclature,
            &nomenclature.with_extension("nls"),
            "nlg",
        );
    }
    changed
}

/// Copies `from` to `to` when they differ; true when `to` changed.
fn copy_if_changed(from: &Path, to: &Path) -> bool {
    match fs::read(from) {
        Ok(content) if fs::read(to).ok().as_deref() != Some(content.as_slice()) => {
            fs::write(to, content).is_ok()
        }
        _ => false,
    }
}

pub fn makeindex(
    steps: &mut Steps,
    args: &[String],
    input: &Path,
    output: &Path,
    log: &str,
) -> bool {
    let Some(entries) = fingerprint(input) else {
        return false;
    };
    // The project's own styles count too.
    let signature = signature_of(&format!("{entries} {}", contents_of_kinds(&["ist"])));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let program = Program::new(MAKEINDEX, &args, &steps.environment).starting_only(&[]);
    steps.run_if_changed(program, signature, output, &input.with_extension(log))
}

/// The makeindex options imakeidx logged for each index it could not process itself:
/// "Remember to run pdflatex again after calling `makeindex -s style.ist names.idx'", or,
/// since restricted shell escape lets it try, the command kpathsea refused:
/// "runsystem(makeindex -s style.ist names.idx)...disabled (restricted).". Only allowlisted
/// flags and checked style names are kept; anything else drops the request.
fn requested_options(log: &str) -> BTreeMap<String, Vec<String>> {
    let mut requested = BTreeMap::new();
    let asked = log
        .split("`makeindex ")
        .skip(1)
        .filter_map(|call| call.split_once('\''));
    let tried = log
        .split("runsystem(makeindex ")
        .skip(1)
        .filter_map(|call| call.split_once(")..."));
    for (call, _) in asked.chain(tried) {
        let words: Vec<&str> = call.split_whitespace().collect();
        let Some((index, options)) = words.split_last() else {
            continue;
        };
        let mut kept = Vec::new();
        let mut words = options.iter();
        let mut acceptable = true;
        while let Some(word) = words.next() {
            match *word {
                "-s" => match words.next() {
                    Some(style) if style.ends_with(".ist") && is_safe_name(style) => {
                        kept.extend(["-s".to_string(), style.to_string()])
                    }
                    _ => acceptable = false,
                },
                flag if ALLOWED_FLAGS.contains(&flag) => kept.push(flag.to_string()),
                _ => acceptable = false,
            }
        }
        if acceptable {
            requested.insert(index.to_string(), kept);
        }
    }
    requested
}

/// splitidx writes every index into one file as `\indexentry[name]{...}{page}`; like the
/// splitindex program, write each index's entries to `<job>-<name>.idx`. Returns those files,
/// or None when the job's `.idx` is not splitidx's.
fn split_shared_index(steps: &mut Steps) -> Option<Vec<PathBuf>> {
    let text = fs::read(Path::new(JOB_NAME).with_extension("idx")).ok()?;
    let text = String::from_utf8_lossy(&text);
    if !text.contains("\\indexentry[") {
        return None;
    }
    let mut split: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        // An entry for a named index, or (plain \index) for the default one.
        let Some((name, entry)) = line
            .strip_prefix("\\indexentry[")
            .and_then(|rest| rest.split_once(']'))
            .or_else(|| Some((DEFAULT_SPLIT_INDEX, line.strip_prefix("\\indexentry")?)))
        else {
            continue;
        };
        if !is_safe_name(name) {
            steps.skip(format!("the split index {name:?}: not a safe name"));
            continue;
        }
        let file = split.entry(format!("{JOB_NAME}-{name}.idx")).or_default();
        file.push_str("\\indexentry");
        file.push_str(entry);
        file.push('\n');
    }
    let mut files = Vec::new();
    for (file, content) in split {
        if fs::read(&file).ok().as_deref() != Some(content.as_bytes())
            && fs::write(&file, &content).is_err()
        {
            continue;
        }
        files.push(PathBuf::from(file));
    }
    Some(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imakeidx_requests_keep_only_allowlisted_options() {
        let log = "Package imakeidx Warning: Remember to run pdflatex again after calling\n\
            (imakeidx)                `makeindex -s persons.ist -l persons.idx'\n\
            Package imakeidx Warning: Remember to run pdflatex again after calling\n\
            (imakeidx)                `makeindex -o /tmp/x evil.idx'\n\
            (imakeidx)                `makeindex -s ../../x.ist up.idx'\n\
            (imakeidx)                `makeindex output.idx'\n\
            runsystem(makeindex -s places.ist places.idx)...disabled (restricted).\n";
        let requested = requested_options(log);
        assert_eq!(requested["persons.idx"], ["-s", "persons.ist", "-l"]);
        assert!(!requested.contains_key("evil.idx"));
        assert!(!requested.contains_key("up.idx"));
        assert_eq!(requested["output.idx"], Vec::<String>::new());
        assert_eq!(requested["places.idx"], ["-s", "places.ist"]);
    }
}
