//! `kdiag course gradebook`: several labs' grading (each the JSON `kdiag
//! grade … --format json` wrote) merged into one gradebook, a row per
//! learner and a column per lab, in kdiag's own CSV or the layouts Canvas
//! and Moodle import. A learner with nothing graded in a lab (missing, or
//! not gradable: that lab's grading says why) has an empty cell, which both
//! platforms leave alone. A regrade compares with the previous gradebook
//! (any of the three layouts) and lists the scores that changed.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::course::roster::{csv_field, csv_rows};
use crate::model::class_summary::round;

/// What the gradebook reads of one lab's `grade --format json`.
#[derive(Debug, Clone, Deserialize)]
pub struct GradedLab {
    pub lab: String,
    pub checks_version: String,
    pub max_score: f64,
    pub submissions: Vec<Row>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub learner: Option<String>,
    pub score: f64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// learner, a column per lab, total, checks_versions
    Csv,
    /// Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID,
    /// Section, a column per lab (a new assignment each), Points Possible
    Canvas,
    /// Moodle's CSV grade import: an ID number column to map to the user's
    /// ID number, a column per lab to map to a grade item
    Moodle,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gradebook {
    /// (lab, max score, checks version), in the order given.
    pub labs: Vec<(String, f64, String)>,
    /// Per learner, their score in each lab (None: nothing graded).
    pub scores: BTreeMap<String, Vec<Option<f64>>>,
}

/// Merge graded labs; a lab given twice is an error (which one counts?).
pub fn merge(graded: &[GradedLab]) -> Result<Gradebook, String> {
    let mut labs: Vec<(String, f64, String)> = Vec::new();
    let mut scores: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for (i, g) in graded.iter().enumerate() {
        if labs.iter().any(|(l, ..)| l == &g.lab) {
            return Err(format!(
                "lab {} is given twice: give each lab's grading once",
                g.lab
            ));
        }
        labs.push((g.lab.clone(), g.max_score, g.checks_version.clone()));
        for r in &g.submissions {
            let Some(learner) = &r.learner else {
                continue;
            };
            let row = scores
                .entry(learner.clone())
                .or_insert_with(|| vec![None; graded.len()]);
            // A superseded or ungradable submission beside a graded one
            // never hides the graded score.
            if r.error.is_none() {
                row[i] = Some(r.score);
            }
        }
    }
    Ok(Gradebook { labs, scores })
}

fn cell(score: Option<f64>) -> String {
    score.map(round).unwrap_or_default()
}

impl Gradebook {
    pub fn render(&self, layout: Layout) -> String {
        let labs: Vec<String> = self.labs.iter().map(|(l, ..)| csv_field(l)).collect();
        let mut out = match layout {
            Layout::Csv => format!("learner,{},total,checks_versions\n", labs.join(",")),
            Layout::Canvas => format!(
                "Student,ID,SIS User ID,SIS Login ID,Section,{}\n\
                 Points Possible,,,,,{}\n",
                labs.join(","),
                self.labs
                    .iter()
                    .map(|(_, max, _)| round(*max))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Layout::Moodle => format!("ID number,{}\n", labs.join(",")),
        };
        let versions: Vec<String> = self
            .labs
            .iter()
            .map(|(l, _, v)| format!("{l}:{v}"))
            .collect();
        for (learner, row) in &self.scores {
            let id = csv_field(learner);
            let cells: Vec<String> = row.iter().map(|s| cell(*s)).collect();
            let line = match layout {
                Layout::Csv => format!(
                    "{id},{},{},{}",
                    cells.join(","),
                    round(row.iter().flatten().sum()),
                    versions.join(" ")
                ),
                // Canvas matches a row by any of its id columns: the
                // learner id is the SIS user id; the rest is Canvas's own.
                Layout::Canvas => format!("{id},,{id},,,{}", cells.join(",")),
                Layout::Moodle => format!("{id},{}", cells.join(",")),
            };
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// The scores that differ from `previous` (a gradebook kdiag wrote
    /// before, in any layout), one line each; labs the previous one did
    /// not have are new, not changed.
    pub fn changes(&self, name: &str, previous: &str) -> Result<Vec<String>, String> {
        let rows = csv_rows(previous);
        let Some(header) = rows.first() else {
            return Err(format!(
                "{name} is empty: give the gradebook kdiag wrote before"
            ));
        };
        let id_col = ["learner", "SIS User ID", "ID number"]
            .iter()
            .find_map(|n| header.iter().position(|h| h.trim() == *n))
            .ok_or_else(|| {
                format!(
                    "{name}:1: not a kdiag gradebook: no learner, SIS User ID or ID number column"
                )
            })?;
        let cols: Vec<(usize, usize)> = self
            .labs
            .iter()
            .enumerate()
            .filter_map(|(i, (lab, ..))| Some((i, header.iter().position(|h| h.trim() == lab)?)))
            .collect();
        let mut before: BTreeMap<&str, &Vec<String>> = BTreeMap::new();
        for row in &rows[1..] {
            if let Some(id) = row.get(id_col).filter(|id| !id.trim().is_empty()) {
                before.insert(id.trim(), row);
            }
        }
        let show = |s: Option<f64>| s.map(round).unwrap_or_else(|| "none".into());
        let mut out = Vec::new();
        for (learner, now) in &self.scores {
            for &(i, col) in &cols {
                let was = before.get(learner.as_str()).and_then(|r| {
                    let v = r.get(col)?.trim();
                    if v.is_empty() {
                        None
                    } else {
                        v.parse::<f64>().ok()
                    }
                });
                if was != now[i] {
                    out.push(format!(
                        "learner {learner}, lab {}: {} -> {}",
                        self.labs[i].0,
                        show(was),
                        show(now[i])
                    ));
                }
            }
        }
        for gone in before.keys().filter(|l| !self.scores.contains_key(**l)) {
            out.push(format!("learner {gone}: in {name}, not in this gradebook"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(id: &str, rows: &[(&str, f64, bool)]) -> GradedLab {
        GradedLab {
            lab: id.into(),
            checks_version: format!("v-{id}"),
            max_score: 10.0,
            submissions: rows
                .iter()
                .map(|&(l, score, ok)| Row {
                    learner: Some(l.into()),
                    score,
                    error: (!ok).then(|| "no submission".into()),
                })
                .collect(),
        }
    }

    fn book() -> Gradebook {
        merge(&[
            lab("0-demo", &[("ada", 10.0, true), ("bob", 0.0, false)]),
            lab(
                "1-io",
                &[("bob", 7.5, true), ("ada", 0.0, false), ("ada", 4.0, true)],
            ),
        ])
        .unwrap()
    }

    #[test]
    fn one_row_per_learner_and_a_column_per_lab_in_every_layout() {
        let b = book();
        assert_eq!(
            b.render(Layout::Csv),
            "learner,0-demo,1-io,total,checks_versions\n\
             ada,10,4,14,0-demo:v-0-demo 1-io:v-1-io\n\
             bob,,7.5,7.5,0-demo:v-0-demo 1-io:v-1-io\n"
        );
        assert_eq!(
            b.render(Layout::Canvas),
            "Student,ID,SIS User ID,SIS Login ID,Section,0-demo,1-io\n\
             Points Possible,,,,,10,10\n\
             ada,,ada,,,10,4\n\
             bob,,bob,,,,7.5\n"
        );
        assert_eq!(
            b.render(Layout::Moodle),
            "ID number,0-demo,1-io\nada,10,4\nbob,,7.5\n"
        );
        assert!(merge(&[lab("0-demo", &[]), lab("0-demo", &[])]).is_err());
    }

    #[test]
    fn a_regrade_lists_exactly_the_scores_that_changed_from_any_layout() {
        let b = book();
        for layout in [Layout::Csv, Layout::Canvas, Layout::Moodle] {
            assert_eq!(
                b.changes("old", &b.render(layout)).unwrap(),
                Vec::<String>::new()
            );
        }
        let regraded = merge(&[
            lab("0-demo", &[("ada", 8.0, true), ("bob", 5.0, true)]),
            lab("1-io", &[("bob", 7.5, true), ("ada", 4.0, true)]),
        ])
        .unwrap();
        for layout in [Layout::Csv, Layout::Canvas, Layout::Moodle] {
            assert_eq!(
                regraded.changes("old", &b.render(layout)).unwrap(),
                [
                    "learner ada, lab 0-demo: 10 -> 8",
                    "learner bob, lab 0-demo: none -> 5"
                ]
            );
        }
        assert!(b.changes("old", "name,x\n").is_err());
    }
}
