//! Copy flags on a generated class of 200 (lab 0-demo, real course seeds):
//! 10 learners hand in another learner's answers and are flagged, naming
//! whom they copied; 190 honest learners, 20 of them with a mistake that
//! happens to be another learner's answer, are never flagged.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{kdiag, stderr};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Learner `id`'s reference answers, without the evidence file.
fn reference(course: &Path, id: &str) -> Vec<(String, String)> {
    common::lab_solution(course, id)
        .lines()
        .filter(|l| !l.starts_with("profile ="))
        .map(|l| match l.split_once(" = ") {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

fn toml(lines: &[(String, String)]) -> String {
    lines
        .iter()
        .map(|(k, v)| match v.is_empty() {
            true => format!("{k}\n"),
            false => format!("{k} = {v}\n"),
        })
        .collect()
}

#[test]
fn a_class_of_200_flags_its_10_copiers_and_no_honest_learner() {
    let d = tempfile::tempdir().unwrap();
    let course = d.path().join("course.toml");
    let out = kdiag()
        .args(["course", "init", "--labs", "0-demo", "--out", s(&course)])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let ids: Vec<String> = (0..200).map(|n| format!("s{n:03}")).collect();
    let refs: BTreeMap<&str, Vec<(String, String)>> = ids
        .iter()
        .map(|id| (id.as_str(), reference(&course, id)))
        .collect();
    let subs = d.path().join("subs");
    let copiers: BTreeSet<&str> = ids[190..].iter().map(String::as_str).collect();
    for (n, id) in ids.iter().enumerate() {
        let mut answers = refs[id.as_str()].clone();
        if copiers.contains(id.as_str()) {
            // Another learner's answers, as handed to them.
            answers = refs[ids[n - 100].as_str()].clone();
        } else if n % 10 == 3 {
            // An honest mistake: the function of another learner's variant.
            let other = &refs[ids[(n + 1) % 190].as_str()];
            let theirs = other.iter().find(|(k, _)| k == "function").unwrap();
            let mine = answers.iter_mut().find(|(k, _)| k == "function").unwrap();
            *mine = theirs.clone();
        }
        std::fs::create_dir_all(subs.join(id)).unwrap();
        std::fs::write(subs.join(id).join("answers.toml"), toml(&answers)).unwrap();
    }
    let out = kdiag()
        .args([
            "grade",
            "0-demo",
            s(&subs),
            "--course",
            s(&course),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let flags = g["suspicious"].as_array().unwrap();
    let flagged: BTreeSet<&str> = flags
        .iter()
        .map(|f| f["submissions"][0].as_str().unwrap())
        .collect();
    assert_eq!(flagged, copiers, "{flags:#?}");
    for f in flags {
        let copier = f["submissions"][0].as_str().unwrap();
        let n: usize = copier[1..].parse().unwrap();
        let source = ids[n - 100].as_str();
        assert_eq!(f["kind"], "copy", "{f:#}");
        assert!(
            f["submissions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == source),
            "names whom {copier} copied: {f:#}"
        );
        assert!(f["checks"].as_array().unwrap().len() >= 2, "{f:#}");
        assert!(f["chance"].as_f64().unwrap() <= 1e-3, "{f:#}");
        let detail = f["detail"].as_str().unwrap();
        assert!(detail.contains("by chance about 1 in"), "{detail}");
    }
    // Each copier's row carries its flag; the learner copied from none.
    let rows = g["submissions"].as_array().unwrap();
    for r in rows {
        let name = r["submission"].as_str().unwrap();
        let has = !r["flags"].as_array().unwrap().is_empty();
        assert_eq!(has, copiers.contains(name), "{r:#}");
    }
}
