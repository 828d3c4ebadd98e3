//! `kdiag grade LAB DIR`: check every submission in DIR (one folder each,
//! holding the learner's answers.toml and the session.json of their run)
//! and print one line per submission, for an instructor's gradebook.

use std::path::PathBuf;

use anyhow::Context;

use crate::error;
use crate::grade::{self, Status};
use crate::lab::Source;
use crate::lab::answers::Answers;
use crate::lab::session::Session;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lab (e.g. 0-demo)
    pub lab: String,
    /// A directory with one folder per submission (answers.toml + session.json)
    pub submissions: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value = "csv")]
    pub format: Format,
    /// Read labs and checks from this directory instead of the built-in ones
    #[arg(long, value_name = "DIR")]
    pub labs: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Json,
}

#[derive(serde::Serialize)]
struct Row {
    submission: String,
    score: f64,
    max_score: f64,
    passed: usize,
    failed: usize,
    /// Why the submission could not be graded.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    checks: Vec<grade::CheckResult>,
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let source = Source {
        dir: args.labs.clone(),
    };
    let lab = source.lab(&args.lab)?;
    let checks = super::lab::load_checks(&source, &lab.id)?.checks;
    let max: f64 = checks.iter().map(|c| c.points).sum();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&args.submissions)
        .with_context(|| format!("cannot list {}", args.submissions.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let rows: Vec<Row> = dirs
        .iter()
        .map(|d| {
            let name = d
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let graded = Session::load(&d.join(Session::FILE)).and_then(|s| {
                let answers = Answers::load(&d.join("answers.toml"))?;
                Ok(grade::evaluate(&checks, &answers, &s.facts(), None))
            });
            match graded {
                Ok(results) => {
                    let (score, max_score) = grade::totals(&results);
                    let count = |s: Status| results.iter().filter(|r| r.status == s).count();
                    Row {
                        submission: name,
                        score,
                        max_score,
                        passed: count(Status::Passed),
                        failed: results.len() - count(Status::Passed),
                        error: None,
                        checks: results,
                    }
                }
                Err(e) => Row {
                    submission: name,
                    score: 0.0,
                    max_score: max,
                    passed: 0,
                    failed: checks.len(),
                    error: Some(format!("{e:#}")),
                    checks: Vec::new(),
                },
            }
        })
        .collect();
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Format::Csv => {
            println!("submission,score,max_score,passed,failed,error");
            for r in &rows {
                println!(
                    "{},{},{},{},{},{}",
                    csv(&r.submission),
                    r.score,
                    r.max_score,
                    r.passed,
                    r.failed,
                    csv(r.error.as_deref().unwrap_or(""))
                );
            }
        }
    }
    eprintln!("Graded {} submissions for lab {}.", rows.len(), lab.id);
    Ok(error::OK)
}

/// A CSV field, quoted when it needs to be.
fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
