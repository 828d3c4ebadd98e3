//! kdiag's side of a course server's attestation, where the lab meets the
//! grader: every answered question's check journaled (and refused past the
//! course's limit), every evidence file the lab app saves journaled by its
//! content hash (`course::attest` keeps the journal and signs).

use super::state::{self, LabDir};
use crate::course::attest;
use crate::grade::answers::Answers;
use crate::grade::{CheckResult, Status};

/// Count each answered question's check: on a course server in the
/// learner's journal (refused past the course's limit), elsewhere in the
/// lab's folder (`state::count_attempts`, unattested). Unanswered
/// questions cost nothing.
pub fn count_checks(
    server: Option<&attest::Server>,
    dir: &LabDir,
    lab: &str,
    answers: &Answers,
    results: &mut [CheckResult],
) -> anyhow::Result<()> {
    if let Some(server) = server {
        return journal_checks(server, lab, answers, results);
    }
    let ids: Vec<&str> = results
        .iter()
        .filter(|r| r.graded && answers.get(&r.id).is_some())
        .map(|r| r.id.as_str())
        .collect();
    state::count_attempts(dir, &ids)
}

/// Journal each answered question's check, or refuse it past the course's
/// limit ("no attempts left"); unanswered questions cost nothing.
fn journal_checks(
    server: &attest::Server,
    lab: &str,
    answers: &Answers,
    results: &mut [CheckResult],
) -> anyhow::Result<()> {
    let used = server.attempts(lab)?;
    for r in results
        .iter_mut()
        .filter(|r| r.graded && answers.get(&r.id).is_some())
    {
        let before = used.get(&r.id).copied().unwrap_or(0);
        let limit = server.max_attempts();
        if let Some(max) = limit.filter(|&m| before >= m) {
            r.status = Status::Failed;
            r.score = 0.0;
            r.message = format!(
                "no attempts left: {before} of the course's {max} checks of this question used;                  your answer stays recorded and is graded when you submit"
            );
            continue;
        }
        let result = match r.status {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error | Status::NotGraded => "error",
        };
        server.record(
            lab,
            &attest::Entry {
                kind: "check",
                key: r.id.clone(),
                result: result.into(),
            },
        )?;
        let attempt = match limit {
            Some(max) => format!("attempt {} of {max}", before + 1),
            None => format!("attempt {}", before + 1),
        };
        r.message = if r.message.is_empty() {
            format!("({attempt})")
        } else {
            format!("{} ({attempt})", r.message)
        };
    }
    Ok(())
}

/// Journal an evidence file kdiag wrote itself, by its content hash.
pub fn journal_evidence(
    server: &attest::Server,
    lab: &str,
    file: &str,
    contents: &[u8],
) -> anyhow::Result<()> {
    server.record(
        lab,
        &attest::Entry {
            kind: "evidence",
            key: file.to_string(),
            result: attest::sha256_hex(contents),
        },
    )
}

/// Journal an answer recorded (the value stays in the answers file).
pub fn journal_answer(server: &attest::Server, lab: &str, key: &str) -> anyhow::Result<()> {
    server.record(
        lab,
        &attest::Entry {
            kind: "answer",
            key: key.to_string(),
            result: "recorded".into(),
        },
    )
}
