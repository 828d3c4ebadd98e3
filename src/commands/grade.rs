//! `kdiag grade LAB PATH --course FILE`: grade a class's submissions (one
//! folder or `.tar` each in PATH), or one submission (an autograder's
//! container). Each learner's truth is recomputed from their id and the
//! course secret; the submission contributes its answers and the files
//! they name, nothing else. Suspicious submissions are listed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::course::roster::{Roster, csv_field};
use crate::course::token::normalise_id;
use crate::course::{Course, Token};
use crate::error;
use crate::grade::class::{self, Graded, Suspicion};
use crate::grade::{self, Facts, Status, report};
use crate::lab::submission::{self, Invalid};
use crate::lab::{self, Lab, Source};
use crate::sys::process::user_files::{self, Limits};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// A folder of submissions (one folder or .tar per learner, named by
    /// learner id or mapped by the roster), or one submission
    pub path: PathBuf,
    /// The course file (kdiag course init): derives each learner's seed
    #[arg(long, value_name = "FILE")]
    pub course: PathBuf,
    /// The class list (CSV): learner ids, and a folder column when folders
    /// are not named by id; learners without a submission are listed too
    #[arg(long, value_name = "CSV")]
    pub roster: Option<PathBuf>,
    /// Grade PATH as one submission of this learner
    #[arg(long, value_name = "ID")]
    pub learner: Option<String>,
    /// Output: csv, json or junit for a class; text, json, gradescope,
    /// prairielearn or junit for one submission
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Read labs and checks from this directory instead of the built-in ones
    #[arg(long, value_name = "DIR")]
    pub labs: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Text,
    Json,
    Gradescope,
    Junit,
    Prairielearn,
}

/// Gradescope writes this beside the submission folder.
const GRADESCOPE_METADATA: &str = "submission_metadata.json";

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = Source {
        dir: args.labs.clone(),
    };
    let (lab, checks) = lab::load(&source, &args.lab)?;
    let course = Course::load(&args.course)?;
    let roster = args.roster.as_deref().map(Roster::load).transpose()?;
    let mut grader = Grader {
        lab: &lab,
        checks: &checks.checks,
        course: &course,
        truths: HashMap::new(),
    };
    if single(&args) {
        return grade_one(&args, &mut grader, roster.as_ref());
    }
    let format = args.format.unwrap_or(Format::Csv);
    if !matches!(format, Format::Csv | Format::Json | Format::Junit) {
        return Err(error::usage(
            "a class is graded as csv, json or junit; gradescope, prairielearn and text are \
             for one submission (give --learner ID, or a folder with its submission_metadata.json)",
        ));
    }
    let mut class: Vec<Graded> = Vec::new();
    let entries = user_files::read_dir(&args.path)?;
    let mut seen_learners = Vec::new();
    for entry in entries {
        let Some(name) = entry_name(&entry) else {
            continue;
        };
        let learner = match identify(&entry, &name, roster.as_ref()) {
            Ok(l) => l,
            Err(why) => {
                class.push(failed(&name, None, None, why));
                continue;
            }
        };
        seen_learners.push(normalise_id(&learner));
        class.push(grader.grade(&name, &learner, &entry));
    }
    if let Some(r) = &roster {
        for l in &r.learners {
            if !seen_learners.contains(&normalise_id(&l.id)) {
                let seed = course.token(&l.id).to_string();
                class.push(failed(
                    l.folder.as_deref().unwrap_or(&l.id),
                    Some(l.id.clone()),
                    Some(seed),
                    "no submission".into(),
                ));
            }
        }
    }
    let suspicious = class::suspicious(&checks.checks, &class);
    let max = grader.max();
    match format {
        Format::Json => println!("{}", json(&lab.id, max, &class, &suspicious)?),
        Format::Junit => {
            let suites: Vec<(String, Vec<grade::CheckResult>)> = class
                .iter()
                .map(|g| (g.submission.clone(), results_or_error(g, max)))
                .collect();
            print!("{}", report::junit(&lab.id, &suites));
        }
        _ => print!("{}", csv(&class, max, &suspicious)),
    }
    let errors = class.iter().filter(|g| g.error.is_some()).count();
    eprintln!(
        "Graded {} submissions for lab {} ({errors} could not be graded).",
        class.len(),
        lab.id
    );
    if !suspicious.is_empty() {
        eprintln!("Suspicious ({}):", suspicious.len());
        for s in &suspicious {
            eprintln!("  {}: {} [{}]", s.submissions.join(", "), s.detail, s.kind);
        }
    }
    Ok(error::OK)
}

/// Whether PATH is one submission rather than a folder of them.
fn single(args: &Args) -> bool {
    let p = &args.path;
    args.learner.is_some()
        || p.is_file()
        || p.join(submission::ANSWERS).is_file()
        || metadata_for(p).is_some()
}

/// Gradescope's metadata for submission folder `p`: beside it
/// (/autograder/submission_metadata.json) or inside it.
fn metadata_for(p: &Path) -> Option<PathBuf> {
    let inside = p.join(GRADESCOPE_METADATA);
    let beside = p.parent().map(|d| d.join(GRADESCOPE_METADATA));
    [Some(inside), beside]
        .into_iter()
        .flatten()
        .find(|m| m.is_file())
}

fn grade_one(args: &Args, grader: &mut Grader, roster: Option<&Roster>) -> anyhow::Result<u8> {
    let format = args.format.unwrap_or(Format::Text);
    let name = entry_name(&args.path).unwrap_or_else(|| args.path.display().to_string());
    let learner = match &args.learner {
        Some(l) => Ok(l.clone()),
        None => identify(&args.path, &name, roster),
    };
    let g = match learner {
        Ok(l) => grader.grade(&name, &l, &args.path),
        Err(why) => failed(&name, None, None, why),
    };
    let max = grader.max();
    let out = match (format, &g.error) {
        (Format::Csv, _) => csv(std::slice::from_ref(&g), max, &[]),
        (f, Some(why)) => report::render_invalid(report_format(f), &grader.lab.id, why, max),
        (f, None) => report::render(report_format(f), &grader.lab.id, &g.results),
    };
    print!("{out}");
    Ok(match &g.error {
        Some(_) => error::USAGE,
        None if grade::all_graded_passed(&g.results) => error::OK,
        None => error::FAILURE,
    })
}

fn report_format(f: Format) -> report::Format {
    match f {
        Format::Csv | Format::Text => report::Format::Text,
        Format::Json => report::Format::Json,
        Format::Gradescope => report::Format::Gradescope,
        Format::Junit => report::Format::Junit,
        Format::Prairielearn => report::Format::Prairielearn,
    }
}

/// A submission's name: a folder's, or an archive's without `.tar`;
/// None for other files.
fn entry_name(p: &Path) -> Option<String> {
    let file = p.file_name()?.to_string_lossy().into_owned();
    if file.starts_with('.') || file == GRADESCOPE_METADATA {
        return None;
    }
    if p.is_dir() {
        return Some(file);
    }
    file.strip_suffix(".tar").map(str::to_string)
}

/// Who submitted `entry`: Gradescope's metadata when present, else the
/// roster's mapping of its name, else its name.
fn identify(entry: &Path, name: &str, roster: Option<&Roster>) -> Result<String, String> {
    let known = |id: &str| roster.is_none_or(|r| r.by_id(id).is_some());
    if let Some(meta) = metadata_for(entry) {
        let text =
            user_files::read_to_string(&meta, &Limits::input()).map_err(|e| e.to_string())?;
        let id =
            class::gradescope_learner(&text, |id| roster.is_some_and(|r| r.by_id(id).is_some()))
                .ok_or_else(|| format!("{}: no submitter in it", meta.display()))?;
        if !known(&id) {
            return Err(format!(
                "learner {id} (from {GRADESCOPE_METADATA}) is not in the roster"
            ));
        }
        return Ok(id);
    }
    match roster {
        Some(r) => r
            .by_folder(name)
            .map(|l| l.id.clone())
            .ok_or_else(|| format!("{name} is not a learner or folder of the roster")),
        None => Ok(name.to_string()),
    }
}

fn failed(name: &str, learner: Option<String>, seed: Option<String>, why: String) -> Graded {
    Graded {
        submission: name.to_string(),
        learner,
        seed,
        results: Vec::new(),
        error: Some(why),
        manifest_seed: None,
        answers: None,
        evidence: None,
        facts: None,
    }
}

struct Grader<'a> {
    lab: &'a Lab,
    checks: &'a [grade::Check],
    course: &'a Course,
    /// Truth by seed: learners sharing a variant share its computation.
    truths: HashMap<Token, Facts>,
}

impl Grader<'_> {
    fn max(&self) -> f64 {
        self.checks
            .iter()
            .filter(|c| !c.live())
            .map(|c| c.points)
            .sum()
    }

    fn grade(&mut self, name: &str, learner: &str, path: &Path) -> Graded {
        let seed = self.course.token(learner);
        let facts = match self.truths.get(&seed) {
            Some(f) => f.clone(),
            None => match lab::facts(self.lab, &seed) {
                Ok(f) => {
                    self.truths.insert(seed.clone(), f.clone());
                    f
                }
                Err(e) => {
                    return failed(
                        name,
                        Some(learner.into()),
                        Some(seed.to_string()),
                        format!("{e:#}"),
                    );
                }
            },
        };
        let sub = match submission::open(path) {
            Ok(s) => s,
            Err(Invalid(why)) => {
                return failed(name, Some(learner.into()), Some(seed.to_string()), why);
            }
        };
        let results = grade::evaluate(self.checks, &sub.answers, &facts, &sub.evidence, None);
        Graded {
            submission: name.to_string(),
            learner: Some(learner.to_string()),
            seed: Some(seed.to_string()),
            results,
            error: None,
            manifest_seed: sub.manifest.as_ref().map(|m| m.seed.clone()),
            answers: Some(sub.answers),
            evidence: Some(sub.evidence),
            facts: Some(facts),
        }
    }
}

fn results_or_error(g: &Graded, max: f64) -> Vec<grade::CheckResult> {
    match &g.error {
        None => g.results.clone(),
        Some(why) => vec![grade::CheckResult {
            id: "submission".into(),
            step: "submission".into(),
            name: "submission".into(),
            status: Status::Error,
            graded: true,
            score: 0.0,
            max_score: max,
            message: why.clone(),
        }],
    }
}

fn counts(g: &Graded) -> (usize, usize) {
    let graded: Vec<_> = g.results.iter().filter(|r| r.graded).collect();
    let passed = graded.iter().filter(|r| r.status == Status::Passed).count();
    (passed, graded.len() - passed)
}

fn flags(g: &Graded, suspicious: &[Suspicion]) -> String {
    let mut kinds: Vec<&str> = suspicious
        .iter()
        .filter(|s| s.submissions.contains(&g.submission))
        .map(|s| s.kind)
        .collect();
    kinds.dedup();
    kinds.join(" ")
}

fn csv(class: &[Graded], max: f64, suspicious: &[Suspicion]) -> String {
    let mut out =
        String::from("submission,learner,seed,score,max_score,passed,failed,error,flags\n");
    for g in class {
        let (score, _) = grade::totals(&g.results);
        let (passed, failed) = counts(g);
        out.push_str(&format!(
            "{},{},{},{score},{max},{passed},{failed},{},{}\n",
            csv_field(&g.submission),
            csv_field(g.learner.as_deref().unwrap_or("")),
            g.seed.as_deref().unwrap_or(""),
            csv_field(g.error.as_deref().unwrap_or("")),
            flags(g, suspicious),
        ));
    }
    out
}

fn json(lab: &str, max: f64, class: &[Graded], suspicious: &[Suspicion]) -> anyhow::Result<String> {
    let rows: Vec<serde_json::Value> = class
        .iter()
        .map(|g| {
            let (score, _) = grade::totals(&g.results);
            let (passed, failed) = counts(g);
            serde_json::json!({
                "submission": g.submission,
                "learner": g.learner,
                "seed": g.seed,
                "score": score,
                "max_score": max,
                "passed": passed,
                "failed": failed,
                "error": g.error,
                "checks": g.results,
            })
        })
        .collect();
    Ok(serde_json::to_string_pretty(&serde_json::json!({
        "lab": lab,
        "max_score": max,
        "submissions": rows,
        "suspicious": suspicious,
    }))?)
}
