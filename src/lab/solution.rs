//! Reference solutions (checks/solutions/<lab>.toml): the answers that
//! pass every check, with `{fact}` placeholders filled from a learner's
//! truth, and the recipes for the evidence files: a kdiag command run while
//! the lab's workload runs for that learner's seed. `make` builds a whole
//! reference submission that way, so the reference earns its marks through
//! the same path as a learner's submission.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use super::submission::{self, ANSWERS, MANIFEST, Manifest};
use super::workload::Workload;
use super::{Lab, LabSource};
use crate::course::Token;
use crate::grade::answers::Answers;
use crate::grade::facts::placeholders;
use crate::grade::{CheckFile, Facts};
use crate::sys::process::privilege;
use crate::user_files;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolutionFile {
    /// The answers, as in answers.toml, under `[answers]`.
    pub answers: toml::Table,
    #[serde(default)]
    pub artifacts: Vec<Recipe>,
}

/// How to make one evidence file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// The answers key naming the file.
    pub key: String,
    /// Its name in the submission's artifacts/ folder.
    pub file: String,
    /// kdiag's arguments; `{file}` is the output path (without it, the
    /// command's standard output is the file), `{live.pid}` the workload,
    /// `{kdiag}` kdiag itself (a command kdiag runs, as in `time`).
    pub command: Vec<String>,
    /// Seconds to let the workload run before the command (default 1).
    #[serde(default)]
    pub warmup_s: Option<f64>,
}

impl Recipe {
    /// The command as a learner would type it, for printing.
    pub fn display(&self) -> String {
        let args: Vec<String> = self
            .command
            .iter()
            .map(|a| {
                a.replace("{live.pid}", "PID")
                    .replace("{file}", "FILE")
                    .replace("{kdiag}", "kdiag")
            })
            .collect();
        let out = if self.command.iter().any(|a| a.contains("{file}")) {
            ""
        } else {
            " > FILE"
        };
        format!("sudo kdiag {}{out}", args.join(" "))
    }
}

pub fn load(source: &LabSource, lab: &str) -> anyhow::Result<SolutionFile> {
    let path = format!("checks/solutions/{lab}.toml");
    crate::error::parse_toml(&path, &source.read(&path)?)
}

/// The reference answers for `facts`; answers that need a fact `facts`
/// lacks (the live ones, outside a run) are left out and listed.
pub fn answers(sol: &SolutionFile, facts: &Facts) -> anyhow::Result<(Answers, Vec<String>)> {
    let mut answers = Answers::default();
    let mut left_out = Vec::new();
    let text = toml::to_string(&sol.answers)?;
    let all = Answers::parse("solution", &text)?;
    for key in all.keys() {
        let value = all.get(&key).unwrap_or_default();
        match facts.fill(&value) {
            Ok(filled) => answers.set(&key, &filled)?,
            Err(f) if f.starts_with("live.") => left_out.push(key),
            Err(f) => anyhow::bail!("the solution's {key} names a fact this variant lacks: {f}"),
        }
    }
    for r in &sol.artifacts {
        answers.set_text(&r.key, &format!("artifacts/{}", r.file))?;
    }
    Ok((answers, left_out))
}

/// The reference answers as a commented answers.toml, for the instructor.
pub fn print(
    sol: &SolutionFile,
    lab: &Lab,
    facts: &Facts,
    learner: &str,
) -> anyhow::Result<String> {
    let (answers, live) = answers(sol, facts)?;
    let mut out = format!(
        "# Reference answers for lab {}, learner {learner} (seed {}).\n",
        lab.id,
        facts.get("seed").unwrap_or_default()
    );
    for key in &live {
        out.push_str(&format!(
            "# {key}: checked live by the lab against its running workload; not graded.\n"
        ));
    }
    for r in &sol.artifacts {
        out.push_str(&format!(
            "# {}: artifacts/{}, made by `{}` while the workload runs\n\
             #   (kdiag lab solution --out DIR makes them).\n",
            r.key,
            r.file,
            r.display()
        ));
    }
    out.push('\n');
    out.push_str(&answers.to_toml());
    Ok(out)
}

/// Build a complete reference submission in `out` (created; refused if
/// not empty): run the lab's workload for `seed`, make every artifact with
/// its recipe, write the answers and the manifest.
pub fn make(
    source: &LabSource,
    lab: &Lab,
    checks: &CheckFile,
    seed: &Token,
    learner: &str,
    out: &Path,
) -> anyhow::Result<()> {
    let sol = load(source, &lab.id)?;
    if !sol.artifacts.is_empty() && !privilege::is_root() {
        return Err(crate::error::needs_privilege(
            "making the reference artifacts (kdiag runs the lab's instruments)",
        ));
    }
    submission::ensure_empty_dir(out)?;
    let facts = super::facts(lab, seed)?;
    let mut workload = Workload::start(
        &lab.workload,
        &lab.workload_args,
        seed.as_str(),
        None,
        super::engine::read_iops(&facts),
    )?;
    let live = facts.with_live(workload.pid());
    let made = make_artifacts(&sol, &live, out, &mut workload);
    workload.stop();
    made?;
    let (answers, _) = answers(&sol, &live)?;
    let mut files: Vec<String> = vec![ANSWERS.to_string()];
    files.extend(
        sol.artifacts
            .iter()
            .map(|r| format!("artifacts/{}", r.file)),
    );
    // The instructor's reference is made with the course's seed.
    let manifest = Manifest::new(
        &checks.lab,
        learner,
        seed.as_str(),
        submission::SeedSource::Given,
        files,
    );
    user_files::write(&out.join(ANSWERS), answers.to_toml())?;
    user_files::write(&out.join(MANIFEST), toml::to_string(&manifest)?)?;
    Ok(())
}

fn make_artifacts(
    sol: &SolutionFile,
    live: &Facts,
    out: &Path,
    workload: &mut Workload,
) -> anyhow::Result<()> {
    let dir = out.join("artifacts");
    user_files::create_dir_all(&dir)?;
    let exe = std::env::current_exe().context("cannot find kdiag's own executable")?;
    for r in &sol.artifacts {
        std::thread::sleep(Duration::from_secs_f64(r.warmup_s.unwrap_or(1.0)));
        if let Some(why) = workload.exited() {
            anyhow::bail!(
                "the workload stopped before {} could be made ({why})",
                r.file
            );
        }
        let path = dir.join(&r.file);
        let mut args = Vec::new();
        for a in &r.command {
            let with_file = a
                .replace("{file}", &path.display().to_string())
                .replace("{kdiag}", &exe.display().to_string());
            let filled = live.fill(&with_file).map_err(|f| {
                anyhow::anyhow!("the recipe for {} names an unknown fact {f}", r.key)
            })?;
            args.push(filled);
        }
        let to_stdout = !r.command.iter().any(|a| a.contains("{file}"));
        let stdout = if to_stdout {
            Stdio::from(user_files::create(&path)?)
        } else {
            Stdio::null()
        };
        let run = Command::new(&exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("cannot run kdiag {}", args.join(" ")))?;
        if !run.status.success() {
            anyhow::bail!(
                "kdiag {} failed ({}): {}",
                args.join(" "),
                run.status,
                String::from_utf8_lossy(&run.stderr).trim()
            );
        }
    }
    Ok(())
}

/// Every fact a solution's answers and recipes name.
pub fn facts_named(sol: &SolutionFile) -> Vec<String> {
    let text = toml::to_string(&sol.answers).unwrap_or_default();
    let mut names: Vec<String> = placeholders(&text)
        .into_iter()
        .map(str::to_string)
        .collect();
    for r in &sol.artifacts {
        for a in &r.command {
            names.extend(placeholders(a).into_iter().map(str::to_string));
        }
    }
    names.retain(|n| n != "file" && n != "kdiag");
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_solutions_load_and_fill() {
        let source = LabSource::default();
        for id in source.ids().unwrap() {
            let sol = load(&source, &id).unwrap();
            let truth = serde_json::json!({"workload": {"name": "w"}, "expect": {}});
            let facts = Facts::from_truth(&Token::parse("t").unwrap(), &truth);
            // Every fact named is of a known kind.
            for f in facts_named(&sol) {
                assert!(
                    f == "seed"
                        || ["workload.", "expect.", "live."]
                            .iter()
                            .any(|p| f.starts_with(p)),
                    "{id}: {f}"
                );
            }
            // Live facts are left out when there is no run.
            let filled = facts.with_live(1);
            let _ = answers(&sol, &filled);
        }
    }
}
