//! What a course server's attestation tells the instructor about one
//! submission, in lines every output format carries: attested or why not,
//! the checks per question from the journal, and each evidence file made
//! by kdiag (its content hash is in the journal) or brought by the learner.

use std::collections::BTreeMap;

use super::Check;
use super::answers::Answers;
use crate::course::attest::Verdict;

pub fn lines(
    verdict: &Verdict,
    checks: &[Check],
    answers: &Answers,
    hashes: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = vec![verdict.detail.clone()];
    if !verdict.attested {
        return out;
    }
    let attempts: Vec<String> = verdict
        .attempts
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    out.push(if attempts.is_empty() {
        "attempts per question: none checked".into()
    } else {
        format!("attempts per question: {}", attempts.join(", "))
    });
    for c in checks.iter().filter(|c| c.is_artifact()) {
        let Some(name) = answers.get(&c.id) else {
            continue;
        };
        let made = hashes
            .get(name.trim())
            .is_some_and(|h| verdict.recorded.contains(h));
        let by = if made {
            "made by kdiag"
        } else {
            "brought by the learner"
        };
        out.push(format!("evidence {} ({}): {by}", c.id, name.trim()));
    }
    out
}
