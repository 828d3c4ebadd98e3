//! A class's worth of submissions: each graded against the truth of the
//! learner's own seed, then compared with each other to find what a
//! per-learner variant makes visible: the same seed-dependent answer from
//! learners whose variants differ, an answer (or evidence file) that fits
//! another learner's variant rather than the learner's own, identical
//! evidence files, and a manifest made with someone else's seed.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use std::hash::{Hash, Hasher};

use super::{
    Check, CheckResult, Evidence, Facts, Status, answer_key, artifact_passes, variant_key,
};
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
    pub answers: Option<Answers>,
    pub evidence: Option<Evidence>,
    pub facts: Option<Facts>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suspicion {
    /// same_answer, other_variant, same_artifact, other_seed.
    pub kind: &'static str,
    /// The checks concerned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
    pub submissions: Vec<String>,
    pub detail: String,
}

/// Seed-dependent answers two learners with different variants must share
/// to be reported as the same answers.
pub const SAME_ANSWERS: usize = 2;
/// An answer is rare when at most this many learners of the class have it
/// as their own variant.
pub const RARE_OWNERS: usize = 3;

/// Everything suspicious in `class`, graded with `checks`.
pub fn suspicious(checks: &[Check], class: &[Graded]) -> Vec<Suspicion> {
    let ok: Vec<&Graded> = class
        .iter()
        .filter(|g| g.error.is_none() && g.facts.is_some())
        .collect();
    let mut found = Vec::new();
    let mut pairs: BTreeMap<(usize, usize), Vec<(String, usize)>> = BTreeMap::new();
    for c in checks.iter().filter(|c| !c.live()) {
        // Each learner's own variant of the check, and who has which.
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
            continue; // not seed-dependent in this class
        }
        if c.is_artifact() {
            artifacts(c, &ok, &own, &by_variant, &mut found);
        } else {
            values(c, &ok, &own, &by_variant, &mut found, &mut pairs);
        }
    }
    // One agreement can be chance, and so can two on answers many variants
    // share (a size, one of a few function names); two or more, one of them
    // rare in the class (a file name), is a copy.
    for ((i, j), agreed) in pairs {
        let rare = agreed.iter().any(|(_, owners)| *owners <= RARE_OWNERS);
        if agreed.len() >= SAME_ANSWERS && rare {
            found.push(Suspicion {
                kind: "same_answer",
                checks: agreed.into_iter().map(|(id, _)| id).collect(),
                submissions: vec![ok[i].submission.clone(), ok[j].submission.clone()],
                detail: String::new(),
            });
        }
    }
    for g in &ok {
        if let (Some(claimed), Some(seed)) = (&g.manifest_seed, &g.seed)
            && claimed != seed
        {
            let whose: Vec<String> = ok
                .iter()
                .filter(|o| o.seed.as_ref() == Some(claimed))
                .map(|o| o.submission.clone())
                .collect();
            let detail = if whose.is_empty() {
                format!("its manifest was made with seed {claimed}, not the learner's")
            } else {
                format!(
                    "its manifest was made with the seed of {}",
                    whose.join(", ")
                )
            };
            let mut subs = vec![g.submission.clone()];
            subs.extend(whose);
            found.push(Suspicion {
                kind: "other_seed",
                checks: Vec::new(),
                submissions: subs,
                detail,
            });
        }
    }
    group(found)
}

/// One finding per kind and set of submissions, naming all its checks.
fn group(found: Vec<Suspicion>) -> Vec<Suspicion> {
    let mut out: Vec<Suspicion> = Vec::new();
    for f in found {
        let same = |o: &Suspicion| match f.kind {
            "other_variant" => o.kind == f.kind && o.submissions[0] == f.submissions[0],
            "other_seed" => false,
            _ => o.kind == f.kind && o.submissions == f.submissions,
        };
        match out.iter_mut().find(|o| same(o)) {
            Some(o) => {
                o.checks.extend(f.checks);
                for s in f.submissions {
                    if !o.submissions.contains(&s) {
                        o.submissions.push(s);
                    }
                }
            }
            None => out.push(f),
        }
    }
    for o in &mut out {
        let checks = o.checks.join(", ");
        o.detail = match o.kind {
            "other_variant" => format!(
                "{checks} fit{} the variant of {}, not the learner's own",
                if o.checks.len() == 1 { "s" } else { "" },
                o.submissions[1..].join(", ")
            ),
            "same_answer" => {
                format!("the same answers for {checks} although their variants differ")
            }
            "same_artifact" => format!("identical files for {checks}"),
            _ => std::mem::take(&mut o.detail),
        };
    }
    out
}

fn values(
    c: &Check,
    ok: &[&Graded],
    own: &[Option<String>],
    by_variant: &BTreeMap<&str, Vec<usize>>,
    found: &mut Vec<Suspicion>,
    pairs: &mut BTreeMap<(usize, usize), Vec<(String, usize)>>,
) {
    let mut by_answer: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, g) in ok.iter().enumerate() {
        let answer = g.answers.as_ref().and_then(|a| a.get(&c.id));
        let facts = g.facts.as_ref().expect("filtered");
        let variants = by_variant.keys().copied();
        let Some(key) = answer.and_then(|a| answer_key(c, &a, facts, own[i].as_deref(), variants))
        else {
            continue;
        };
        // Only answers that are some learner's variant tell anything: a
        // common wrong guess is not a copy.
        let Some(owners) = by_variant.get(key.as_str()) else {
            continue;
        };
        if own[i].as_deref() != Some(key.as_str()) {
            let others: Vec<String> = owners
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| ok[j].submission.clone())
                .collect();
            if !others.is_empty() {
                found.push(other_variant(c, &g.submission, others));
            }
        }
        by_answer.entry(key).or_default().push(i);
    }
    // Learners whose variants differ but whose answers agree, with how
    // many learners have that answer as their own variant.
    for (key, group) in by_answer.iter().filter(|(_, g)| g.len() > 1) {
        let owners = by_variant.get(key.as_str()).map_or(0, |o| o.len());
        for (n, &i) in group.iter().enumerate() {
            for &j in &group[n + 1..] {
                if own[i] != own[j] {
                    pairs
                        .entry((i, j))
                        .or_default()
                        .push((c.id.clone(), owners));
                }
            }
        }
    }
}

/// `submission`'s answer to `c` fits the variant of `others` (the first
/// three are named).
fn other_variant(c: &Check, submission: &str, others: Vec<String>) -> Suspicion {
    let mut subs = vec![submission.to_string()];
    subs.extend(others.iter().take(3).cloned());
    if others.len() > 3 {
        subs.push(format!("{} more", others.len() - 3));
    }
    Suspicion {
        kind: "other_variant",
        checks: vec![c.id.clone()],
        submissions: subs,
        detail: String::new(),
    }
}

fn artifacts(
    c: &Check,
    ok: &[&Graded],
    own: &[Option<String>],
    by_variant: &BTreeMap<&str, Vec<usize>>,
    found: &mut Vec<Suspicion>,
) {
    // Identical files: a 64-bit SipHash of the content plus its length
    // (a learner gains nothing by forging a collision but suspicion).
    let mut by_hash: HashMap<(u64, usize), Vec<usize>> = HashMap::new();
    for (i, g) in ok.iter().enumerate() {
        let (Some(answer), Some(evidence)) =
            (g.answers.as_ref().and_then(|a| a.get(&c.id)), &g.evidence)
        else {
            continue;
        };
        let Ok(data) = evidence.read(&answer) else {
            continue;
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        data.hash(&mut h);
        by_hash.entry((h.finish(), data.len())).or_default().push(i);
        let passed = g
            .results
            .iter()
            .any(|r| r.id == c.id && r.status == Status::Passed);
        if passed {
            continue;
        }
        // Does it hold another variant's evidence instead?
        for (key, owners) in by_variant {
            if own[i].as_deref() == Some(*key) {
                continue;
            }
            let facts = ok[owners[0]].facts.as_ref().expect("filtered");
            if artifact_passes(c, &data, facts) == Ok(true) {
                let others = owners
                    .iter()
                    .filter(|&&j| j != i)
                    .map(|&j| ok[j].submission.clone())
                    .collect();
                found.push(other_variant(c, &g.submission, others));
                break;
            }
        }
    }
    let mut groups: Vec<&Vec<usize>> = by_hash.values().filter(|g| g.len() > 1).collect();
    groups.sort();
    for group in groups {
        found.push(Suspicion {
            kind: "same_artifact",
            checks: vec![c.id.clone()],
            submissions: group.iter().map(|&i| ok[i].submission.clone()).collect(),
            detail: String::new(),
        });
    }
}

/// The learner id in a Gradescope `submission_metadata.json`: the first
/// submitter's email or sid, whichever `known` accepts (a roster lookup),
/// else the email.
pub fn gradescope_learner(metadata: &str, known: impl Fn(&str) -> bool) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(metadata).ok()?;
    let user = v.get("users")?.as_array()?.first()?;
    let field = |k: &str| {
        user.get(k)
            .and_then(|x| match x {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.trim().is_empty())
    };
    let candidates: Vec<String> = ["email", "sid", "id"]
        .iter()
        .filter_map(|k| field(k))
        .collect();
    candidates
        .iter()
        .find(|c| known(c))
        .or_else(|| candidates.first())
        .cloned()
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

    fn learner(name: &str, file: &str, answer: &str) -> Graded {
        let facts = Facts::from_truth(
            &Token::parse(name).unwrap(),
            &serde_json::json!({"expect": {"file": file, "func": format!("f_{file}"), "io": "WS"}}),
        );
        let answers = Answers::parse(
            "a",
            &format!(
                "[why]\nfile = {answer:?}\nfunc = 'f_{}'\nio = 'WS'\n",
                answer.rsplit('/').next().unwrap()
            ),
        )
        .unwrap();
        let evidence = Evidence::Files(Default::default());
        let results = evaluate(&checks(), &answers, &facts, &evidence, None);
        Graded {
            submission: name.into(),
            learner: Some(name.into()),
            seed: Some(name.into()),
            results,
            error: None,
            manifest_seed: None,
            created: 0,
            warnings: Vec::new(),
            missing: false,
            answers: Some(answers),
            evidence: Some(evidence),
            facts: Some(facts),
        }
    }

    fn checks() -> Vec<Check> {
        vec![
            check("why.file", "expect.file", Form::File),
            check("why.func", "expect.func", Form::Function),
            check("why.io", "expect.io", Form::Text),
        ]
    }

    #[test]
    fn copies_between_variants_are_found_and_honest_work_is_not() {
        let class = vec![
            learner("ada", "a.dat", "/var/tmp/x/a.dat"),
            learner("bob", "b.dat", "a.dat"),   // copied Ada's
            learner("cy", "c.dat", "c.dat"),    // honest
            learner("dee", "c.dat", "c.dat"),   // same variant as cy: fine
            learner("eve", "e.dat", "zzz.dat"), // wrong, but nobody's
        ];
        let found = suspicious(&checks(), &class);
        let kinds: Vec<(&str, Vec<String>)> = found
            .iter()
            .map(|s| (s.kind, s.submissions.clone()))
            .collect();
        assert!(
            kinds.contains(&("other_variant", vec!["bob".into(), "ada".into()])),
            "{found:#?}"
        );
        assert!(
            kinds.contains(&("same_answer", vec!["ada".into(), "bob".into()])),
            "{found:#?}"
        );
        assert_eq!(
            found.len(),
            2,
            "why.io is the same for all, cy/dee share a variant: {found:#?}"
        );
    }

    #[test]
    fn measured_answers_are_matched_within_the_tolerance() {
        let mut rate = check("what.rate", "expect.rate", Form::Bytes);
        rate.tolerance = Some(0.1);
        let learner = |name: &str, rate: u64, answer: &str| {
            let facts = Facts::from_truth(
                &Token::parse(name).unwrap(),
                &serde_json::json!({"expect": {"rate": rate}}),
            );
            let answers = Answers::parse("a", &format!("[what]\nrate = {answer:?}\n")).unwrap();
            let evidence = Evidence::Files(Default::default());
            Graded {
                submission: name.into(),
                learner: Some(name.into()),
                seed: Some(name.into()),
                results: Vec::new(),
                error: None,
                answers: Some(answers),
                evidence: Some(evidence),
                facts: Some(facts),
                ..Graded::default()
            }
        };
        let class = vec![
            learner("ada", 2 << 20, "2.1 MiB/s"),  // measured, near her own
            learner("bob", 6 << 20, "2.05 MiB/s"), // near Ada's, not his
            learner("cy", 4 << 20, "3.9 MiB/s"),   // measured
            learner("dee", 8 << 20, "1 MiB/s"),    // wrong, nobody's
        ];
        let found = suspicious(&[rate], &class);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].kind, "other_variant");
        assert_eq!(found[0].submissions, ["bob", "ada"]);
    }

    #[test]
    fn a_manifest_with_someone_else_s_seed_is_reported() {
        let mut class = vec![
            learner("ada", "a.dat", "a.dat"),
            learner("bob", "b.dat", "b.dat"),
        ];
        class[1].manifest_seed = Some("ada".into());
        let found = suspicious(&checks(), &class);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].kind, "other_seed");
        assert_eq!(found[0].submissions, ["bob", "ada"]);
    }

    #[test]
    fn gradescope_metadata_names_the_learner() {
        let m = r#"{"users": [{"email": "Ada@x.org", "sid": "123", "name": "Ada"}], "id": 9}"#;
        assert_eq!(
            gradescope_learner(m, |_| false).as_deref(),
            Some("Ada@x.org")
        );
        assert_eq!(
            gradescope_learner(m, |c| c == "123").as_deref(),
            Some("123")
        );
        assert_eq!(gradescope_learner("{}", |_| true), None);
    }
}
