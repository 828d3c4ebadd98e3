//! A graded class's rows for an autograder or a spreadsheet: CSV, JSON and
//! JUnit, each row with the submission's flags.

use super::class::{Class, Graded, Suspicion};
use super::report::{self, Subject, Suite};
use super::{CheckFile, CheckResult, Status, totals};
use crate::course::roster::csv_field;

/// Whom `g`'s report is about, graded by `checks`, with its flags in `suspicious`.
pub fn subject(checks: &CheckFile, g: &Graded, suspicious: &[Suspicion]) -> Subject {
    Subject {
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

pub fn results_or_error(g: &Graded, max: f64) -> Vec<CheckResult> {
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

pub fn csv(checks: &CheckFile, class: &[Graded], max: f64, suspicious: &[Suspicion]) -> String {
    let mut out = String::from(
        "submission,learner,seed,score,max_score,passed,failed,attested,error,flags,checks_version\n",
    );
    for g in class {
        let (score, _) = totals(&g.results);
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

pub fn json(checks: &CheckFile, max: f64, class: &Class) -> serde_json::Result<String> {
    let suspicious = &class.suspicious;
    let rows: Vec<serde_json::Value> = class
        .graded
        .iter()
        .map(|g| {
            let (score, _) = totals(&g.results);
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
    serde_json::to_string_pretty(&serde_json::json!({
        "lab": checks.lab,
        "checks_version": checks.version,
        "max_score": max,
        "submissions": rows,
        "suspicious": suspicious,
        "duplicates": class.duplicates,
    }))
}

/// JUnit XML: a suite per submission.
pub fn junit(checks: &CheckFile, max: f64, class: &Class) -> String {
    let subjects: Vec<(Subject, Vec<CheckResult>)> = class
        .graded
        .iter()
        .map(|g| {
            (
                subject(checks, g, &class.suspicious),
                results_or_error(g, max),
            )
        })
        .collect();
    let suites: Vec<Suite> = class
        .graded
        .iter()
        .zip(&subjects)
        .map(|(g, (subject, results))| Suite {
            name: &g.submission,
            subject,
            results,
        })
        .collect();
    report::junit(&checks.lab, &suites)
}
