//! Check results for people (text) and for autograders: JSON, Gradescope's
//! results.json, JUnit XML, PrairieLearn's results.json. In every format
//! `score` and `max_score` count the graded checks only; live checks are
//! listed as not graded. A submission that cannot be graded at all still
//! gets a valid document saying why (`render_invalid`). Every document
//! names its `Subject`: the learner and the seed graded against, what the
//! grader noticed, and any copy flag (for the instructor's eyes: hidden in
//! Gradescope, outside what PrairieLearn shows the student).

use std::fmt::Write as _;

use serde::Serialize;

use super::{CheckResult, Status, totals};

/// Whom a report is about.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Subject {
    pub lab: String,
    /// The learner graded (None when a learner's own answers are checked
    /// by seed alone).
    pub learner: Option<String>,
    /// The seed whose truth the answers were compared with.
    pub seed: Option<String>,
    /// The version of the checks that graded it (`CheckFile::version`).
    pub checks_version: Option<String>,
    /// What the grader noticed and the reader should know (unknown answer
    /// keys, a manifest made with another seed).
    pub warnings: Vec<String>,
    /// Copy flags, each complete: the learners, the facts, the odds.
    pub flags: Vec<String>,
    /// On a course server: whether kdiag attested the submission, the
    /// attempts per question, and which evidence kdiag made (one line each).
    pub attestation: Vec<String>,
}

impl Subject {
    pub fn lab(lab: &str) -> Subject {
        Subject {
            lab: lab.to_string(),
            ..Subject::default()
        }
    }

    /// "lab 0-demo, learner ada, seed abcd-efgh-jkmn" (what is known).
    pub fn who(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = &self.learner {
            parts.push(format!("learner {l}"));
        }
        if let Some(s) = &self.seed {
            parts.push(format!("seed {s}"));
        }
        if parts.is_empty() {
            return format!("lab {}", self.lab);
        }
        format!("lab {}, {}", self.lab, parts.join(", "))
    }

    /// The lines a person reads before the results.
    fn preamble(&self) -> String {
        let mut out = format!("For {}.\n", self.who());
        if let Some(v) = &self.checks_version {
            let _ = writeln!(out, "Checks version {v}.");
        }
        for a in &self.attestation {
            let _ = writeln!(out, "{a}");
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }

    fn data(&self) -> serde_json::Value {
        serde_json::json!({
            "learner": self.learner,
            "seed": self.seed,
            "checks_version": self.checks_version,
            "warnings": self.warnings,
            "flags": self.flags,
            "attestation": self.attestation,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Gradescope,
    Junit,
    Prairielearn,
}

/// Render `results` of `subject`.
pub fn render(format: Format, subject: &Subject, results: &[CheckResult]) -> String {
    match format {
        Format::Text => text(subject, results),
        Format::Json => json(subject, results),
        Format::Gradescope => gradescope(subject, results),
        Format::Junit => junit(
            &subject.lab,
            &[Suite {
                name: &subject.lab,
                subject,
                results,
            }],
        ),
        Format::Prairielearn => prairielearn(subject, results),
    }
}

/// The document for a submission that cannot be graded (missing,
/// unreadable, oversized, not a submission): score 0 and the reason.
/// `max_score` is what the graded checks are worth.
pub fn render_invalid(format: Format, subject: &Subject, why: &str, max_score: f64) -> String {
    let lab = subject.lab.as_str();
    match format {
        Format::Text => {
            let mut out = format!(
                "{}cannot grade: {why}\n0/{max_score} points\n",
                subject.preamble()
            );
            for f in &subject.flags {
                let _ = writeln!(out, "flag: {f}");
            }
            out
        }
        Format::Json => pretty(serde_json::json!({
            "lab": lab,
            "learner": subject.learner,
            "seed": subject.seed,
            "checks_version": subject.checks_version,
            "warnings": subject.warnings,
            "flags": subject.flags,
            "attestation": subject.attestation,
            "gradable": false,
            "error": why,
            "score": 0.0,
            "max_score": max_score,
            "checks": [],
        })),
        Format::Gradescope => pretty(serde_json::json!({
            "score": 0.0,
            "output": format!("{}Not graded: {why}", subject.preamble()),
            "extra_data": subject.data(),
            "tests": flag_tests(subject),
        })),
        // One test case in error: the submission itself.
        Format::Junit => junit(
            lab,
            &[Suite {
                name: lab,
                subject,
                results: &[invalid_result(why, max_score)],
            }],
        ),
        // gradable: false costs the student no attempt.
        Format::Prairielearn => pretty(serde_json::json!({
            "gradable": false,
            "score": 0.0,
            "message": format!("{}{why}", subject.preamble()),
            "format_errors": [why],
            "kdiag": subject.data(),
        })),
    }
}

/// The one result of a submission that could not be graded: an error
/// worth the whole lab.
pub fn invalid_result(why: &str, max_score: f64) -> CheckResult {
    CheckResult {
        id: "submission".into(),
        step: "submission".into(),
        name: "submission".into(),
        status: Status::Error,
        graded: true,
        score: 0.0,
        max_score,
        message: why.into(),
        attempts: None,
    }
}

/// Gradescope tests for copy flags: worth nothing, failed, hidden from the
/// student (the instructor sees them).
fn flag_tests(subject: &Subject) -> Vec<serde_json::Value> {
    subject
        .flags
        .iter()
        .enumerate()
        .map(|(i, f)| {
            serde_json::json!({
                "name": format!("Copy check {}", i + 1),
                "score": 0.0,
                "max_score": 0.0,
                "status": "failed",
                "visibility": "hidden",
                "output": f,
                "tags": ["copy flag"],
            })
        })
        .collect()
}

/// A check's message with its attempts, for the formats whose tests carry
/// one text: "attempts: 2" on a line of its own.
fn message_with_attempts(r: &CheckResult) -> String {
    match (r.attempts, r.message.is_empty()) {
        (None, _) => r.message.clone(),
        (Some(n), true) => format!("attempts: {n}"),
        (Some(n), false) => format!("{}\nattempts: {n}", r.message),
    }
}

fn pretty(v: serde_json::Value) -> String {
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// The closing line: graded checks and points, then what was not graded.
pub fn summary(results: &[CheckResult]) -> String {
    let (score, max) = totals(results);
    let graded: Vec<&CheckResult> = results.iter().filter(|r| r.graded).collect();
    let passed = graded.iter().filter(|r| r.status == Status::Passed).count();
    let mut out = format!(
        "{passed}/{} checks passed, {score}/{max} points",
        graded.len()
    );
    let live: Vec<&str> = results
        .iter()
        .filter(|r| r.status == Status::NotGraded)
        .map(|r| r.id.as_str())
        .collect();
    if !live.is_empty() {
        let _ = write!(
            out,
            " ({} checked live by the lab, not graded)",
            live.join(", ")
        );
    }
    out
}

fn text(subject: &Subject, results: &[CheckResult]) -> String {
    let mut out = subject.preamble();
    for r in results {
        let mark = match r.status {
            Status::Passed => "ok  ",
            Status::Failed => "FAIL",
            Status::Error => "ERR ",
            Status::NotGraded => "--  ",
        };
        let _ = write!(out, "{mark} {:<20} {}", r.id, r.name);
        if let Some(n) = r.attempts {
            let _ = write!(out, " [attempts: {n}]");
        }
        if !r.message.is_empty() && r.status != Status::NotGraded {
            let _ = write!(out, "\n     {}", r.message);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{}", summary(results));
    for f in &subject.flags {
        let _ = writeln!(out, "flag: {f}");
    }
    out
}

fn json(subject: &Subject, results: &[CheckResult]) -> String {
    let (score, max_score) = totals(results);
    pretty(serde_json::json!({
        "lab": subject.lab,
        "learner": subject.learner,
        "seed": subject.seed,
        "checks_version": subject.checks_version,
        "warnings": subject.warnings,
        "flags": subject.flags,
        "attestation": subject.attestation,
        "gradable": true,
        "score": score,
        "max_score": max_score,
        "checks": results,
    }))
}

fn gradescope(subject: &Subject, results: &[CheckResult]) -> String {
    let (score, _) = totals(results);
    let mut tests: Vec<serde_json::Value> = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut t = serde_json::json!({
                "name": r.name,
                "number": format!("{}", i + 1),
                "score": r.score,
                "max_score": r.max_score,
                "output": message_with_attempts(r),
                "tags": [r.step],
            });
            if let Some(n) = r.attempts {
                t["extra_data"] = serde_json::json!({ "attempts": n });
            }
            match r.status {
                Status::Passed => t["status"] = "passed".into(),
                Status::Failed | Status::Error => t["status"] = "failed".into(),
                // Informational: no status, no points.
                Status::NotGraded => t["tags"] = serde_json::json!([r.step, "not graded"]),
            }
            t
        })
        .collect();
    tests.extend(flag_tests(subject));
    pretty(serde_json::json!({
        "score": score,
        "output": format!("{}{}", subject.preamble(), summary(results)),
        "extra_data": subject.data(),
        "tests": tests,
    }))
}

fn prairielearn(subject: &Subject, results: &[CheckResult]) -> String {
    let (score, max) = totals(results);
    let tests: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "description": r.id,
                "points": r.score,
                "max_points": r.max_score,
                "message": message_with_attempts(r),
            })
        })
        .collect();
    pretty(serde_json::json!({
        "gradable": true,
        "score": if max > 0.0 { score / max } else { 0.0 },
        "message": format!("{}{}", subject.preamble(), summary(results)),
        "tests": tests,
        // Kept with the submission, shown to the instructor, not rendered
        // for the student.
        "kdiag": subject.data(),
    }))
}

/// One JUnit test suite: a submission's results and whom they are about.
pub struct Suite<'a> {
    pub name: &'a str,
    pub subject: &'a Subject,
    pub results: &'a [CheckResult],
}

/// JUnit XML: one `<testsuite>` per suite, its learner, seed, warnings and
/// flags as properties, a `<testcase>` per check; failures and errors carry
/// the message, live checks are skipped.
pub fn junit(lab: &str, suites: &[Suite]) -> String {
    let count = |rs: &[CheckResult], s: Status| rs.iter().filter(|r| r.status == s).count();
    let all: Vec<CheckResult> = suites
        .iter()
        .flat_map(|s| s.results.iter().cloned())
        .collect();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
        xml(lab),
        all.len(),
        count(&all, Status::Failed),
        count(&all, Status::Error),
        count(&all, Status::NotGraded),
    );
    for Suite {
        name,
        subject,
        results,
    } in suites
    {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            xml(name),
            results.len(),
            count(results, Status::Failed),
            count(results, Status::Error),
            count(results, Status::NotGraded),
        );
        let props: Vec<(&str, &str)> = [
            ("learner", &subject.learner),
            ("seed", &subject.seed),
            ("checks_version", &subject.checks_version),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.as_deref()?)))
        .chain(subject.warnings.iter().map(|w| ("warning", w.as_str())))
        .chain(subject.flags.iter().map(|f| ("flag", f.as_str())))
        .chain(
            subject
                .attestation
                .iter()
                .map(|a| ("attestation", a.as_str())),
        )
        .collect();
        if !props.is_empty() {
            out.push_str("    <properties>\n");
            for (k, v) in props {
                let _ = writeln!(out, "      <property name=\"{k}\" value=\"{}\"/>", xml(v));
            }
            out.push_str("    </properties>\n");
        }
        for r in results.iter() {
            let _ = write!(
                out,
                "    <testcase classname=\"{}.{}\" name=\"{}\"",
                xml(name),
                xml(&r.step),
                xml(&r.id)
            );
            let child = match r.status {
                Status::Passed => None,
                Status::Failed => Some("failure"),
                Status::Error => Some("error"),
                Status::NotGraded => Some("skipped"),
            };
            if child.is_none() && r.attempts.is_none() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some(n) = r.attempts {
                let _ = writeln!(
                    out,
                    "      <properties><property name=\"attempts\" value=\"{n}\"/></properties>"
                );
            }
            if let Some(tag) = child {
                let _ = writeln!(out, "      <{tag} message=\"{}\"/>", xml(&r.message));
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Text as an XML attribute value.
fn xml(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\t')
        .fold(String::new(), |mut o, c| {
            match c {
                '&' => o.push_str("&amp;"),
                '<' => o.push_str("&lt;"),
                '>' => o.push_str("&gt;"),
                '"' => o.push_str("&quot;"),
                '\'' => o.push_str("&apos;"),
                c => o.push(c),
            }
            o
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> Vec<CheckResult> {
        let r = |id: &str, status, score| CheckResult {
            id: id.into(),
            step: "who".into(),
            name: format!("check {id}"),
            status,
            graded: status != Status::NotGraded,
            score,
            max_score: if status == Status::NotGraded {
                0.0
            } else {
                2.0
            },
            message: match status {
                Status::Passed => String::new(),
                Status::NotGraded => super::super::NOT_GRADED.into(),
                _ => "x < y & \"z\"".into(),
            },
            attempts: None,
        };
        vec![
            r("who.comm", Status::Passed, 2.0),
            r("why.file", Status::Failed, 0.0),
            r("why.fn", Status::Error, 0.0),
            r("who.pid", Status::NotGraded, 0.0),
        ]
    }

    fn demo() -> Subject {
        Subject::lab("0-demo")
    }

    #[test]
    fn autograder_formats_count_graded_checks_only() {
        let g: serde_json::Value =
            serde_json::from_str(&render(Format::Gradescope, &demo(), &results())).unwrap();
        assert_eq!(g["score"], 2.0);
        let tests = g["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 4);
        assert_eq!(tests[1]["status"], "failed");
        let max: f64 = tests.iter().map(|t| t["max_score"].as_f64().unwrap()).sum();
        assert_eq!(max, 6.0);
        assert!(tests[3].get("status").is_none());
        let p: serde_json::Value =
            serde_json::from_str(&render(Format::Prairielearn, &demo(), &results())).unwrap();
        assert!((p["score"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &demo(), &results())).unwrap();
        assert_eq!(
            (j["score"].as_f64(), j["max_score"].as_f64()),
            (Some(2.0), Some(6.0))
        );
        assert_eq!(j["checks"][3]["status"], "not_graded");
        let x = render(Format::Junit, &demo(), &results());
        assert!(
            x.contains("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(
            x.contains("message=\"x &lt; y &amp; &quot;z&quot;\""),
            "{x}"
        );
        let t = render(Format::Text, &demo(), &results());
        assert!(
            t.ends_with(
                "1/3 checks passed, 2/6 points (who.pid checked live by the lab, not graded)\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn an_ungradable_submission_is_a_valid_document_in_every_format() {
        let why = "answers.toml:1:2: expected a value";
        let g: serde_json::Value =
            serde_json::from_str(&render_invalid(Format::Gradescope, &demo(), why, 10.0)).unwrap();
        assert_eq!(g["score"], 0.0);
        assert!(g["output"].as_str().unwrap().contains(why));
        let p: serde_json::Value =
            serde_json::from_str(&render_invalid(Format::Prairielearn, &demo(), why, 10.0))
                .unwrap();
        assert_eq!(p["gradable"].as_bool(), Some(false));
        assert!(p["message"].as_str().unwrap().ends_with(why), "{p:#}");
        let j: serde_json::Value =
            serde_json::from_str(&render_invalid(Format::Json, &demo(), why, 10.0)).unwrap();
        assert_eq!(j["max_score"], 10.0);
        let x = render_invalid(Format::Junit, &demo(), why, 10.0);
        assert!(
            x.contains("errors=\"1\"") && x.contains("<error message="),
            "{x}"
        );
    }

    #[test]
    fn every_format_names_the_learner_the_seed_and_the_flags() {
        let subject = Subject {
            lab: "0-demo".into(),
            learner: Some("ada".into()),
            seed: Some("abcd-efgh-jkmn".into()),
            checks_version: Some("0123456789ab".into()),
            warnings: vec!["unknown key x.y".into()],
            flags: vec!["copied from bob & co".into()],
            attestation: vec!["attested: signed by kdiag".into()],
        };
        for f in [
            Format::Text,
            Format::Json,
            Format::Gradescope,
            Format::Junit,
            Format::Prairielearn,
        ] {
            for doc in [
                render(f, &subject, &results()),
                render_invalid(f, &subject, "why", 10.0),
            ] {
                for want in [
                    "ada",
                    "abcd-efgh-jkmn",
                    "unknown key x.y",
                    "copied from bob",
                    "attested: signed by kdiag",
                    "0123456789ab",
                ] {
                    assert!(doc.contains(want), "{f:?} lacks {want}: {doc}");
                }
            }
        }
        let g: serde_json::Value =
            serde_json::from_str(&render(Format::Gradescope, &subject, &results())).unwrap();
        assert_eq!(g["extra_data"]["learner"], "ada");
        let flag = g["tests"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(
            (flag["visibility"].as_str(), flag["max_score"].as_f64()),
            (Some("hidden"), Some(0.0))
        );
        let p: serde_json::Value =
            serde_json::from_str(&render(Format::Prairielearn, &subject, &results())).unwrap();
        assert_eq!(p["kdiag"]["flags"][0], "copied from bob & co");
        assert!(
            !p["message"].as_str().unwrap().contains("copied"),
            "flags are not the student's"
        );
        let x = render(Format::Junit, &subject, &results());
        assert!(
            x.contains("<property name=\"flag\" value=\"copied from bob &amp; co\"/>"),
            "{x}"
        );
    }

    #[test]
    fn every_format_shows_the_attempts_per_question() {
        let mut rs = results();
        rs[0].attempts = Some(3);
        rs[1].attempts = Some(7);
        let t = render(Format::Text, &demo(), &rs);
        assert!(t.contains("check who.comm [attempts: 3]\n"), "{t}");
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, &demo(), &rs)).unwrap();
        assert_eq!((j["checks"][1]["attempts"].as_u64()), Some(7));
        assert!(j["checks"][2].get("attempts").is_none());
        let g: serde_json::Value =
            serde_json::from_str(&render(Format::Gradescope, &demo(), &rs)).unwrap();
        assert_eq!(g["tests"][0]["output"], "attempts: 3");
        assert_eq!(g["tests"][1]["extra_data"]["attempts"], 7);
        assert!(
            g["tests"][1]["output"]
                .as_str()
                .unwrap()
                .ends_with("\nattempts: 7")
        );
        let p: serde_json::Value =
            serde_json::from_str(&render(Format::Prairielearn, &demo(), &rs)).unwrap();
        assert_eq!(p["tests"][0]["message"], "attempts: 3");
        let x = render(Format::Junit, &demo(), &rs);
        let doc = roxmltree::Document::parse(&x).unwrap();
        let attempts: Vec<(&str, &str)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .filter_map(|c| {
                let p = c
                    .descendants()
                    .find(|n| n.attribute("name") == Some("attempts"))?;
                Some((c.attribute("name")?, p.attribute("value")?))
            })
            .collect();
        assert_eq!(attempts, [("who.comm", "3"), ("why.file", "7")], "{x}");
    }
}
