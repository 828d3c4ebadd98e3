//! What an attempt is, in one place for the app, plain mode and `check`:
//! one **new answer** to one question, counted once when it is first
//! checked. Checking an answer again unchanged counts nothing, and a
//! question with no answer costs nothing. An answer is known by its
//! fingerprint: the value, and for an evidence file its content.
//!
//! On a course server (`course::policy`) attempts are journaled in root's
//! journal and capped by the course's `max_attempts`: past it a new answer
//! is not judged ("no attempts left"). Elsewhere kdiag counts them in the
//! lab's folder (`attempts.toml`), which the learner can edit: every
//! message says they are not attested.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::LabDir;
use crate::course::attest::{self, Server};
use crate::grade::answers::Answers;
use crate::grade::{CheckResult, Evidence, Status};
use crate::user_files::{self, Limits};

/// What `lab submit` writes beside attempts counted on the learner's machine.
pub const UNATTESTED: &str = "the learner's machine (not attested)";
/// ... and beside attempts from the course server's journal.
pub const ATTESTED: &str = "the course server (attested by attestation.toml)";

/// The lab folder's count (attempts.toml): attempts per question, and the
/// fingerprint of the last answer counted for each.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Local {
    #[serde(flatten)]
    counts: BTreeMap<String, u32>,
    #[serde(default)]
    last: BTreeMap<String, String>,
}

fn load(dir: &LabDir) -> Local {
    user_files::read_to_string(&dir.attempts(), &Limits::input())
        .ok()
        .and_then(|text| toml::from_str(&text).ok())
        .unwrap_or_default()
}

/// Attempts per question as the lab's folder counts them (missing or
/// damaged: none), for `lab submit`.
pub fn local(dir: &LabDir) -> BTreeMap<String, u32> {
    load(dir).counts
}

/// The fingerprint of `value`, with the evidence file it names, if any.
fn fingerprint(value: &str, evidence: &Evidence, artifact: bool) -> String {
    let mut bytes = value.trim().as_bytes().to_vec();
    if artifact && let Ok(data) = evidence.read(value) {
        bytes.push(0);
        bytes.extend(attest::sha256_hex(&data).into_bytes());
    }
    attest::sha256_hex(&bytes)[..16].to_string()
}

/// Count the new answers among `results` (checked from `answers`), and
/// say each graded answer's attempt in its message: on a course server
/// journaled and refused past the course's limit, elsewhere in `dir`.
pub fn count(
    server: Option<&Server>,
    dir: &LabDir,
    lab: &str,
    answers: &Answers,
    evidence: &Evidence,
    results: &mut [CheckResult],
    artifact: &dyn Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let (mut counts, mut last) = match server {
        Some(s) => {
            let journal = s.journal(lab)?;
            (attest::attempts(&journal), attest::last_answers(&journal))
        }
        None => {
            let l = load(dir);
            (l.counts, l.last)
        }
    };
    let limit = server.and_then(Server::max_attempts);
    let mut changed = false;
    for r in results.iter_mut().filter(|r| r.graded) {
        let Some(value) = answers.get(&r.id).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let fp = fingerprint(&value, evidence, artifact(&r.id));
        let used = counts.get(&r.id).copied().unwrap_or(0);
        let new = last.get(&r.id) != Some(&fp);
        if new && let Some(max) = limit.filter(|&m| used >= m) {
            r.status = Status::Failed;
            r.score = 0.0;
            r.message = format!(
                "no attempts left: {used} of the course's {max} answers to this question used; \
                 your answer stays recorded and is graded when you submit"
            );
            continue;
        }
        let n = if new { used + 1 } else { used };
        if new {
            if let Some(s) = server {
                s.record(
                    lab,
                    &attest::Entry {
                        kind: "check",
                        key: r.id.clone(),
                        result: result_word(r.status).into(),
                        answer: Some(fp.clone()),
                    },
                )?;
            }
            counts.insert(r.id.clone(), n);
            last.insert(r.id.clone(), fp);
            changed = true;
        }
        let attempt = match (server, limit) {
            (Some(_), Some(max)) => format!("attempt {n} of {max}"),
            (Some(_), None) => format!("attempt {n}"),
            (None, _) => format!("attempt {n}, counted on your machine, not attested"),
        };
        r.message = if r.message.is_empty() {
            format!("({attempt})")
        } else {
            format!("{} ({attempt})", r.message)
        };
    }
    if changed && server.is_none() {
        dir.create()?;
        let text = format!(
            "# kdiag lab attempts: new answers per question, counted by kdiag on this machine \
             (not attested).\n{}",
            toml::to_string(&Local { counts, last })?
        );
        user_files::write_private(&dir.attempts(), text)?;
    }
    Ok(())
}

fn result_word(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Failed => "failed",
        Status::Error | Status::NotGraded => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str) -> CheckResult {
        CheckResult {
            id: id.into(),
            step: "who".into(),
            name: id.into(),
            status: Status::Failed,
            graded: true,
            score: 0.0,
            max_score: 1.0,
            message: String::new(),
            attempts: None,
        }
    }

    #[test]
    fn only_a_new_answer_is_an_attempt() {
        let d = tempfile::tempdir().unwrap();
        let dir = LabDir::new(d.path(), "0-demo");
        let ev = Evidence::Files(Default::default());
        let mut a = Answers::default();
        a.set("who.comm", "bash").unwrap();
        let check = |a: &Answers| {
            let mut rs = vec![result("who.comm"), result("who.pid")];
            count(None, &dir, "0-demo", a, &ev, &mut rs, &|_| false).unwrap();
            rs
        };
        for _ in 0..5 {
            let rs = check(&a);
            assert!(
                rs[0]
                    .message
                    .contains("attempt 1, counted on your machine, not attested")
            );
            assert!(rs[1].message.is_empty(), "unanswered: no attempt");
        }
        a.set("who.comm", "io-app").unwrap();
        check(&a);
        check(&a);
        assert_eq!(local(&dir), [("who.comm".to_string(), 2)].into());
        // An older attempts.toml (counts only) still reads.
        std::fs::write(dir.attempts(), "\"who.comm\" = 4\n").unwrap();
        assert_eq!(local(&dir)["who.comm"], 4);
    }
}
