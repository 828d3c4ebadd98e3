//! Check results for people (text) and for autograders: JSON, Gradescope's
//! results.json, JUnit XML, PrairieLearn's results.json.

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
        Format::Junit => junit(lab, results),
        Format::Prairielearn => prairielearn(results),
    }
}

/// The same for an answers file that could not be read: nothing is graded.
pub fn render_invalid(format: Format, lab: &str, why: &str) -> String {
    match format {
        Format::Text => format!("cannot grade: {why}\n"),
        Format::Json => pretty(serde_json::json!({"lab": lab, "error": why})),
        Format::Gradescope => pretty(serde_json::json!({"score": 0.0, "output": why})),
        // One test case in error: the answers themselves.
        Format::Junit => junit(
            lab,
            &[CheckResult {
                id: "answers".into(),
                step: "answers".into(),
                name: "answers file".into(),
                status: Status::Error,
                score: 0.0,
                max_score: 0.0,
                message: why.into(),
            }],
        ),
        // gradable: false costs the student no attempt.
        Format::Prairielearn => pretty(serde_json::json!({
            "gradable": false,
            "format_errors": [why],
            "score": 0.0,
        })),
    }
}

fn pretty(v: serde_json::Value) -> String {
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

fn text(results: &[CheckResult]) -> String {
    let mut out = String::new();
    for r in results {
        let mark = match r.status {
            Status::Passed => "ok  ",
            Status::Failed => "FAIL",
            Status::Error => "ERR ",
        };
        let _ = write!(out, "{mark} {:<20} {}", r.id, r.name);
        if !r.message.is_empty() {
            let _ = write!(out, "\n     {}", r.message);
        }
        out.push('\n');
    }
    let (score, max) = totals(results);
    let passed = results
        .iter()
        .filter(|r| r.status == Status::Passed)
        .count();
    let _ = writeln!(
        out,
        "{passed}/{} checks passed, {score}/{max} points",
        results.len()
    );
    out
}

fn json(lab: &str, results: &[CheckResult]) -> String {
    let (score, max_score) = totals(results);
    pretty(serde_json::json!({
        "lab": lab,
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
            serde_json::json!({
                "name": r.name,
                "number": format!("{}", i + 1),
                "score": r.score,
                "max_score": r.max_score,
                "status": if r.status == Status::Passed { "passed" } else { "failed" },
                "output": r.message,
                "tags": [r.step],
            })
        })
        .collect();
    pretty(serde_json::json!({"score": score, "tests": tests}))
}

fn prairielearn(results: &[CheckResult]) -> String {
    let (score, max) = totals(results);
    let tests: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "points": r.score,
                "max_points": r.max_score,
                "message": r.message,
            })
        })
        .collect();
    pretty(serde_json::json!({
        "gradable": true,
        "score": if max > 0.0 { score / max } else { 0.0 },
        "tests": tests,
    }))
}

fn junit(lab: &str, results: &[CheckResult]) -> String {
    let count = |s: Status| results.iter().filter(|r| r.status == s).count();
    let (failures, errors) = (count(Status::Failed), count(Status::Error));
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{l}\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"{l}\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n",
        l = xml(lab),
        n = results.len()
    );
    for r in results {
        let _ = write!(
            out,
            "    <testcase classname=\"{}.{}\" name=\"{}\"",
            xml(lab),
            xml(&r.step),
            xml(&r.id)
        );
        match r.status {
            Status::Passed => out.push_str("/>\n"),
            Status::Failed => {
                let _ = write!(
                    out,
                    ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                    xml(&r.message)
                );
            }
            Status::Error => {
                let _ = write!(
                    out,
                    ">\n      <error message=\"{}\"/>\n    </testcase>\n",
                    xml(&r.message)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
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
            score,
            max_score: 2.0,
            message: if status == Status::Passed {
                String::new()
            } else {
                "x < y & \"z\"".into()
            },
        };
        vec![
            r("who.pid", Status::Passed, 2.0),
            r("who.comm", Status::Failed, 0.0),
            r("why.file", Status::Error, 0.0),
        ]
    }

    #[test]
    fn autograder_formats() {
        let g: serde_json::Value =
            serde_json::from_str(&render(Format::Gradescope, "0-demo", &results())).unwrap();
        assert_eq!(g["score"], 2.0);
        assert_eq!(g["tests"].as_array().unwrap().len(), 3);
        assert_eq!(g["tests"][1]["status"], "failed");
        let p: serde_json::Value =
            serde_json::from_str(&render(Format::Prairielearn, "0-demo", &results())).unwrap();
        assert!((p["score"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9);
        let j = render(Format::Junit, "0-demo", &results());
        assert!(j.contains("tests=\"3\" failures=\"1\" errors=\"1\""), "{j}");
        assert!(
            j.contains("message=\"x &lt; y &amp; &quot;z&quot;\""),
            "{j}"
        );
        let t = render(Format::Text, "0-demo", &results());
        assert!(t.ends_with("1/3 checks passed, 2/6 points\n"), "{t}");
        let bad: serde_json::Value =
            serde_json::from_str(&render_invalid(Format::Prairielearn, "0-demo", "a:1:2: x"))
                .unwrap();
        assert_eq!(bad["gradable"], false);
    }
}
