//! What a course server's attestation tells the instructor about one
//! submission, in lines every output format carries: attested or why not,
//! the checks per question (from the signed journal, else as the bundle's
//! manifest counted them, unattested), and each evidence file made by
//! kdiag (its content hash is in the journal) or brought by the learner.

use std::collections::BTreeMap;

use super::answers::Answers;
use super::{Check, CheckResult};
use crate::course::attest::Verdict;

/// The checks per question a submission records: the signed journal's
/// when attested, else its manifest's (None: not recorded).
pub fn attempts<'a>(
    verdict: &'a Verdict,
    manifest: Option<&'a BTreeMap<String, u32>>,
) -> Option<&'a BTreeMap<String, u32>> {
    if verdict.attested {
        Some(&verdict.attempts)
    } else {
        manifest
    }
}

/// Give each graded result its question's attempts (0 when never checked).
pub fn set_attempts(results: &mut [CheckResult], attempts: Option<&BTreeMap<String, u32>>) {
    let Some(counts) = attempts else {
        return;
    };
    for r in results.iter_mut().filter(|r| r.graded) {
        r.attempts = Some(counts.get(&r.id).copied().unwrap_or(0));
    }
}

pub fn lines(
    verdict: &Verdict,
    manifest_attempts: Option<&BTreeMap<String, u32>>,
    checks: &[Check],
    answers: &Answers,
    hashes: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut out = vec![verdict.detail.clone()];
    let source = if verdict.attested {
        ""
    } else {
        " (counted on the learner's machine, not attested)"
    };
    if let Some(counts) = attempts(verdict, manifest_attempts) {
        let each: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
        out.push(if each.is_empty() {
            format!("attempts per question{source}: none checked")
        } else {
            format!("attempts per question{source}: {}", each.join(", "))
        });
    }
    if !verdict.attested {
        return out;
    }
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
