//! `kdiag grade LAB PATH --course FILE`: grade a class's submissions (one
//! folder or archive each in PATH), or one submission (an autograder's
//! container). Each submission is graded as the learner its manifest names,
//! when the platform and the roster agree (`grade::identity`); their truth
//! is recomputed from their id and the course secret; the submission
//! contributes its answers and the files they name, nothing else.
//! Suspicious submissions are listed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::course::roster::{Roster, csv_field};
use crate::course::{Course, Token, attest};
use crate::error;
use crate::grade::class::{self, Graded, Suspicion};
use crate::grade::identity::{self, Claim};
use crate::grade::{self, CheckFile, Facts, Status, report};
use crate::lab::submission::{self, Invalid};
use crate::lab::{self, Lab, Source};
use crate::sys::process::user_files::{self, Limits};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// A folder of submissions (one folder or archive per learner, named
    /// as `kdiag lab submit` names it, by learner id, or mapped by the
    /// roster's folder column), or one submission
    pub path: PathBuf,
    /// The course file (kdiag course init): derives each learner's seed
    #[arg(long, value_name = "FILE")]
    pub course: PathBuf,
    /// The class list (CSV): learner ids (id, email, login, ... columns all
    /// name the learner), and a folder column when folders are not named
    /// by id; the learner a manifest names must be in it, and learners
    /// without a submission are listed too
    #[arg(long, value_name = "CSV")]
    pub roster: Option<PathBuf>,
    #[command(flatten)]
    pub columns: crate::course::roster::Columns,
    /// Grade PATH as one submission handed in by this learner (who must
    /// be the learner its manifest names)
    #[arg(long, value_name = "ID")]
    pub learner: Option<String>,
    /// Output: csv, json or junit for a class; text, json, gradescope,
    /// prairielearn or junit for one submission
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Read labs and checks from this directory instead of the built-in ones
    #[arg(long, value_name = "DIR")]
    pub labs: Option<PathBuf>,
    /// Grade only submissions a course server attested (signed by kdiag
    /// with this course's key, unchanged since): others are not gradable
    #[arg(long)]
    pub require_attested: bool,
    /// Print the class at a glance instead of a row per submission: the
    /// score distribution, each check's pass rate (the most missed first),
    /// copy flags, and why submissions could not be graded
    #[arg(long)]
    pub summary: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Text,
    Json,
    Gradescope,
    Junit,
    Prairielearn,
    /// With --summary only: one self-contained page
    Html,
}

/// Gradescope writes this beside the submission folder.
const GRADESCOPE_METADATA: &str = "submission_metadata.json";

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = Source {
        dir: args.labs.clone(),
    };
    let (lab, checks) = lab::load(&source, &args.lab)?;
    let course = Course::load(&args.course)?;
    let roster = args
        .roster
        .as_deref()
        .map(|r| Roster::load(r, &args.columns))
        .transpose()?;
    let mut grader = Grader {
        lab: &lab,
        checks: &checks,
        course: &course,
        roster: roster.as_ref(),
        truths: HashMap::new(),
        require_attested: args.require_attested,
    };
    if args.summary {
        summary_usage(&args)?;
    } else if args.format == Some(Format::Html) {
        return Err(error::usage(
            "--format html is for --summary (the class at a glance)",
        ));
    } else if single(&args) {
        return grade_one(&args, &mut grader);
    }
    let format = args.format.unwrap_or(Format::Csv);
    let mut class: Vec<Graded> = Vec::new();
    for entry in user_files::read_dir(&args.path)? {
        let Some(name) = entry_name(&entry) else {
            continue;
        };
        let claims = [Claim::entry(&lab.id, &name)];
        class.push(grader.grade(&name, &entry, &claims));
    }
    let duplicates = supersede(&mut class);
    if let Some(r) = &roster {
        for l in &r.learners {
            if !class
                .iter()
                .any(|g| g.learner.as_deref() == Some(l.id.as_str()))
            {
                class.push(Graded {
                    submission: l.folder.clone().unwrap_or_else(|| l.id.clone()),
                    learner: Some(l.id.clone()),
                    seed: Some(course.token(&l.id).to_string()),
                    error: Some("no submission".into()),
                    missing: true,
                    ..Graded::default()
                });
            }
        }
    }
    let suspicious = class::suspicious(&checks.checks, &class);
    let max = grader.max();
    match format {
        _ if args.summary => {
            let s = grade::summary::of(&lab.id, &checks.version, max, &class, &suspicious);
            match format {
                Format::Html => print!("{}", crate::render::grade_summary::html(&s)),
                _ => print!("{}", grade::summary::text(&s)),
            }
        }
        Format::Json => println!("{}", json(&checks, max, &class, &suspicious, &duplicates)?),
        Format::Junit => {
            let subjects: Vec<(report::Subject, Vec<grade::CheckResult>)> = class
                .iter()
                .map(|g| (subject(&checks, g, &suspicious), results_or_error(g, max)))
                .collect();
            let suites: Vec<report::Suite> = class
                .iter()
                .zip(&subjects)
                .map(|(g, (subject, results))| report::Suite {
                    name: &g.submission,
                    subject,
                    results,
                })
                .collect();
            print!("{}", report::junit(&lab.id, &suites));
        }
        _ => print!("{}", csv(&checks, &class, max, &suspicious)),
    }
    eprintln!("{}", tally(&lab.id, &class));
    for d in &duplicates {
        eprintln!("  {d}");
    }
    if !suspicious.is_empty() {
        eprintln!("Flagged ({}):", suspicious.len());
        for s in &suspicious {
            eprintln!("  {} [{}]", s.detail, s.kind);
        }
    }
    Ok(error::OK)
}

/// `--summary` is for a folder of submissions, in text.
fn summary_usage(args: &Args) -> anyhow::Result<()> {
    if !matches!(args.format, None | Some(Format::Text | Format::Html)) {
        return Err(error::usage(
            "--summary prints text or html: leave out --format, or give --format text or html",
        ));
    }
    let p = &args.path;
    if args.learner.is_some()
        || p.is_file()
        || std::fs::symlink_metadata(p.join(submission::ANSWERS)).is_ok()
    {
        return Err(error::usage(format!(
            "--summary summarizes a class: give the folder of submissions, not one ({})",
            p.display()
        )));
    }
    Ok(())
}

/// "Graded N submissions for lab L: G graded, U could not be graded, S
/// superseded by a newer one, M missing."
fn tally(lab: &str, class: &[Graded]) -> String {
    let missing = class.iter().filter(|g| g.missing).count();
    let superseded = class
        .iter()
        .filter(|g| {
            g.error
                .as_deref()
                .is_some_and(|e| e.starts_with(SUPERSEDED))
        })
        .count();
    let errors = class.iter().filter(|g| g.error.is_some()).count() - missing - superseded;
    format!(
        "{} submissions for lab {lab}: {} graded, {errors} could not be graded, {superseded} \
         superseded by a newer one, {missing} missing (learners of the roster who handed nothing in).",
        class.len() - missing,
        class.len() - missing - superseded - errors,
    )
}

const SUPERSEDED: &str = "superseded:";

/// Two or more gradable submissions of one learner: the newest by its
/// manifest's time is graded, the others are marked superseded. Returns a
/// line per learner concerned.
fn supersede(class: &mut [Graded]) -> Vec<String> {
    let mut by_learner: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, g) in class.iter().enumerate() {
        if let (Some(l), None) = (&g.learner, &g.error) {
            by_learner.entry(l.clone()).or_default().push(i);
        }
    }
    let mut lines = Vec::new();
    for (learner, mut all) in by_learner.into_iter().filter(|(_, v)| v.len() > 1) {
        // Newest last; the same time (or none) falls back to the name.
        all.sort_by(|&a, &b| {
            (class[a].created, &class[a].submission).cmp(&(class[b].created, &class[b].submission))
        });
        let newest = *all.last().expect("two or more");
        let kept = class[newest].submission.clone();
        let older: Vec<String> = all[..all.len() - 1]
            .iter()
            .map(|&i| class[i].submission.clone())
            .collect();
        for &i in &all[..all.len() - 1] {
            class[i].error = Some(format!(
                "{SUPERSEDED} learner {learner} also handed in {kept}, made later; that one is graded"
            ));
            class[i].results.clear();
        }
        lines.push(format!(
            "learner {learner} handed in {} submissions: graded the newest, {kept} (not {})",
            all.len(),
            older.join(", ")
        ));
    }
    lines
}

/// Whether PATH is one submission rather than a folder of them: the
/// one-submission formats, a file, a folder with answers, Gradescope's
/// metadata beside it, or --learner.
fn single(args: &Args) -> bool {
    let p = &args.path;
    matches!(
        args.format,
        Some(Format::Text | Format::Gradescope | Format::Prairielearn)
    ) || args.learner.is_some()
        || p.is_file()
        || std::fs::symlink_metadata(p.join(submission::ANSWERS)).is_ok()
        || metadata_beside(p).is_some()
}

/// Gradescope's metadata for submission folder `p`: beside it
/// (/autograder/submission_metadata.json), never inside it (the learner
/// writes what is inside).
fn metadata_beside(p: &Path) -> Option<PathBuf> {
    let beside = p.parent()?.join(GRADESCOPE_METADATA);
    std::fs::symlink_metadata(&beside).is_ok().then_some(beside)
}

/// The platform's word on who handed in the one submission at `path`.
fn platform_claims(args: &Args) -> Result<Vec<Claim>, String> {
    let mut claims = Vec::new();
    if let Some(meta) = metadata_beside(&args.path) {
        let text =
            user_files::read_to_string(&meta, &Limits::input()).map_err(|e| e.to_string())?;
        claims.push(identity::gradescope_claim(
            &meta.display().to_string(),
            &text,
        )?);
    }
    if let Some(l) = &args.learner {
        claims.push(Claim {
            source: "--learner".into(),
            names: vec![l.clone()],
            file_name: false,
        });
    }
    Ok(claims)
}

fn grade_one(args: &Args, grader: &mut Grader) -> anyhow::Result<u8> {
    let format = args.format.unwrap_or(Format::Text);
    let name = entry_name(&args.path).unwrap_or_else(|| args.path.display().to_string());
    let g = match platform_claims(args) {
        Ok(claims) => grader.grade(&name, &args.path, &claims),
        Err(why) => Graded {
            submission: name.clone(),
            error: Some(why),
            ..Graded::default()
        },
    };
    let max = grader.max();
    let subject = subject(grader.checks, &g, &[]);
    let out = match (format, &g.error) {
        (Format::Csv, _) => csv(grader.checks, std::slice::from_ref(&g), max, &[]),
        (f, Some(why)) => report::render_invalid(report_format(f), &subject, why, max),
        (f, None) => report::render(report_format(f), &subject, &g.results),
    };
    print!("{out}");
    Ok(match &g.error {
        Some(_) => error::USAGE,
        None if grade::all_graded_passed(&g.results) => error::OK,
        None => error::FAILURE,
    })
}

/// Whom `g`'s report is about, graded by `checks`, with its flags in `suspicious`.
fn subject(checks: &CheckFile, g: &Graded, suspicious: &[Suspicion]) -> report::Subject {
    report::Subject {
        lab: checks.lab.clone(),
        learner: g.learner.clone(),
        seed: g.seed.clone(),
        checks_version: Some(checks.version.clone()),
        warnings: g.warnings.clone(),
        // Only the flagged submission: the learner copied from is named in
        // the flag, never flagged.
        flags: suspicious
            .iter()
            .filter(|s| s.submissions[0] == g.submission)
            .map(|s| s.detail.clone())
            .collect(),
        attestation: g.attestation.clone(),
    }
}

fn report_format(f: Format) -> report::Format {
    match f {
        Format::Csv | Format::Text | Format::Html => report::Format::Text,
        Format::Json => report::Format::Json,
        Format::Gradescope => report::Format::Gradescope,
        Format::Junit => report::Format::Junit,
        Format::Prairielearn => report::Format::Prairielearn,
    }
}

/// A submission's name: a folder's, or an archive's without its suffix;
/// None for dot files and Gradescope's metadata. Any other file is named
/// too, so that it is refused by name rather than ignored.
fn entry_name(p: &Path) -> Option<String> {
    let file = p.file_name()?.to_string_lossy().into_owned();
    if file.starts_with('.') || file == GRADESCOPE_METADATA {
        return None;
    }
    Some(submission::strip_archive_suffix(&file).to_string())
}

struct Grader<'a> {
    lab: &'a Lab,
    checks: &'a CheckFile,
    course: &'a Course,
    roster: Option<&'a Roster>,
    /// Truth by seed: learners sharing a variant share its computation.
    truths: HashMap<Token, Facts>,
    require_attested: bool,
}

impl Grader<'_> {
    fn max(&self) -> f64 {
        self.checks
            .checks
            .iter()
            .filter(|c| !c.live())
            .map(|c| c.points)
            .sum()
    }

    /// Grade the submission at `path` as the learner its manifest names,
    /// if `claims` (the platform's word) and the roster agree.
    fn grade(&mut self, name: &str, path: &Path, claims: &[Claim]) -> Graded {
        let failed = |learner: Option<String>, why: String| Graded {
            submission: name.to_string(),
            seed: learner.as_ref().map(|l| self.course.token(l).to_string()),
            learner,
            error: Some(why),
            ..Graded::default()
        };
        let sub = match submission::open(path) {
            Ok(s) => s,
            Err(Invalid(why)) => {
                return failed(identity::resolve(None, claims, self.roster).ok(), why);
            }
        };
        let manifest = sub.manifest.as_ref();
        if let Some(m) = manifest.filter(|m| m.lab != self.lab.id) {
            return failed(
                None,
                format!(
                    "this submission is for lab {} (its manifest says so), not {}: grade it with \
                     kdiag grade {} (learner {})",
                    m.lab, self.lab.id, m.lab, m.learner
                ),
            );
        }
        let learner =
            match identity::resolve(manifest.map(|m| m.learner.as_str()), claims, self.roster) {
                Ok(l) => l,
                Err(why) => return failed(None, why),
            };
        let verdict = attest::verify(
            self.course,
            sub.signed.attestation.as_deref(),
            &sub.signed.hashes,
            &learner,
            &self.lab.id,
        );
        if self.require_attested && !verdict.attested {
            return failed(
                Some(learner),
                format!("{} (--require-attested)", verdict.detail),
            );
        }
        let manifest_attempts = manifest.and_then(|m| m.attempts.as_ref());
        let attestation = grade::attestation::lines(
            &verdict,
            manifest_attempts,
            &self.checks.checks,
            &sub.answers,
            &sub.signed.hashes,
        );
        let seed = self.course.token(&learner);
        let facts = match self.facts(&seed) {
            Ok(f) => f,
            Err(why) => return failed(Some(learner), why),
        };
        let mut warnings = grade::unknown_keys(&self.checks.checks, &sub.answers);
        // Without a roster kdiag cannot tell a learner named by another
        // column (a login where seeds were handed out by student id) from
        // one who used another seed: never grade that silently.
        if let Some(m) = manifest.filter(|m| {
            self.roster.is_none()
                && m.seed != seed.as_str()
                && m.seed_source != crate::lab::submission::SeedSource::SelfStudy
        }) {
            return failed(
                Some(learner.clone()),
                format!(
                    "the submission was made with seed {}, which is not the course seed of \
                     learner {learner:?}: if your roster names learners by another column \
                     (a login, an email) than the seeds were handed out by, grade with \
                     --roster ROSTER.csv (and --id-column/--login-column if its header does \
                     not say)",
                    m.seed
                ),
            );
        }
        if let Some(m) = manifest.filter(|m| m.seed != seed.as_str()) {
            warnings.push(format!(
                "the submission was made with seed {} ({}), not learner {learner}'s course seed \
                 {seed}: its answers are checked against {seed}",
                m.seed, m.seed_source
            ));
        }
        let mut results = grade::evaluate(
            &self.checks.checks,
            &sub.answers,
            &facts,
            &sub.evidence,
            None,
        );
        grade::attestation::set_attempts(
            &mut results,
            grade::attestation::attempts(&verdict, manifest_attempts),
        );
        Graded {
            submission: name.to_string(),
            learner: Some(learner),
            seed: Some(seed.to_string()),
            results,
            error: None,
            manifest_seed: manifest.map(|m| m.seed.clone()),
            created: manifest.map_or(0, |m| m.created),
            warnings,
            missing: false,
            attested: verdict.attested,
            attestation,
            answers: Some(sub.answers),
            evidence: Some(sub.evidence),
            facts: Some(facts),
        }
    }

    fn facts(&mut self, seed: &Token) -> Result<Facts, String> {
        if let Some(f) = self.truths.get(seed) {
            return Ok(f.clone());
        }
        let f = lab::facts(self.lab, seed).map_err(|e| format!("{e:#}"))?;
        self.truths.insert(seed.clone(), f.clone());
        Ok(f)
    }
}

fn results_or_error(g: &Graded, max: f64) -> Vec<grade::CheckResult> {
    match &g.error {
        None => g.results.clone(),
        Some(why) => vec![report::invalid_result(why, max)],
    }
}

fn counts(g: &Graded) -> (usize, usize) {
    let graded: Vec<_> = g.results.iter().filter(|r| r.graded).collect();
    let passed = graded.iter().filter(|r| r.status == Status::Passed).count();
    (passed, graded.len() - passed)
}

fn csv(checks: &CheckFile, class: &[Graded], max: f64, suspicious: &[Suspicion]) -> String {
    let mut out = String::from(
        "submission,learner,seed,score,max_score,passed,failed,attested,error,flags,checks_version\n",
    );
    for g in class {
        let (score, _) = grade::totals(&g.results);
        let (passed, failed) = counts(g);
        out.push_str(&format!(
            "{},{},{},{score},{max},{passed},{failed},{},{},{},{}\n",
            csv_field(&g.submission),
            csv_field(g.learner.as_deref().unwrap_or("")),
            g.seed.as_deref().unwrap_or(""),
            if g.attested { "yes" } else { "no" },
            csv_field(g.error.as_deref().unwrap_or("")),
            csv_field(&subject(checks, g, suspicious).flags.join("; ")),
            checks.version,
        ));
    }
    out
}

fn json(
    checks: &CheckFile,
    max: f64,
    class: &[Graded],
    suspicious: &[Suspicion],
    duplicates: &[String],
) -> anyhow::Result<String> {
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
                "missing": g.missing,
                "warnings": g.warnings,
                "attested": g.attested,
                "attestation": g.attestation,
                "flags": subject(checks, g, suspicious).flags,
                "checks": g.results,
            })
        })
        .collect();
    Ok(serde_json::to_string_pretty(&serde_json::json!({
        "lab": checks.lab,
        "checks_version": checks.version,
        "max_score": max,
        "submissions": rows,
        "suspicious": suspicious,
        "duplicates": duplicates,
    }))?)
}
