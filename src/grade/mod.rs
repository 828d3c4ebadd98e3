//! Checks: a lab's checks/<lab>.toml evaluated against a learner's answers
//! and the facts of their run. Pure: reading files is the callers' job,
//! except for `artifact_contains`, whose answer is a file to open.
//! `report.rs` renders the results for people and autograders.

pub mod report;

use serde::{Deserialize, Serialize};

use crate::lab::answers::Answers;
use crate::lab::session::{fact, fill};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckFile {
    pub format_version: u32,
    pub lab: String,
    pub checks: Vec<Check>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// Also the answers key it reads.
    pub id: String,
    pub step: String,
    pub name: String,
    pub kind: Kind,
    /// `equals`: the expected value.
    #[serde(default)]
    pub expected: Option<toml::Value>,
    /// `fact`: the fact to compare with.
    #[serde(default)]
    pub fact: Option<String>,
    /// Other accepted answers (synonyms).
    #[serde(default)]
    pub accept: Vec<String>,
    /// "bytes": compare as sizes ("10 MiB" = 10485760).
    #[serde(default)]
    pub unit: Option<String>,
    /// `artifact_contains`: strings the file must contain, with {fact}s.
    #[serde(default)]
    pub contains: Vec<String>,
    pub points: f64,
    pub hint: String,
    /// What is wrong, without the answer.
    pub fail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Equals,
    Fact,
    ArtifactContains,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    /// The check could not be evaluated (a fact missing from the session).
    Error,
}

/// One check's outcome: maps 1:1 onto Gradescope and PrairieLearn tests and
/// JUnit test cases.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub id: String,
    pub step: String,
    pub name: String,
    pub status: Status,
    pub score: f64,
    pub max_score: f64,
    pub message: String,
}

/// Evaluate `checks` (those of `step` only, when given).
pub fn evaluate(
    checks: &[Check],
    answers: &Answers,
    facts: &serde_json::Value,
    step: Option<&str>,
) -> Vec<CheckResult> {
    checks
        .iter()
        .filter(|c| step.is_none_or(|s| c.step == s))
        .map(|c| {
            let (status, message) = match outcome(c, answers, facts) {
                Ok(true) => (Status::Passed, String::new()),
                Ok(false) => (Status::Failed, c.fail.clone()),
                Err(Missing::Answer) => (Status::Failed, format!("no answer for {} yet", c.id)),
                Err(Missing::Fact(f)) => (
                    Status::Error,
                    format!("cannot check {}: the session has no fact {f}", c.id),
                ),
            };
            CheckResult {
                id: c.id.clone(),
                step: c.step.clone(),
                name: c.name.clone(),
                score: if status == Status::Passed {
                    c.points
                } else {
                    0.0
                },
                max_score: c.points,
                status,
                message,
            }
        })
        .collect()
}

enum Missing {
    Answer,
    Fact(String),
}

fn outcome(c: &Check, answers: &Answers, facts: &serde_json::Value) -> Result<bool, Missing> {
    let answer = answers.get(&c.id).ok_or(Missing::Answer)?;
    let expected = match c.kind {
        Kind::Equals => c.expected.as_ref().map(|v| match v {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        Kind::Fact => {
            let name = c.fact.as_deref().unwrap_or_default();
            Some(fact(facts, name).ok_or_else(|| Missing::Fact(name.to_string()))?)
        }
        Kind::ArtifactContains => {
            // Evidence is read with the learner's rights and limits: a FIFO
            // or an oversized file fails the check instead of stalling it.
            let limits = crate::sys::process::user_files::Limits::input();
            let Ok(text) =
                crate::sys::process::user_files::read_to_string(answer.as_ref(), &limits)
            else {
                return Ok(false);
            };
            for want in &c.contains {
                let want = fill(want, facts).map_err(Missing::Fact)?;
                if !text.contains(&want) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
    };
    let candidates = expected.into_iter().chain(c.accept.iter().cloned());
    Ok(candidates
        .into_iter()
        .any(|want| same(&answer, &want, c.unit.as_deref())))
}

/// Answers compare without case, surrounding space or quotes; yes/no read
/// as booleans; sizes as bytes with `unit = "bytes"`; paths without a
/// trailing slash.
fn same(answer: &str, expected: &str, unit: Option<&str>) -> bool {
    if unit == Some("bytes") {
        return match (bytes(answer), bytes(expected)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        };
    }
    let norm = |s: &str| {
        let s = s
            .trim()
            .trim_matches(['"', '\''])
            .trim_end_matches('/')
            .to_lowercase();
        match s.as_str() {
            "yes" | "y" | "true" => "true".to_string(),
            "no" | "n" | "false" => "false".to_string(),
            _ => s.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    };
    norm(answer) == norm(expected)
}

/// "10485760", "10 MiB", "10M", "10240 KiB", "1.5 GiB" as bytes.
fn bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim().to_lowercase().as_str() {
        "" | "b" | "bytes" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((n * mult).round() as u64)
}

/// Total and maximum score.
pub fn totals(results: &[CheckResult]) -> (f64, f64) {
    results
        .iter()
        .fold((0.0, 0.0), |(s, m), r| (s + r.score, m + r.max_score))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(kind: Kind) -> Check {
        Check {
            id: "a.b".into(),
            step: "s".into(),
            name: "n".into(),
            kind,
            expected: None,
            fact: None,
            accept: vec![],
            unit: None,
            contains: vec![],
            points: 2.0,
            hint: "h".into(),
            fail: "wrong".into(),
        }
    }

    fn answers(text: &str) -> Answers {
        Answers::parse("t", text).unwrap()
    }

    #[test]
    fn comparisons_normalise() {
        assert!(same(" WS ", "ws", None));
        assert!(same("yes", "true", None));
        assert!(same("/var/tmp/x/", "/var/tmp/x", None));
        assert!(!same("W", "WS", None));
        assert!(same("10 MiB", "10485760", Some("bytes")));
        assert!(same("10240KiB", "10485760", Some("bytes")));
        assert!(!same("10 MB", "1048576", Some("bytes")));
        assert!(!same("ten", "10", Some("bytes")));
    }

    #[test]
    fn fact_checks_pass_fail_and_say_what_is_missing() {
        let facts =
            serde_json::json!({"session": {"pid": 42}, "expect": {"pattern": "repeated-range"}});
        let mut c = check(Kind::Fact);
        c.fact = Some("session.pid".into());
        let r = evaluate(&[c.clone()], &answers("[a]\nb = 42"), &facts, None);
        assert_eq!((r[0].status, r[0].score), (Status::Passed, 2.0));
        let r = evaluate(&[c.clone()], &answers("[a]\nb = 43"), &facts, None);
        assert_eq!((r[0].status, r[0].score), (Status::Failed, 0.0));
        assert_eq!(r[0].message, "wrong");
        let r = evaluate(&[c.clone()], &answers(""), &facts, None);
        assert!(
            r[0].message.contains("no answer for a.b"),
            "{}",
            r[0].message
        );
        c.fact = Some("expect.missing".into());
        let r = evaluate(&[c.clone()], &answers("[a]\nb = 1"), &facts, None);
        assert_eq!(r[0].status, Status::Error);
        // Synonyms.
        c.fact = Some("expect.pattern".into());
        c.accept = vec!["same range".into()];
        let r = evaluate(&[c], &answers("[a]\nb = 'Same  Range'"), &facts, None);
        assert_eq!(r[0].status, Status::Passed);
    }

    #[test]
    fn equals_and_step_filter() {
        let mut c = check(Kind::Equals);
        c.expected = Some(toml::Value::Integer(3));
        let other = Check {
            step: "t".into(),
            ..c.clone()
        };
        let r = evaluate(
            &[c, other],
            &answers("[a]\nb = '3'"),
            &serde_json::json!({}),
            Some("s"),
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].status, Status::Passed);
    }

    #[test]
    fn artifacts_must_contain_the_filled_strings() {
        let dir = std::env::temp_dir().join(format!("kdiag-grade-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("trace.json");
        std::fs::write(&file, "{\"pid\": 42, \"rwbs\": \"WS\"}").unwrap();
        let facts = serde_json::json!({"session": {"pid": 42}});
        let mut c = check(Kind::ArtifactContains);
        c.contains = vec!["\"pid\": {session.pid}".into()];
        let a = answers(&format!("[a]\nb = '{}'", file.display()));
        assert_eq!(
            evaluate(&[c.clone()], &a, &facts, None)[0].status,
            Status::Passed
        );
        let other = serde_json::json!({"session": {"pid": 7}});
        assert_eq!(
            evaluate(&[c.clone()], &a, &other, None)[0].status,
            Status::Failed
        );
        let gone = answers("[a]\nb = '/nonexistent/trace.json'");
        assert_eq!(
            evaluate(&[c], &gone, &facts, None)[0].status,
            Status::Failed
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
