//! `kdiag check LAB`: check one learner's answers against the truth of
//! their seed, for the learner or an autograder. The truth comes from the
//! seed alone (`--seed`, or `--course` and `--learner`); no file the
//! learner writes but the answers and the files they name counts.
//! `--self-test` checks the lab itself: every graded check fails on empty
//! answers and passes on a reference submission made by really running it.

use std::path::{Path, PathBuf};

use crate::course::{Course, policy};
use crate::error;
use crate::grade::answers::Answers;
use crate::grade::{self, CheckResult, Evidence, Facts, Status, report};
use crate::lab::submission::{self, Invalid, Submission};
use crate::lab::{self, Lab, solution};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// An answers file (its relative file names are against its folder)
    #[arg(long, value_name = "FILE", conflicts_with = "submission")]
    pub answers: Option<PathBuf>,
    /// A submission: a tar archive from `kdiag lab submit`, or its folder
    #[arg(long, value_name = "PATH")]
    pub submission: Option<PathBuf>,
    /// The learner's seed token (default: your lab's last seed, else
    /// $KDIAG_SEED, else your self-study seed; refused on a course server)
    #[arg(long, value_name = "TOKEN", conflicts_with = "course")]
    pub seed: Option<String>,
    /// The course file, to derive the seed from --learner (instructors)
    #[arg(long, value_name = "FILE", requires = "learner")]
    pub course: Option<PathBuf>,
    /// The learner's id, with --course
    #[arg(long, value_name = "ID", requires = "course")]
    pub learner: Option<String>,
    /// Only this check (e.g. why.file): exit 0 or 1, for command graders
    #[arg(long, value_name = "CHECK")]
    pub only: Option<String>,
    /// Output format
    #[arg(long, value_enum, default_value = "text")]
    pub format: report::Format,
    /// Check the lab itself: empty answers fail every graded check and a
    /// reference submission (made by running the lab; needs root) passes them
    #[arg(long, conflicts_with_all = ["answers", "submission", "seed", "course", "only"])]
    pub self_test: bool,
    #[command(flatten)]
    pub files: super::args::Files,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = args.files.source();
    let (lab, checks) = lab::load(&source, &args.lab)?;
    if args.self_test {
        return self_test(&source, &lab, &checks);
    }
    let version = checks.version.clone();
    let checks_all = checks.checks;
    let mut checks = checks_all.clone();
    if let Some(only) = &args.only {
        checks.retain(|c| &c.id == only);
        if checks.is_empty() {
            return Err(error::usage(format!(
                "lab {} has no check {only:?}",
                lab.id
            )));
        }
    }
    // On a course server the learner is the account that invoked sudo,
    // their variant the account's (`lab::seed`), and every new answer
    // checked is journaled and counted (`lab::attempts`).
    let server = policy::server()?;
    if let Some(server) = &server
        && args.submission.is_some()
    {
        return Err(error::usage(format!(
            "on this course server kdiag checks your own answers with your own seed (you are {}): \
             drop --submission",
            server.learner
        )));
    }
    // The learner's own answers in their lab folder (a submission or an
    // answers file may be anyone's).
    let own = match (&args.submission, &args.answers) {
        (None, None) => Some(args.files.lab_dir(&lab.id)?),
        _ => None,
    };
    let seed = match (&args.course, &args.learner) {
        (Some(course), Some(learner)) => Course::load(course)?.token(learner),
        _ => lab::seed::choose(args.seed.as_deref(), own.as_ref())?.token,
    };
    let max: f64 = checks.iter().filter(|c| !c.live()).map(|c| c.points).sum();
    let mut subject = report::Subject {
        learner: args.learner.clone(),
        seed: Some(seed.to_string()),
        checks_version: Some(version),
        ..report::Subject::lab(&lab.id)
    };
    let opened = match (&args.submission, &args.answers, &own) {
        (Some(path), _, _) => submission::open(path),
        (None, Some(file), _) => submission::open_answers(file, beside_manifest(file)),
        (None, None, Some(dir)) => own_answers(&dir.answers()),
        (None, None, None) => unreachable!("own is set without a submission or answers"),
    };
    let sub = match opened {
        Ok(s) => s,
        Err(Invalid(why)) => {
            // Nothing to grade: exit 2, with the format's way of saying so
            // (Gradescope score 0, PrairieLearn gradable false, JUnit error).
            print!(
                "{}",
                report::render_invalid(args.format, &subject, &why, max)
            );
            return Ok(error::USAGE);
        }
    };
    let facts = lab::facts(&lab, &seed)?;
    let mut results = grade::evaluate(&checks, &sub.answers, &facts, &sub.evidence, None);
    if let Some(server) = &server {
        subject.learner = Some(server.learner.clone());
    }
    // Every new answer checked on a course server counts (an answers
    // file too); elsewhere, new answers of the learner's own lab folder.
    if server.is_some() || own.is_some() {
        let dir = match &own {
            Some(d) => d.clone(),
            None => args.files.lab_dir(&lab.id)?,
        };
        let artifact = |id: &str| checks_all.iter().any(|c| c.id == id && c.is_artifact());
        lab::attempts::count(
            server.as_ref(),
            &dir,
            &lab.id,
            &sub.answers,
            &sub.evidence,
            &mut results,
            &artifact,
        )?;
    }
    if let Some(m) = &sub.manifest {
        subject.learner.get_or_insert_with(|| m.learner.clone());
        if own.is_none() {
            grade::attestation::set_attempts(&mut results, m.attempts.as_ref());
        }
    }
    subject.warnings = grade::unknown_keys(&checks_all, &sub.answers);
    print!("{}", report::render(args.format, &subject, &results));
    Ok(if grade::all_graded_passed(&results) {
        error::OK
    } else {
        error::FAILURE
    })
}

/// A submission's answers file (a manifest beside it) names only files
/// inside the submission; a learner's own may name any file they can read.
fn beside_manifest(file: &Path) -> bool {
    file.parent()
        .is_some_and(|d| d.join(submission::MANIFEST).is_file())
}

/// The learner's own answers in their lab folder; none yet is no answers.
/// Looked for as the learner: a folder they may not read (`--dir /root`
/// through sudo) is an error that says so, not "no answer yet".
fn own_answers(file: &Path) -> Result<Submission, Invalid> {
    use crate::error::UserFileError;
    use crate::user_files::{self, Limits};
    match user_files::open(file, &Limits::input()) {
        Err(UserFileError::NotFound(_)) => Ok(Submission {
            answers: Answers::default(),
            evidence: Evidence::Files(Default::default()),
            manifest: None,
            signed: Default::default(),
        }),
        Err(e @ UserFileError::Denied { .. }) => Err(Invalid(format!(
            "cannot read your answers: {e}; give --dir a folder of yours, \
             or leave --dir out for your own lab folder"
        ))),
        _ => submission::open_answers(file, false),
    }
}

/// Removes the self-test's folder however the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn self_test(source: &lab::LabSource, lab: &Lab, checks: &grade::CheckFile) -> anyhow::Result<u8> {
    let course = Course::generate(vec![lab.id.clone()])?;
    let (a, b) = ("self-test-a", "self-test-b");
    let tmp = TempDir(std::env::temp_dir().join(format!(
        "kdiag-self-test-{}-{}",
        lab.id,
        std::process::id()
    )));
    let reference = tmp.0.join("reference");
    solution::make(source, lab, checks, &course.token(a), a, &reference)?;
    let sub = submission::open(&reference).map_err(|e| anyhow::anyhow!(e.0))?;
    let facts_a = lab::facts(lab, &course.token(a))?;
    let facts_b = lab::facts(lab, &course.token(b))?;
    let run = |answers: &Answers, evidence: &Evidence, facts: &Facts| -> Vec<CheckResult> {
        grade::evaluate(&checks.checks, answers, facts, evidence, None)
    };
    let with_ref = run(&sub.answers, &sub.evidence, &facts_a);
    let empty = run(
        &Answers::default(),
        &Evidence::Files(Default::default()),
        &facts_a,
    );
    let other = run(&sub.answers, &sub.evidence, &facts_b);
    let mut ok = true;
    println!(
        "Self-test of lab {} (a throwaway course, learners {a} and {b}):",
        lab.id
    );
    for ((r, e), o) in with_ref.iter().zip(&empty).zip(&other) {
        if !r.graded {
            println!("--   {:<20} live: checked by the lab, not graded", r.id);
            continue;
        }
        let good = r.status == Status::Passed && e.status != Status::Passed;
        ok &= good;
        let variant = if o.status == Status::Passed {
            "same for every variant"
        } else {
            "seed-dependent"
        };
        let mark = if good { "ok  " } else { "FAIL" };
        println!(
            "{mark} {:<20} reference {:?}, empty answers {:?} ({variant})",
            r.id, r.status, e.status
        );
        if !good && !r.message.is_empty() {
            println!("     {}", r.message);
        }
    }
    let seeded = other
        .iter()
        .filter(|o| o.graded && o.status != Status::Passed)
        .count();
    println!(
        "{}: the reference earns {}; {seeded} graded checks fail for another learner's variant.",
        if ok { "Passed" } else { "Failed" },
        report::summary(&with_ref)
    );
    Ok(if ok { error::OK } else { error::FAILURE })
}
