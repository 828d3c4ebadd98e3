//! Check results for people (text) and for autograders: JSON, Gradescope's
//! results.json, JUnit XML, PrairieLearn's results.json. In every format
//! `score` and `max_score` count the graded checks only; live checks are
//! listed as not graded. A submission that cannot be graded at all still
//! gets a valid document saying why (`render_invalid`).

use std::fmt::Write as _;

use super::{CheckResult, Status, totals};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Gradescope,
    Junit,
    Prairielearn,
}

/// Render `results` of lab `lab`.
pub fn render(format: Format, lab: &str, results: &[CheckResult]) -> String {
    match format {
        Format::Text => text(results),
        Format::Json => json(lab, results),
        Format::Gradescope => gradescope(results),
        Format::Junit => junit(lab, &[(lab.to_string(), results.to_vec())]),
        Format::Prairielearn => prairielearn(results),
    }
}

/// The document for a submission that cannot be graded (missing,
/// unreadable, oversized, not a submission): score 0 and the reason.
/// `max_score` is what the graded checks are worth.
pub fn render_invalid(format: Format, lab: &str, why: &str, max_score: f64) -> String {
    match format {
        Format::Text => format!("cannot grade: {why}\n0/{max_score} points\n"),
        Format::Json => pretty(serde_json::json!({
            "lab": lab,
            "gradable": false,
            "error": why,
            "score": 0.0,
            "max_score": max_score,
            "checks": [],
        })),
        Format::Gradescope => pretty(serde_json::json!({
            "score": 0.0,
            "output": format!("Not graded: {why}"),
            "tests": [],
        })),
        // One test case in error: the submission itself.
        Format::Junit => junit(
            lab,
            &[(
                lab.to_string(),
                vec![CheckResult {
                    id: "submission".into(),
                    step: "submission".into(),
                    name: "submission".into(),
                    status: Status::Error,
                    graded: true,
                    score: 0.0,
                    max_score,
                    message: why.into(),
                }],
            )],
        ),
        // gradable: false costs the student no attempt.
        Format::Prairielearn => pretty(serde_json::json!({
            "gradable": false,
            "score": 0.0,
            "message": why,
            "format_errors": [why],
        })),
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

fn text(results: &[CheckResult]) -> String {
    let mut out = String::new();
    for r in results {
        let mark = match r.status {
            Status::Passed => "ok  ",
            Status::Failed => "FAIL",
            Status::Error => "ERR ",
            Status::NotGraded => "--  ",
        };
        let _ = write!(out, "{mark} {:<20} {}", r.id, r.name);
        if !r.message.is_empty() && r.status != Status::NotGraded {
            let _ = write!(out, "\n     {}", r.message);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{}", summary(results));
    out
}

fn json(lab: &str, results: &[CheckResult]) -> String {
    let (score, max_score) = totals(results);
    pretty(serde_json::json!({
        "lab": lab,
        "gradable": true,
        "score": score,
        "max_score": max_score,
        "checks": results,
    }))
}

fn gradescope(results: &[CheckResult]) -> String {
    let (score, _) = totals(results);
    let tests: Vec<serde_json::Value> = results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut t = serde_json::json!({
                "name": r.name,
                "number": format!("{}", i + 1),
                "score": r.score,
                "max_score": r.max_score,
                "output": r.message,
                "tags": [r.step],
            });
            match r.status {
                Status::Passed => t["status"] = "passed".into(),
                Status::Failed | Status::Error => t["status"] = "failed".into(),
                // Informational: no status, no points.
                Status::NotGraded => t["tags"] = serde_json::json!([r.step, "not graded"]),
            }
            t
        })
        .collect();
    pretty(serde_json::json!({
        "score": score,
        "output": summary(results),
        "tests": tests,
    }))
}

fn prairielearn(results: &[CheckResult]) -> String {
    let (score, max) = totals(results);
    let tests: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "description": r.id,
                "points": r.score,
                "max_points": r.max_score,
                "message": r.message,
            })
        })
        .collect();
    pretty(serde_json::json!({
        "gradable": true,
        "score": if max > 0.0 { score / max } else { 0.0 },
        "message": summary(results),
        "tests": tests,
    }))
}

/// JUnit XML: one `<testsuite>` per (name, results), a `<testcase>` per
/// check; failures and errors carry the message, live checks are skipped.
pub fn junit(lab: &str, suites: &[(String, Vec<CheckResult>)]) -> String {
    let count = |rs: &[CheckResult], s: Status| rs.iter().filter(|r| r.status == s).count();
    let all: Vec<CheckResult> = suites.iter().flat_map(|(_, r)| r.iter().cloned()).collect();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
        xml(lab),
        all.len(),
        count(&all, Status::Failed),
        count(&all, Status::Error),
        count(&all, Status::NotGraded),
    );
    for (name, results) in suites {
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
            xml(name),
            results.len(),
            count(results, Status::Failed),
            count(results, Status::Error),
            count(results, Status::NotGraded),
        );
        for r in results {
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
            match child {
                None => out.push_str("/>\n"),
                Some(tag) => {
                    let _ = write!(
                        out,
                        ">\n      <{tag} message=\"{}\"/>\n    </testcase>\n",
                        xml(&r.message)
                    );
                }
            }
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
        };
        vec![
            r("who.comm", Status::Passed, 2.0),
            r("why.file", Status::Failed, 0.0),
            r("why.fn", Status::Error, 0.0),
            r("who.pid", Status::NotGraded, 0.0),
        ]
    }

    #[test]
    fn autograder_formats_count_graded_checks_only() {
        let g: serde_json::Value =
            serde_json::from_str(&render(Format::Gradescope, "0-demo", &results())).unwrap();
        assert_eq!(g["score"], 2.0);
        let tests = g["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 4);
        assert_eq!(tests[1]["status"], "failed");
        let max: f64 = tests.iter().map(|t| t["max_score"].as_f64().unwrap()).sum();
        assert_eq!(max, 6.0);
        assert!(tests[3].get("status").is_none());
        let p: serde_json::Value =
            serde_json::from_str(&render(Format::Prairielearn, "0-demo", &results())).unwrap();
        assert!((p["score"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
        let j: serde_json::Value =
            serde_json::from_str(&render(Format::Json, "0-demo", &results())).unwrap();
        assert_eq!(
            (j["score"].as_f64(), j["max_score"].as_f64()),
            (Some(2.0), Some(6.0))
        );
        assert_eq!(j["checks"][3]["status"], "not_graded");
        let x = render(Format::Junit, "0-demo", &results());
        assert!(
            x.contains("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(
            x.contains("message=\"x &lt; y &amp; &quot;z&quot;\""),
            "{x}"
        );
        let t = render(Format::Text, "0-demo", &results());
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
            serde_json::from_str(&render_invalid(Format::Gradescope, "0-demo", why, 10.0)).unwrap();
        assert_eq!(g["score"], 0.0);
        assert!(g["output"].as_str().unwrap().contains(why));
        let p: serde_json::Value =
            serde_json::from_str(&render_invalid(Format::Prairielearn, "0-demo", why, 10.0))
                .unwrap();
        assert_eq!(
            (p["gradable"].as_bool(), p["message"].as_str()),
            (Some(false), Some(why))
        );
        let j: serde_json::Value =
            serde_json::from_str(&render_invalid(Format::Json, "0-demo", why, 10.0)).unwrap();
        assert_eq!(j["max_score"], 10.0);
        let x = render_invalid(Format::Junit, "0-demo", why, 10.0);
        assert!(
            x.contains("errors=\"1\"") && x.contains("<error message="),
            "{x}"
        );
    }
}
