//! `kdiag grade LAB PATH --course FILE`: grade a class's submissions (one
//! folder or archive each in PATH), or one submission (an autograder's
//! container). Each submission is graded as the learner its manifest names,
//! when the platform and the roster agree (`grade::identity`); their truth
//! is recomputed from their id and the course secret; the submission
//! contributes its answers and the files they name, nothing else.
//! Suspicious submissions are listed.

use std::path::{Path, PathBuf};

use crate::course::Course;
use crate::course::roster::Roster;
use crate::error;
use crate::grade::class::{self, Graded};
use crate::grade::identity::{self, Claim, GRADESCOPE_METADATA};
use crate::grade::{self, class_report, report};
use crate::lab::grader::{Grader, entry_name};
use crate::lab::submission;
use crate::lab::{self, LabSource};
use crate::user_files::{self, Limits};

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

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = LabSource {
        dir: args.labs.clone(),
    };
    let (lab, checks) = lab::load(&source, &args.lab)?;
    let course = Course::load(&args.course)?;
    let roster = args
        .roster
        .as_deref()
        .map(|r| Roster::load(r, &args.columns))
        .transpose()?;
    let mut grader = Grader::new(
        &lab,
        &checks,
        &course,
        roster.as_ref(),
        args.require_attested,
    );
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
    let entries = user_files::read_dir(&args.path)?;
    let class = grader.class(
        entries
            .into_iter()
            .filter_map(|e| Some((entry_name(&e)?, e))),
    );
    let max = grader.max();
    match format {
        _ if args.summary => {
            let s = grade::summary::of(
                &lab.id,
                &checks.version,
                max,
                &class.graded,
                &class.suspicious,
            );
            match format {
                Format::Html => print!("{}", crate::render::grade_summary::html(&s)),
                _ => print!("{}", grade::summary::text(&s)),
            }
        }
        Format::Json => println!("{}", class_report::json(&checks, max, &class)?),
        Format::Junit => print!("{}", class_report::junit(&checks, max, &class)),
        _ => print!(
            "{}",
            class_report::csv(&checks, &class.graded, max, &class.suspicious)
        ),
    }
    eprintln!("{}", class::tally(&lab.id, &class.graded));
    for d in &class.duplicates {
        eprintln!("  {d}");
    }
    if !class.suspicious.is_empty() {
        eprintln!("Flagged ({}):", class.suspicious.len());
        for s in &class.suspicious {
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
    let subject = class_report::subject(grader.checks, &g, &[]);
    let out = match (format, &g.error) {
        (Format::Csv, _) => class_report::csv(grader.checks, std::slice::from_ref(&g), max, &[]),
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

fn report_format(f: Format) -> report::Format {
    match f {
        Format::Csv | Format::Text | Format::Html => report::Format::Text,
        Format::Json => report::Format::Json,
        Format::Gradescope => report::Format::Gradescope,
        Format::Junit => report::Format::Junit,
        Format::Prairielearn => report::Format::Prairielearn,
    }
}
