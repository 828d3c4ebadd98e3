//! The class at a glance (`kdiag grade … --summary`): the score
//! distribution, each check's pass rate with the most-missed first and
//! its attempts, the copy flags and why submissions could not be graded. `of` computes it
//! from a graded class (pure); `text` renders it.

use std::fmt::Write as _;

use super::class::{Graded, Suspicion};
use super::{Status, totals};
pub use crate::model::class_summary::{BINS, CheckRate, Summary, round};

/// The summary of `class` (lab `lab`, graded by checks of `checks_version`
/// worth `max_score`), with its copy flags `suspicious`.
pub fn of(
    lab: &str,
    checks_version: &str,
    max_score: f64,
    class: &[Graded],
    suspicious: &[Suspicion],
) -> Summary {
    let graded: Vec<&Graded> = class.iter().filter(|g| g.error.is_none()).collect();
    let mut scores: Vec<f64> = graded.iter().map(|g| totals(&g.results).0).collect();
    scores.sort_by(f64::total_cmp);
    let mut distribution = [0; BINS];
    for s in &scores {
        distribution[bin(*s, max_score)] += 1;
    }
    let mut checks: Vec<CheckRate> = Vec::new();
    for r in graded.iter().flat_map(|g| &g.results).filter(|r| r.graded) {
        let i = match checks.iter().position(|c| c.id == r.id) {
            Some(i) => i,
            None => {
                checks.push(CheckRate {
                    id: r.id.clone(),
                    name: r.name.clone(),
                    passed: 0,
                    missed: 0,
                    attempts: 0,
                    counted: 0,
                    most_attempts: 0,
                });
                checks.len() - 1
            }
        };
        match r.status {
            Status::Passed => checks[i].passed += 1,
            _ => checks[i].missed += 1,
        }
        if let Some(n) = r.attempts {
            let c = &mut checks[i];
            c.attempts += n;
            c.counted += 1;
            c.most_attempts = c.most_attempts.max(n);
        }
    }
    // Most missed first; the stable sort keeps the lab's order on ties.
    checks.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    let (missing, not_gradable): (Vec<&Graded>, Vec<&Graded>) = class
        .iter()
        .filter(|g| g.error.is_some())
        .partition(|g| g.missing);
    Summary {
        lab: lab.to_string(),
        checks_version: checks_version.to_string(),
        max_score,
        graded: scores.len(),
        distribution,
        mean: (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64),
        median: median(&scores),
        checks,
        flags: suspicious.iter().map(|s| s.detail.clone()).collect(),
        not_gradable: not_gradable
            .iter()
            .map(|g| (g.submission.clone(), g.error.clone().unwrap_or_default()))
            .collect(),
        missing: missing
            .iter()
            .map(|g| g.learner.clone().unwrap_or_else(|| g.submission.clone()))
            .collect(),
    }
}

/// The bin of `score` out of `max`: full marks fall in the last.
fn bin(score: f64, max: f64) -> usize {
    if max <= 0.0 {
        return 0;
    }
    ((score / max * BINS as f64).floor().max(0.0) as usize).min(BINS - 1)
}

fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// "attempts: mean 1.5, most 4" ("" when no submission records them).
pub fn attempts(c: &CheckRate) -> String {
    match c.mean_attempts() {
        Some(mean) => format!("attempts: mean {}, most {}", round(mean), c.most_attempts),
        None => String::new(),
    }
}

/// The summary for a terminal.
pub fn text(s: &Summary) -> String {
    let mut out = format!(
        "Lab {}, checks version {}: {} graded, {} could not be graded, {} missing.\n",
        s.lab,
        s.checks_version,
        s.graded,
        s.not_gradable.len(),
        s.missing.len()
    );
    let _ = writeln!(out, "\nScores (of {} points):", round(s.max_score));
    let widest = s.distribution.iter().copied().max().unwrap_or(0).max(1);
    for (i, &n) in s.distribution.iter().enumerate() {
        let bar = "#".repeat((n * 40).div_ceil(widest));
        let line = format!("  {:>11}  {n:>4}  {bar}", s.bin_label(i));
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if let (Some(mean), Some(median)) = (s.mean, s.median) {
        let _ = writeln!(out, "  mean {}, median {}", round(mean), round(median));
    }
    let _ = writeln!(out, "\nChecks, the most missed first:");
    // Columns as wide as the longest id and name, so long names stay aligned.
    let width = |f: fn(&CheckRate) -> &str| s.checks.iter().map(|c| f(c).chars().count()).max();
    let (id_w, name_w) = (width(|c| &c.id), width(|c| &c.name));
    for c in &s.checks {
        let line = format!(
            "  {:>3.0}% passed  missed by {:>4}  {:<id_w$}  {:<name_w$}  {}",
            c.rate() * 100.0,
            c.missed,
            c.id,
            c.name,
            attempts(c),
            id_w = id_w.unwrap_or(0),
            name_w = name_w.unwrap_or(0),
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out, "\nFlags ({}):", s.flags.len());
    for f in &s.flags {
        let _ = writeln!(out, "  {f}");
    }
    let _ = writeln!(out, "\nNot gradable ({}):", s.not_gradable.len());
    for (sub, why) in &s.not_gradable {
        let _ = writeln!(out, "  {sub}: {why}");
    }
    if !s.missing.is_empty() {
        let _ = writeln!(
            out,
            "\nMissing ({}): {}",
            s.missing.len(),
            s.missing.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::CheckResult;

    fn graded(name: &str, passes: &[bool]) -> Graded {
        let results = passes
            .iter()
            .enumerate()
            .map(|(i, &p)| CheckResult {
                id: format!("c.{i}"),
                step: "s".into(),
                name: format!("check {i}"),
                status: if p { Status::Passed } else { Status::Failed },
                graded: true,
                score: if p { 2.0 } else { 0.0 },
                max_score: 2.0,
                message: String::new(),
                attempts: Some(i as u32),
            })
            .collect();
        Graded {
            submission: name.into(),
            learner: Some(name.into()),
            results,
            ..Graded::default()
        }
    }

    #[test]
    fn scores_bins_and_the_most_missed_check_first() {
        let mut class = vec![
            graded("a", &[true, true, true]),
            graded("b", &[true, false, true]),
            graded("c", &[true, false, false]),
            graded("d", &[false, false, false]),
        ];
        class.push(Graded {
            submission: "e".into(),
            error: Some("answers.toml is a FIFO".into()),
            ..Graded::default()
        });
        class.push(Graded {
            submission: "f".into(),
            learner: Some("f".into()),
            error: Some("no submission".into()),
            missing: true,
            ..Graded::default()
        });
        let s = of("l", "abc", 6.0, &class, &[]);
        assert_eq!(s.graded, 4);
        // 6/6 in the last bin; 4/6 in the seventh; 2/6 in the fourth; 0 first.
        assert_eq!(s.distribution, [1, 0, 0, 1, 0, 0, 1, 0, 0, 1]);
        assert_eq!((s.mean, s.median), (Some(3.0), Some(3.0)));
        let order: Vec<(&str, usize)> =
            s.checks.iter().map(|c| (c.id.as_str(), c.missed)).collect();
        assert_eq!(order, [("c.1", 3), ("c.2", 2), ("c.0", 1)]);
        assert_eq!(
            s.not_gradable,
            [("e".to_string(), "answers.toml is a FIFO".to_string())]
        );
        assert_eq!(s.missing, ["f"]);
        assert_eq!(s.bin_label(9), "5.4-6");
        let t = text(&s);
        assert!(t.contains(" 25% passed  missed by    3  c.1"), "{t}");
        // Every submission checked c.1 once before submitting (c.N: N).
        assert!(
            t.contains("check 1") && t.contains("attempts: mean 1, most 1\n"),
            "{t}"
        );
        assert!(t.contains("attempts: mean 2, most 2\n"), "{t}");
        assert!(t.contains("e: answers.toml is a FIFO"), "{t}");
    }

    #[test]
    fn check_columns_stay_aligned_whatever_the_names_length() {
        let mut a = graded("a", &[true, false]);
        a.results[1].name = "the function the profile shows hottest, by name".into();
        a.results[1].id = "why.function_of_the_hot_path".into();
        let t = text(&of("l", "abc", 4.0, &[a], &[]));
        let at: Vec<usize> = t
            .lines()
            .filter(|l| l.contains("% passed"))
            .map(|l| l.find("attempts").unwrap())
            .collect();
        assert_eq!(at.len(), 2, "{t}");
        assert_eq!(at[0], at[1], "{t}");
    }
}
