//! Guided labs: their definitions (labs/<id>/lab.toml and the steps'
//! markdown, embedded in the binary; `--labs DIR` reads a directory laid out
//! the same way instead), the learner's state (`state.rs`: answers and
//! progress per user), the one seed rule (`seed.rs`), what an attempt
//! is (`attempts.rs`), the engine that drives a run (`engine.rs`, UI-free:
//! commands/lab/session.rs drives it in the app or line by line),
//! a step's text for the app or for `--plain` (`medium.rs`),
//! self-contained submissions (`submission.rs`, `tar.rs`) and reference
//! solutions (`solution.rs`). grade/ checks the answers.

pub mod attempts;
pub mod attested;
pub mod engine;
pub mod grader;
pub mod lines;
pub mod medium;
pub mod seed;
pub mod solution;
pub mod state;
pub mod submission;
pub mod submit;
pub mod tar;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

use crate::course::Token;
use crate::error;
use crate::grade::{CheckFile, Facts};
use crate::model::lab::{Input, Panel};

/// The embedded labs and checks: (path under the repository, contents),
/// every file of labs/ and checks/ (listed by build.rs).
const EMBEDDED: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/embedded_labs.rs"));

/// The lab file format this binary reads.
pub const FORMAT_VERSION: u32 = 1;

/// Where labs and checks come from: the binary, or a directory with the
/// repository's layout (labs/, checks/).
#[derive(Debug, Clone, Default)]
pub struct LabSource {
    pub dir: Option<PathBuf>,
}

impl LabSource {
    /// A file by its path under the repository, e.g. "labs/0-demo/lab.toml".
    pub fn read(&self, path: &str) -> anyhow::Result<String> {
        match &self.dir {
            Some(dir) => {
                // As the user, like every file they name (--labs DIR).
                let file = dir.join(path);
                let limits = crate::user_files::Limits::input();
                crate::user_files::read_to_string(&file, &limits)
                    .with_context(|| format!("cannot read {}", file.display()))
            }
            None => EMBEDDED
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, text)| text.to_string())
                .with_context(|| format!("{path} is not built into kdiag")),
        }
    }

    /// The ids of the labs available, sorted.
    pub fn ids(&self) -> anyhow::Result<Vec<String>> {
        let mut ids: Vec<String> = match &self.dir {
            Some(dir) => {
                let labs = dir.join("labs");
                crate::user_files::read_dir(&labs)
                    .with_context(|| format!("cannot list {}", labs.display()))?
                    .into_iter()
                    .filter(|p| p.join("lab.toml").is_file())
                    .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                    .collect()
            }
            None => EMBEDDED
                .iter()
                .filter_map(|(p, _)| p.strip_prefix("labs/")?.strip_suffix("/lab.toml"))
                .map(str::to_string)
                .collect(),
        };
        ids.sort();
        Ok(ids)
    }

    /// Load lab `id`, with its steps' text.
    pub fn lab(&self, id: &str) -> anyhow::Result<Lab> {
        let ids = self.ids()?;
        if !ids.iter().any(|i| i == id) {
            return Err(error::usage(format!(
                "no lab {id:?}; the labs are: {} (kdiag lab list)",
                ids.join(", ")
            )));
        }
        let path = format!("labs/{id}/lab.toml");
        let file: LabFile = error::parse_toml(&path, &self.read(&path)?)?;
        if file.format_version > FORMAT_VERSION {
            anyhow::bail!(
                "{path} has format_version {}; this kdiag reads up to {FORMAT_VERSION}: update kdiag",
                file.format_version
            );
        }
        let mut steps = Vec::new();
        for s in file.steps {
            steps.push(Step {
                text: self.read(&format!("labs/{id}/{}", s.text))?,
                explain: self.read(&format!("labs/{id}/{}", s.explain))?,
                id: s.id,
                title: s.title,
                panels: s.panels,
                inputs: s.inputs,
            });
        }
        Ok(Lab {
            id: file.id,
            title: file.title,
            workload: file.workload,
            workload_args: file.workload_args,
            welcome: file.welcome,
            fin: file.r#final,
            steps,
        })
    }
}

/// Lab `id` and its checks.
pub fn load(source: &LabSource, id: &str) -> anyhow::Result<(Lab, CheckFile)> {
    let lab = source.lab(id)?;
    let steps: Vec<String> = lab.steps.iter().map(|s| s.id.clone()).collect();
    let path = format!("checks/{}.toml", lab.id);
    let text = source.read(&path)?;
    let mut checks = crate::grade::checks::parse(&path, &text, &lab.id, &steps)?;
    check_inputs(&lab, &checks)?;
    checks.version = version(source, &lab, &text)?;
    Ok((lab, checks))
}

/// The version of the checks that grade `lab`: a short SHA-256 of the
/// lab's files (lab.toml, its steps' text) and its checks file
/// (`checks_text`), as this kdiag reads them. Any edit to one changes it,
/// so a grade says exactly what graded it.
fn version(source: &LabSource, lab: &Lab, checks_text: &str) -> anyhow::Result<String> {
    use sha2::{Digest, Sha256};
    let lab_toml = source.read(&format!("labs/{}/lab.toml", lab.id))?;
    let mut h = Sha256::new();
    let parts = [lab_toml.as_str(), checks_text].into_iter().chain(
        lab.steps
            .iter()
            .flat_map(|s| [s.text.as_str(), s.explain.as_str()]),
    );
    for part in parts {
        // Length first: no two sets of files hash alike by moving a boundary.
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(hex[..12].to_string())
}

/// Every input a step declares is for one of its checks, and a choice has
/// choices: a mistake in lab.toml is found by its author.
fn check_inputs(lab: &Lab, checks: &CheckFile) -> anyhow::Result<()> {
    for step in &lab.steps {
        for (key, input) in &step.inputs {
            let path = format!("labs/{}/lab.toml", lab.id);
            if !checks
                .checks
                .iter()
                .any(|c| &c.id == key && c.step == step.id)
            {
                anyhow::bail!(
                    "{path}: step {}: inputs names {key:?}, which is not a check of that step",
                    step.id
                );
            }
            if let Input::Choice { choices } = input
                && choices.is_empty()
            {
                anyhow::bail!(
                    "{path}: step {}: the choice {key:?} has no choices",
                    step.id
                );
            }
        }
    }
    Ok(())
}

/// The truth of `lab` for `seed`, recomputed from the seed alone.
pub fn facts(lab: &Lab, seed: &Token) -> anyhow::Result<Facts> {
    let truth = crate::workloads::truth(&lab.workload, seed.as_str(), &lab.workload_args)?;
    Ok(Facts::from_truth(seed, &truth))
}

/// Where a learner stands in a lab: the score its folder earns now and
/// what that makes it ("done", "in progress", "not started"). From the
/// score, not the app's progress notes: a lab whose evidence was replaced
/// since is no longer done.
pub fn standing(
    lab: &Lab,
    checks: &CheckFile,
    dir: &state::LabDir,
) -> anyhow::Result<(f64, f64, &'static str)> {
    let answers = crate::grade::answers::Answers::load(&dir.answers()).unwrap_or_default();
    let facts = facts(lab, &seed::choose(None, Some(dir))?.token)?;
    let evidence = crate::grade::Evidence::Dir {
        base: dir.path.clone(),
        confined: false,
    };
    let results = crate::grade::evaluate(&checks.checks, &answers, &facts, &evidence, None);
    let (got, max) = crate::grade::totals(&results);
    let status = if max > 0.0 && got >= max {
        "done"
    } else if !answers.keys().is_empty() {
        "in progress"
    } else {
        "not started"
    };
    Ok((got, max, status))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabFile {
    format_version: u32,
    id: String,
    title: String,
    workload: String,
    #[serde(default)]
    workload_args: Vec<String>,
    welcome: String,
    r#final: String,
    steps: Vec<StepFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFile {
    id: String,
    title: String,
    text: String,
    explain: String,
    #[serde(default)]
    panels: Vec<Panel>,
    #[serde(default)]
    inputs: BTreeMap<String, Input>,
}

/// A lab, ready to run.
#[derive(Debug, Clone)]
pub struct Lab {
    pub id: String,
    pub title: String,
    pub workload: String,
    pub workload_args: Vec<String>,
    pub welcome: String,
    /// Shown once every check passes.
    pub fin: String,
    pub steps: Vec<Step>,
}

/// One step: what to do, and the write-up shown once its checks pass.
#[derive(Debug, Clone)]
pub struct Step {
    pub id: String,
    pub title: String,
    pub text: String,
    pub explain: String,
    /// The live instrument panels the lab app shows under the text, the
    /// first one first (`v` switches).
    pub panels: Vec<Panel>,
    /// How the app asks for each answer, by answer key; others are text.
    pub inputs: BTreeMap<String, Input>,
}

/// The learner's user name (the sudo invoker's under sudo).
pub fn user_name() -> String {
    let uid = match crate::sys::process::privilege::invoker() {
        Some(who) => who.uid,
        // SAFETY: getuid cannot fail.
        None => unsafe { libc::getuid() },
    };
    crate::sys::process::privilege::user_name(uid).unwrap_or_else(|| format!("uid{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_labs_and_checks_are_valid() {
        let source = LabSource::default();
        for id in source.ids().unwrap() {
            load(&source, &id).unwrap();
        }
    }
}
