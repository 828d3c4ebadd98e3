//! A class's worth of submissions: each graded against the truth of the
//! learner's own seed, then compared with each other for what a
//! per-learner variant makes visible. A submission is flagged only with
//! evidence: answers that fit another learner's variant and not its own,
//! on facts where the two variants differ, too many to be chance; or a
//! manifest made with another learner's seed. An honest learner whose
//! answers fit their own variant is never flagged, however many others
//! share them, and the learner copied from is named, never flagged.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Check, CheckResult, Evidence, Facts, answer_key, artifact_passes, variant_key};
use crate::grade::answers::Answers;

/// One submission as graded, with what the comparison needs.
#[derive(Debug, Clone, Default)]
pub struct Graded {
    /// The submission's folder (or archive) name.
    pub submission: String,
    /// The learner it was graded as.
    pub learner: Option<String>,
    pub seed: Option<String>,
    pub results: Vec<CheckResult>,
    /// Why it could not be graded.
    pub error: Option<String>,
    /// The seed the submission's manifest claims.
    pub manifest_seed: Option<String>,
    /// When the manifest says it was made (0: unknown).
    pub created: u64,
    /// What the grader noticed (unknown answer keys, another seed).
    pub warnings: Vec<String>,
    /// A roster learner with no submission at all (not an ungradable one).
    pub missing: bool,
    /// Whether a course server attested it, and the lines saying what.
    pub attested: bool,
    pub attestation: Vec<String>,
    pub answers: Option<Answers>,
    pub evidence: Option<Evidence>,
    pub facts: Option<Facts>,
}

/// One flag on a submission.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suspicion {
    /// `copy` (answers of another variant) or `other_seed` (a manifest
    /// made with another learner's seed).
    pub kind: &'static str,
    /// The facts (check ids) that fit the other variant.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    /// The flagged submission first, then those whose variant its answers
    /// fit (every one, never cut).
    pub submissions: Vec<String>,
    /// How likely the match is by chance: the product over the facts of
    /// the share of the class whose variant has that value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chance: Option<f64>,
    pub detail: String,
}

/// A copy needs at least this many facts of another variant...
pub const MIN_FACTS: usize = 2;
/// ...and a match this unlikely by chance.
pub const MAX_CHANCE: f64 = 1e-3;

/// Every flag in `class`, graded with `checks`.
pub fn suspicious(checks: &[Check], class: &[Graded]) -> Vec<Suspicion> {
    let ok: Vec<&Graded> = class
        .iter()
        .filter(|g| g.error.is_none() && g.facts.is_some())
        .collect();
    let n = ok.len();
    // Per seed-dependent check: each learner's own variant, and for each
    // learner the other variant their answer fits (if any).
    let mut facts: Vec<Fact> = Vec::new();
    for c in checks.iter().filter(|c| !c.live()) {
        let own: Vec<Option<String>> = ok
            .iter()
            .map(|g| variant_key(c, g.facts.as_ref().expect("filtered")))
            .collect();
        let mut by_variant: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, k) in own.iter().enumerate() {
            if let Some(k) = k {
                by_variant.entry(k).or_default().push(i);
            }
        }
        if by_variant.len() < 2 {
            continue; // the same for everyone here: says nothing
        }
        let fits: Vec<Option<String>> = (0..n)
            .map(|i| other_variant(c, ok[i], own[i].as_deref(), &ok, &by_variant))
            .collect();
        facts.push(Fact {
            id: c.id.clone(),
            own,
            fits,
        });
    }
    let share = |f: usize, key: &str| {
        let owners = facts[f]
            .own
            .iter()
            .filter(|k| k.as_deref() == Some(key))
            .count();
        owners as f64 / n as f64
    };
    let mut found = Vec::new();
    for i in 0..n {
        // For each other learner, the facts where i's answer is j's variant.
        let mut best: Vec<(Vec<usize>, Vec<usize>)> = Vec::new(); // (facts, sources)
        for j in (0..n).filter(|&j| j != i) {
            let agreed: Vec<usize> = (0..facts.len())
                .filter(|&f| facts[f].fits[i].is_some() && facts[f].fits[i] == facts[f].own[j])
                .collect();
            if agreed.len() < MIN_FACTS {
                continue;
            }
            match best.first() {
                Some((b, _)) if b.len() > agreed.len() => {}
                Some((b, _)) if b.len() == agreed.len() => {
                    match best.iter_mut().find(|(f, _)| *f == agreed) {
                        Some((_, sources)) => sources.push(j),
                        None => best.push((agreed, vec![j])),
                    }
                }
                _ => best = vec![(agreed, vec![j])],
            }
        }
        for (agreed, sources) in best {
            let chance: f64 = agreed
                .iter()
                .map(|&f| share(f, facts[f].fits[i].as_deref().expect("agreed")))
                .product();
            if chance > MAX_CHANCE {
                continue;
            }
            let ids: Vec<String> = agreed.iter().map(|&f| facts[f].id.clone()).collect();
            let names: Vec<String> = sources.iter().map(|&j| ok[j].submission.clone()).collect();
            let detail = format!(
                "{} answered {} as in the variant of {}, not its own ({} facts where the \
                 variants differ; by chance about 1 in {:.0})",
                who(ok[i]),
                ids.join(", "),
                sources
                    .iter()
                    .map(|&j| who(ok[j]))
                    .collect::<Vec<_>>()
                    .join(" or "),
                ids.len(),
                1.0 / chance.max(f64::MIN_POSITIVE),
            );
            let mut submissions = vec![ok[i].submission.clone()];
            submissions.extend(names);
            found.push(Suspicion {
                kind: "copy",
                checks: ids,
                submissions,
                chance: Some(chance),
                detail,
            });
        }
    }
    found.extend(other_seeds(&ok));
    found
}

/// One seed-dependent check across the class: each learner's own variant,
/// and the other variant their answer fits, if any.
struct Fact {
    id: String,
    own: Vec<Option<String>>,
    fits: Vec<Option<String>>,
}

/// "kdiag-0-demo-1234 (learner 1234)".
fn who(g: &Graded) -> String {
    match &g.learner {
        Some(l) if *l != g.submission => format!("{} (learner {l})", g.submission),
        _ => g.submission.clone(),
    }
}

/// The variant of check `c` that `g`'s answer fits when it is not `own`:
/// for a value, the variant its answer stands for; for an evidence file,
/// the variant whose required strings it holds.
fn other_variant(
    c: &Check,
    g: &Graded,
    own: Option<&str>,
    ok: &[&Graded],
    by_variant: &BTreeMap<&str, Vec<usize>>,
) -> Option<String> {
    let answer = g.answers.as_ref()?.get(&c.id)?;
    let facts = g.facts.as_ref()?;
    if c.is_artifact() {
        let data = g.evidence.as_ref()?.read(&answer).ok()?;
        if artifact_passes(c, &data, facts) == Ok(true) {
            return None;
        }
        return by_variant
            .iter()
            .filter(|(k, _)| Some(**k) != own)
            .find(|(_, owners)| {
                let theirs = ok[owners[0]].facts.as_ref().expect("filtered");
                artifact_passes(c, &data, theirs) == Ok(true)
            })
            .map(|(k, _)| k.to_string());
    }
    let key = answer_key(c, &answer, facts, own, by_variant.keys().copied())?;
    (Some(key.as_str()) != own && by_variant.contains_key(key.as_str())).then_some(key)
}

/// Submissions whose manifest carries another learner's seed of this class.
fn other_seeds(ok: &[&Graded]) -> Vec<Suspicion> {
    let mut found = Vec::new();
    for g in ok {
        let (Some(claimed), Some(seed)) = (&g.manifest_seed, &g.seed) else {
            continue;
        };
        if claimed == seed {
            continue;
        }
        let whose: Vec<&Graded> = ok
            .iter()
            .copied()
            .filter(|o| o.seed.as_ref() == Some(claimed))
            .collect();
        if whose.is_empty() {
            continue; // a self-study seed: a warning of its own, no copy
        }
        let mut submissions = vec![g.submission.clone()];
        submissions.extend(whose.iter().map(|o| o.submission.clone()));
        found.push(Suspicion {
            kind: "other_seed",
            checks: Vec::new(),
            submissions,
            chance: None,
            detail: format!(
                "{} was made with the seed of {}",
                who(g),
                whose
                    .iter()
                    .map(|o| who(o))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        });
    }
    found
}

/// A class graded: a row per submission (and per roster learner without
/// one), the learners who handed in more than one, and the copy flags.
#[derive(Debug, Default)]
pub struct Class {
    pub graded: Vec<Graded>,
    pub duplicates: Vec<String>,
    pub suspicious: Vec<Suspicion>,
}

const SUPERSEDED: &str = "superseded:";

/// Two or more gradable submissions of one learner: the newest by its
/// manifest's time is graded, the others are marked superseded. Returns a
/// line per learner concerned.
pub fn supersede(class: &mut [Graded]) -> Vec<String> {
    let mut by_learner: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, g) in class.iter().enumerate() {
        if let (Some(l), None) = (&g.learner, &g.error) {
            by_learner.entry(l.clone()).or_default().push(i);
        }
    }
    let mut lines = Vec::new();
    for (learner, mut all) in by_learner.into_iter().filter(|(_, v)| v.len() > 1) {
        // Newest last; the same time (or none) falls back to the name.
        all.sort_by(|&a, &b| {
            (class[a].created, &class[a].submission).cmp(&(class[b].created, &class[b].submission))
        });
        let newest = *all.last().expect("two or more");
        let kept = class[newest].submission.clone();
        let older: Vec<String> = all[..all.len() - 1]
            .iter()
            .map(|&i| class[i].submission.clone())
            .collect();
        for &i in &all[..all.len() - 1] {
            class[i].error = Some(format!(
                "{SUPERSEDED} learner {learner} also handed in {kept}, made later; that one is graded"
            ));
            class[i].results.clear();
        }
        lines.push(format!(
            "learner {learner} handed in {} submissions: graded the newest, {kept} (not {})",
            all.len(),
            older.join(", ")
        ));
    }
    lines
}

/// "Graded N submissions for lab L: G graded, U could not be graded, S
/// superseded by a newer one, M missing."
pub fn tally(lab: &str, class: &[Graded]) -> String {
    let missing = class.iter().filter(|g| g.missing).count();
    let superseded = class
        .iter()
        .filter(|g| {
            g.error
                .as_deref()
                .is_some_and(|e| e.starts_with(SUPERSEDED))
        })
        .count();
    let errors = class.iter().filter(|g| g.error.is_some()).count() - missing - superseded;
    format!(
        "{} submissions for lab {lab}: {} graded, {errors} could not be graded, {superseded} \
         superseded by a newer one, {missing} missing (learners of the roster who handed nothing in).",
        class.len() - missing,
        class.len() - missing - superseded - errors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::course::Token;
    use crate::grade::{Kind, evaluate, forms::Form};

    fn check(id: &str, fact: &str, form: Form) -> Check {
        Check {
            id: id.into(),
            step: "s".into(),
            name: id.into(),
            kind: Kind::Fact,
            expected: None,
            fact: Some(fact.into()),
            accept: vec![],
            form,
            tolerance: None,
            contains: vec![],
            points: 1.0,
            placeholder: None,
            hint: String::new(),
            fail: "no".into(),
        }
    }

    fn checks() -> Vec<Check> {
        let mut rate = check("what.rate", "expect.rate", Form::Bytes);
        rate.tolerance = Some(0.1);
        vec![
            check("why.file", "expect.file", Form::File),
            check("why.func", "expect.func", Form::Function),
            check("why.io", "expect.io", Form::Text),
            rate,
        ]
    }

    /// Learner `k` of a class: their variant, and answers given as the
    /// variant of learner `file`, `func` and `rate` say.
    fn learner(k: usize, file: usize, func: usize, rate: usize) -> Graded {
        let truth = |k: usize| {
            serde_json::json!({"file": format!("{k}.dat"), "func": format!("f_{k}"),
                               "io": "WS", "rate": (k as u64 + 10) << 20})
        };
        let name = format!("l{k}");
        let facts = Facts::from_truth(
            &Token::parse(&name).unwrap(),
            &serde_json::json!({ "expect": truth(k) }),
        );
        let answers = Answers::parse(
            "a",
            &format!(
                "[why]\nfile = '/var/tmp/{file}.dat'\nfunc = 'f_{func}'\nio = 'ws'\n\
                 [what]\nrate = '{} MiB/s'\n",
                rate as f64 + 10.2
            ),
        )
        .unwrap();
        let evidence = Evidence::Files(Default::default());
        Graded {
            results: evaluate(&checks(), &answers, &facts, &evidence, None),
            submission: name.clone(),
            learner: Some(name.clone()),
            seed: Some(name),
            answers: Some(answers),
            evidence: Some(evidence),
            facts: Some(facts),
            ..Graded::default()
        }
    }

    #[test]
    fn copies_are_flagged_with_their_source_and_honest_work_never() {
        let mut class: Vec<Graded> = (0..40).map(|k| learner(k, k, k, k)).collect();
        class[5] = learner(5, 0, 0, 0); // copied l0's answers
        class[6] = learner(6, 0, 6, 6); // one wrong file that is l0's: chance
        class[7] = learner(7, 1, 1, 7); // copied file and function of l1
        class[8] = learner(8, 99, 8, 8); // wrong, nobody's
        let found = suspicious(&checks(), &class);
        let flagged: Vec<(&str, Vec<String>)> = found
            .iter()
            .map(|s| (s.kind, s.submissions.clone()))
            .collect();
        assert_eq!(
            flagged,
            [
                ("copy", vec!["l5".to_string(), "l0".to_string()]),
                ("copy", vec!["l7".to_string(), "l1".to_string()]),
            ],
            "{found:#?}"
        );
        assert_eq!(found[0].checks, ["why.file", "why.func", "what.rate"]);
        assert!(found[0].chance.unwrap() < 1e-4, "{found:#?}");
        assert!(
            found[0]
                .detail
                .contains("as in the variant of l0, not its own")
                && found[0].detail.contains("by chance about 1 in 64000"),
            "{}",
            found[0].detail
        );
    }

    #[test]
    fn a_small_class_cannot_tell_a_copy_from_chance() {
        let class: Vec<Graded> = (0..5).map(|k| learner(k, 0, 0, 0)).collect();
        assert_eq!(
            suspicious(&checks(), &class),
            [],
            "1 in 5 per fact is no evidence"
        );
    }

    #[test]
    fn a_manifest_with_someone_else_s_seed_is_reported() {
        let mut class: Vec<Graded> = (0..3).map(|k| learner(k, k, k, k)).collect();
        class[1].manifest_seed = Some("l0".into());
        class[2].manifest_seed = Some("self-study-seed".into());
        let found = suspicious(&checks(), &class);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].kind, "other_seed");
        assert_eq!(found[0].submissions, ["l1", "l0"]);
    }
}
