//! Grading a lab's submissions. Each is graded as the learner its
//! manifest names when the platform and the roster agree
//! (`grade::identity`), its attestation checked, its answers and the files
//! they name checked against the truth of that learner's seed, recomputed
//! from the course secret; the submission contributes nothing else. A class
//! is a folder of them: the newest per learner graded, the roster's
//! learners without one listed, copies flagged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Lab;
use super::submission::{self, Invalid};
use crate::course::roster::Roster;
use crate::course::{Course, Token, attest};
use crate::grade::class::{self, Class, Graded};
use crate::grade::identity::{self, Claim, GRADESCOPE_METADATA};
use crate::grade::{self, CheckFile, Facts};

/// Grades submissions of one lab for one course, computing each seed's
/// truth once.
pub struct Grader<'a> {
    pub lab: &'a Lab,
    pub checks: &'a CheckFile,
    course: &'a Course,
    roster: Option<&'a Roster>,
    /// Truth by seed: learners sharing a variant share its computation.
    truths: HashMap<Token, Facts>,
    require_attested: bool,
}

impl<'a> Grader<'a> {
    pub fn new(
        lab: &'a Lab,
        checks: &'a CheckFile,
        course: &'a Course,
        roster: Option<&'a Roster>,
        require_attested: bool,
    ) -> Self {
        Grader {
            lab,
            checks,
            course,
            roster,
            truths: HashMap::new(),
            require_attested,
        }
    }

    /// The points of the graded checks.
    pub fn max(&self) -> f64 {
        self.checks
            .checks
            .iter()
            .filter(|c| !c.live())
            .map(|c| c.points)
            .sum()
    }

    /// Grade the submission at `path` as the learner its manifest names,
    /// if `claims` (the platform's word) and the roster agree.
    pub fn grade(&mut self, name: &str, path: &Path, claims: &[Claim]) -> Graded {
        let failed = |learner: Option<String>, why: String| Graded {
            submission: name.to_string(),
            seed: learner.as_ref().map(|l| self.course.token(l).to_string()),
            learner,
            error: Some(why),
            ..Graded::default()
        };
        let sub = match submission::open(path) {
            Ok(s) => s,
            Err(Invalid(why)) => {
                return failed(identity::resolve(None, claims, self.roster).ok(), why);
            }
        };
        let manifest = sub.manifest.as_ref();
        if let Some(m) = manifest.filter(|m| m.lab != self.lab.id) {
            return failed(
                None,
                format!(
                    "this submission is for lab {} (its manifest says so), not {}: grade it with \
                     kdiag grade {} (learner {})",
                    m.lab, self.lab.id, m.lab, m.learner
                ),
            );
        }
        let learner =
            match identity::resolve(manifest.map(|m| m.learner.as_str()), claims, self.roster) {
                Ok(l) => l,
                Err(why) => return failed(None, why),
            };
        let verdict = attest::verify(
            self.course,
            sub.signed.attestation.as_deref(),
            &sub.signed.hashes,
            &learner,
            &self.lab.id,
        );
        if self.require_attested && !verdict.attested {
            return failed(
                Some(learner),
                format!("{} (--require-attested)", verdict.detail),
            );
        }
        let manifest_attempts = manifest.and_then(|m| m.attempts.as_ref());
        let attestation = grade::attestation::lines(
            &verdict,
            manifest_attempts,
            &self.checks.checks,
            &sub.answers,
            &sub.signed.hashes,
        );
        let seed = self.course.token(&learner);
        let facts = match self.facts(&seed) {
            Ok(f) => f,
            Err(why) => return failed(Some(learner), why),
        };
        let mut warnings = grade::unknown_keys(&self.checks.checks, &sub.answers);
        // Without a roster kdiag cannot tell a learner named by another
        // column (a login where seeds were handed out by student id) from
        // one who used another seed: never grade that silently.
        if let Some(m) = manifest.filter(|m| {
            self.roster.is_none()
                && m.seed != seed.as_str()
                && m.seed_source != submission::SeedSource::SelfStudy
        }) {
            return failed(
                Some(learner.clone()),
                format!(
                    "the submission was made with seed {}, which is not the course seed of \
                     learner {learner:?}: if your roster names learners by another column \
                     (a login, an email) than the seeds were handed out by, grade with \
                     --roster ROSTER.csv (and --id-column/--login-column if its header does \
                     not say)",
                    m.seed
                ),
            );
        }
        if let Some(m) = manifest.filter(|m| m.seed != seed.as_str()) {
            warnings.push(format!(
                "the submission was made with seed {} ({}), not learner {learner}'s course seed \
                 {seed}: its answers are checked against {seed}",
                m.seed, m.seed_source
            ));
        }
        let mut results = grade::evaluate(
            &self.checks.checks,
            &sub.answers,
            &facts,
            &sub.evidence,
            None,
        );
        grade::attestation::set_attempts(
            &mut results,
            grade::attestation::attempts(&verdict, manifest_attempts),
        );
        Graded {
            submission: name.to_string(),
            learner: Some(learner),
            seed: Some(seed.to_string()),
            results,
            error: None,
            manifest_seed: manifest.map(|m| m.seed.clone()),
            created: manifest.map_or(0, |m| m.created),
            warnings,
            missing: false,
            attested: verdict.attested,
            attestation,
            answers: Some(sub.answers),
            evidence: Some(sub.evidence),
            facts: Some(facts),
        }
    }

    /// Every submission among `entries` (name, path), each as the learner
    /// its entry and manifest name: the newest per learner graded, the
    /// roster's learners without one listed as missing, copies flagged.
    pub fn class(&mut self, entries: impl IntoIterator<Item = (String, PathBuf)>) -> Class {
        let mut graded: Vec<Graded> = entries
            .into_iter()
            .map(|(name, path)| {
                let claims = [Claim::entry(&self.lab.id, &name)];
                self.grade(&name, &path, &claims)
            })
            .collect();
        let duplicates = class::supersede(&mut graded);
        for l in self.roster.map_or(&[][..], |r| &r.learners) {
            if !graded
                .iter()
                .any(|g| g.learner.as_deref() == Some(l.id.as_str()))
            {
                graded.push(Graded {
                    submission: l.folder.clone().unwrap_or_else(|| l.id.clone()),
                    learner: Some(l.id.clone()),
                    seed: Some(self.course.token(&l.id).to_string()),
                    error: Some("no submission".into()),
                    missing: true,
                    ..Graded::default()
                });
            }
        }
        let suspicious = class::suspicious(&self.checks.checks, &graded);
        Class {
            graded,
            duplicates,
            suspicious,
        }
    }

    fn facts(&mut self, seed: &Token) -> Result<Facts, String> {
        if let Some(f) = self.truths.get(seed) {
            return Ok(f.clone());
        }
        let f = super::facts(self.lab, seed).map_err(|e| format!("{e:#}"))?;
        self.truths.insert(seed.clone(), f.clone());
        Ok(f)
    }
}

/// A class folder's entry's submission name: a folder's, or an archive's
/// without its suffix; None for dot files and Gradescope's metadata. Any
/// other file is named too, so that it is refused by name rather than
/// ignored.
pub fn entry_name(p: &Path) -> Option<String> {
    let file = p.file_name()?.to_string_lossy().into_owned();
    if file.starts_with('.') || file == GRADESCOPE_METADATA {
        return None;
    }
    Some(submission::strip_archive_suffix(&file).to_string())
}
