//! Checks → results → formats. `checks.rs` loads a lab's checks,
//! `facts.rs` is the truth they compare with (from the learner's seed, plus
//! the live run's in the lab), `forms.rs` how answers compare (`policy.rs`
//! the course's rules for kernel letters and names),
//! `evidence.rs` reads the files answers point to, `identity.rs` decides
//! which learner a submission is graded as, `attestation.rs` what a
//! course server vouched for. `evaluate` here turns
//! answers into one `CheckResult` per check; `report.rs` renders them for
//! people and autograders; `class.rs` grades a directory of submissions and
//! looks for copied answers; `summary.rs` shows the class at a glance;
//! `gradebook.rs` merges several labs' grading into one gradebook.

pub mod answers;
pub mod attestation;
pub mod checks;
pub mod class;
pub mod class_report;
pub mod evidence;
pub mod facts;
pub mod forms;
pub mod gradebook;
pub mod identity;
pub mod policy;
pub mod report;
pub mod summary;

use serde::Serialize;

pub use checks::{Check, CheckFile, Kind};
pub use evidence::Evidence;
pub use facts::Facts;

use answers::Answers;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    Failed,
    /// The check could not be evaluated (a fact the truth lacks).
    Error,
    /// A live check outside the lab: the grader cannot know the fact.
    NotGraded,
}

/// One check's outcome: maps 1:1 onto Gradescope and PrairieLearn tests and
/// JUnit test cases.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub id: String,
    pub step: String,
    pub name: String,
    pub status: Status,
    /// Counts toward the grade (live checks never do).
    pub graded: bool,
    pub score: f64,
    pub max_score: f64,
    pub message: String,
    /// How often the learner checked this question before submitting
    /// (None: the submission does not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

/// The message of a live check outside the lab.
pub const NOT_GRADED: &str =
    "not graded: checked by `kdiag lab` against the running workload (its progress, not the grade)";

/// Evaluate `checks` (those of `step` only, when given) against `answers`,
/// the learner's `facts` and the files the answers point to.
pub fn evaluate(
    checks: &[Check],
    answers: &Answers,
    facts: &Facts,
    evidence: &Evidence,
    step: Option<&str>,
) -> Vec<CheckResult> {
    checks
        .iter()
        .filter(|c| step.is_none_or(|s| c.step == s))
        .map(|c| evaluate_one(c, answers, facts, evidence))
        .collect()
}

fn evaluate_one(c: &Check, answers: &Answers, facts: &Facts, evidence: &Evidence) -> CheckResult {
    let graded = !c.live();
    let (status, message) = if !graded && !facts.has_live() {
        (Status::NotGraded, NOT_GRADED.to_string())
    } else {
        match outcome(c, answers, facts, evidence) {
            Ok(true) => (Status::Passed, String::new()),
            Ok(false) => (Status::Failed, policy::fail_message(&c.id, &c.fail)),
            Err(Missing::Answer) => (Status::Failed, format!("no answer for {} yet", c.id)),
            Err(Missing::Artifact(why)) => (Status::Failed, format!("{}: {why}", c.id)),
            Err(Missing::Fact(f)) => (
                Status::Error,
                format!(
                    "cannot check {}: the truth of this variant has no fact {f}",
                    c.id
                ),
            ),
        }
    };
    let max_score = if graded { c.points } else { 0.0 };
    CheckResult {
        id: c.id.clone(),
        step: c.step.clone(),
        name: c.name.clone(),
        score: if status == Status::Passed {
            max_score
        } else {
            0.0
        },
        max_score,
        graded,
        status,
        message,
        attempts: None,
    }
}

/// Why a check could not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Missing {
    Answer,
    /// The answer names a file that cannot be used.
    Artifact(String),
    Fact(String),
}

/// Whether `c` passes for these answers and facts.
pub fn outcome(
    c: &Check,
    answers: &Answers,
    facts: &Facts,
    evidence: &Evidence,
) -> Result<bool, Missing> {
    let answer = answers.get(&c.id).ok_or(Missing::Answer)?;
    if c.is_artifact() {
        let data = evidence.read(&answer).map_err(Missing::Artifact)?;
        return artifact_passes(c, &data, facts);
    }
    let wanted = expected(c, facts)?;
    Ok(wanted.iter().any(|w| matches(c, &answer, w)))
}

/// Whether `answer` is `wanted` for check `c`: the same in its form, or
/// within its tolerance.
pub fn matches(c: &Check, answer: &str, wanted: &str) -> bool {
    match c.tolerance {
        Some(t) => forms::near(c.form, t, answer, wanted),
        None => forms::same(c.form, answer, wanted),
    }
}

/// Whether an artifact's content holds every string `c` asks for.
pub fn artifact_passes(c: &Check, data: &[u8], facts: &Facts) -> Result<bool, Missing> {
    let text = String::from_utf8_lossy(data);
    for want in &c.contains {
        let want = facts.fill(want).map_err(Missing::Fact)?;
        if !text.contains(&want) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The answers `c` accepts (before comparison in its form): the expected
/// value or fact (any item of a list), then the synonyms.
pub fn expected(c: &Check, facts: &Facts) -> Result<Vec<String>, Missing> {
    let first = match c.kind {
        Kind::Equals => c
            .expected
            .as_ref()
            .map(|v| match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .into_iter()
            .collect(),
        Kind::Fact => {
            let name = c.fact.as_deref().unwrap_or_default();
            facts
                .get_all(name)
                .ok_or_else(|| Missing::Fact(name.to_string()))?
        }
        Kind::ArtifactContains => Vec::new(),
    };
    Ok(first.into_iter().chain(c.accept.iter().cloned()).collect())
}

/// The canonical key of a value answer (for finding equal answers across
/// learners), or of an artifact's required strings; None when it has none.
pub fn variant_key(c: &Check, facts: &Facts) -> Option<String> {
    if c.is_artifact() {
        let filled: Result<Vec<String>, String> =
            c.contains.iter().map(|s| facts.fill(s)).collect();
        return filled.ok().map(|v| v.join("\u{1f}"));
    }
    let first = expected(c, facts).ok()?.into_iter().next()?;
    forms::canonical(c.form, &first)
}

/// The variant an answer stands for, when looking for copied answers: the
/// learner's `own` when it passes for them (any item of a list fact, or
/// within the tolerance); else, for a check with a tolerance, the first of
/// `variants` it is near; else its canonical text.
pub fn answer_key<'a>(
    c: &Check,
    answer: &str,
    facts: &Facts,
    own: Option<&str>,
    mut variants: impl Iterator<Item = &'a str>,
) -> Option<String> {
    let passes = expected(c, facts).is_ok_and(|w| w.iter().any(|w| matches(c, answer, w)));
    if let (true, Some(own)) = (passes, own) {
        return Some(own.to_string());
    }
    match c.tolerance {
        Some(t) => variants
            .find(|v| forms::near(c.form, t, answer, v))
            .map(str::to_string),
        None => forms::canonical(c.form, answer),
    }
}

/// A warning naming the answer keys no check of the lab reads (a typo,
/// another lab's answers): they score nothing, and the learner should know.
pub fn unknown_keys(checks: &[Check], answers: &Answers) -> Vec<String> {
    let unknown: Vec<String> = answers
        .keys()
        .into_iter()
        .filter(|k| !checks.iter().any(|c| &c.id == k))
        .collect();
    if unknown.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "answers no check of this lab reads (ignored): {}",
        unknown.join(", ")
    )]
}

/// Total and maximum score of the graded checks.
pub fn totals(results: &[CheckResult]) -> (f64, f64) {
    results
        .iter()
        .filter(|r| r.graded)
        .fold((0.0, 0.0), |(s, m), r| (s + r.score, m + r.max_score))
}

/// Whether every graded check passed.
pub fn all_graded_passed(results: &[CheckResult]) -> bool {
    results
        .iter()
        .filter(|r| r.graded)
        .all(|r| r.status == Status::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::Token;
    use std::collections::BTreeMap;

    fn check(kind: Kind) -> Check {
        Check {
            id: "a.b".into(),
            step: "s".into(),
            name: "n".into(),
            kind,
            expected: None,
            fact: None,
            accept: vec![],
            form: forms::Form::Text,
            tolerance: None,
            contains: vec![],
            points: 2.0,
            placeholder: None,
            hint: "h".into(),
            fail: "wrong".into(),
        }
    }

    fn answers(text: &str) -> Answers {
        Answers::parse("t", text).unwrap()
    }

    fn facts(expect: serde_json::Value) -> Facts {
        Facts::from_truth(
            &Token::parse("s1").unwrap(),
            &serde_json::json!({ "expect": expect }),
        )
    }

    fn none() -> Evidence {
        Evidence::Files(BTreeMap::new())
    }

    #[test]
    fn fact_checks_pass_fail_and_say_what_is_missing() {
        let f = facts(serde_json::json!({"n": 42, "pattern": "repeated-range"}));
        let mut c = check(Kind::Fact);
        c.fact = Some("expect.n".into());
        let r = evaluate(&[c.clone()], &answers("[a]\nb = 42"), &f, &none(), None);
        assert_eq!((r[0].status, r[0].score), (Status::Passed, 2.0));
        let r = evaluate(&[c.clone()], &answers("[a]\nb = 43"), &f, &none(), None);
        assert_eq!(
            (r[0].status, r[0].score, r[0].message.as_str()),
            (Status::Failed, 0.0, "wrong")
        );
        let r = evaluate(&[c.clone()], &answers(""), &f, &none(), None);
        assert!(
            r[0].message.contains("no answer for a.b"),
            "{}",
            r[0].message
        );
        c.fact = Some("expect.missing".into());
        let r = evaluate(&[c.clone()], &answers("[a]\nb = 1"), &f, &none(), None);
        assert_eq!(r[0].status, Status::Error);
        c.fact = Some("expect.pattern".into());
        c.accept = vec!["same range".into()];
        let r = evaluate(&[c], &answers("[a]\nb = 'Same  Range'"), &f, &none(), None);
        assert_eq!(r[0].status, Status::Passed);
    }

    #[test]
    fn tolerance_and_list_facts() {
        let f = facts(serde_json::json!({"rate": 2359296, "fields": ["p_offset", "p_vaddr"]}));
        let mut c = check(Kind::Fact);
        c.fact = Some("expect.rate".into());
        c.form = forms::Form::Bytes;
        let run =
            |c: &Check, a: &str| evaluate(std::slice::from_ref(c), &answers(a), &f, &none(), None);
        assert_eq!(run(&c, "[a]\nb = '2.2 MiB/s'")[0].status, Status::Failed);
        c.tolerance = Some(0.1);
        assert_eq!(run(&c, "[a]\nb = '2.2 MiB/s'")[0].status, Status::Passed);
        assert_eq!(run(&c, "[a]\nb = '2.25 MiB'")[0].status, Status::Passed);
        assert_eq!(run(&c, "[a]\nb = '2.6 MiB/s'")[0].status, Status::Failed);
        assert_eq!(run(&c, "[a]\nb = 'fast'")[0].status, Status::Failed);
        // A list fact accepts any of its items; its first is its key.
        c.fact = Some("expect.fields".into());
        c.form = forms::Form::Text;
        c.tolerance = None;
        assert_eq!(run(&c, "[a]\nb = 'p_vaddr'")[0].status, Status::Passed);
        assert_eq!(run(&c, "[a]\nb = 'P_OFFSET'")[0].status, Status::Passed);
        assert_eq!(run(&c, "[a]\nb = 'p_align'")[0].status, Status::Failed);
        assert_eq!(variant_key(&c, &f).as_deref(), Some("p_offset"));
        assert_eq!(f.get("expect.fields.1").as_deref(), Some("p_vaddr"));
    }

    #[test]
    fn live_checks_count_in_the_lab_and_are_not_graded_elsewhere() {
        let mut c = check(Kind::Fact);
        c.fact = Some("live.pid".into());
        c.points = 0.0;
        let f = facts(serde_json::json!({}));
        let a = answers("[a]\nb = 77");
        let r = evaluate(&[c.clone()], &a, &f, &none(), None);
        assert_eq!(
            (r[0].status, r[0].graded, r[0].max_score),
            (Status::NotGraded, false, 0.0)
        );
        assert_eq!(totals(&r), (0.0, 0.0));
        let r = evaluate(&[c.clone()], &a, &f.with_live(77), &none(), None);
        assert_eq!((r[0].status, r[0].graded), (Status::Passed, false));
        let r = evaluate(&[c], &a, &f.with_live(78), &none(), None);
        assert_eq!(r[0].status, Status::Failed);
        assert!(all_graded_passed(&r), "a live check is not graded");
    }

    #[test]
    fn artifacts_must_hold_the_seed_s_evidence() {
        let f = facts(serde_json::json!({"function": "flush_ledger"}));
        let mut c = check(Kind::ArtifactContains);
        c.contains = vec![";{expect.function};".into()];
        let files = Evidence::Files(BTreeMap::from([
            (
                "p.folded".to_string(),
                b"io-app;main;flush_ledger;write 3\n".to_vec(),
            ),
            (
                "q.folded".to_string(),
                b"io-app;main;persist_journal;write 3\n".to_vec(),
            ),
        ]));
        let run = |a: &str| evaluate(&[c.clone()], &answers(a), &f, &files, None)[0].clone();
        assert_eq!(run("[a]\nb = 'p.folded'").status, Status::Passed);
        assert_eq!(run("[a]\nb = 'q.folded'").status, Status::Failed);
        let gone = run("[a]\nb = 'r.folded'");
        assert_eq!(gone.status, Status::Failed);
        assert!(
            gone.message.contains("not in the submission"),
            "{}",
            gone.message
        );
        assert_eq!(
            variant_key(&c, &f).as_deref(),
            Some(";flush_ledger;"),
            "the key of an artifact is what it must contain"
        );
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
            &facts(serde_json::json!({})),
            &none(),
            Some("s"),
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].status, Status::Passed);
    }
}
