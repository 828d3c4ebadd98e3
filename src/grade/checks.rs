//! A lab's checks (checks/<lab>.toml): which answers key each one reads,
//! what it compares the answer with, and how many points it is worth.
//! Loading validates the file, so a mistake in a lab is found by its
//! author, not by a learner.

use std::collections::HashSet;

use serde::Deserialize;

use super::facts::placeholders;
use super::forms::Form;

/// The check file format this binary reads. 2: facts are the seed's
/// (`expect.*`, `workload.*`, `seed`) or the live run's (`live.*`, never
/// graded); `form` says how answers compare.
pub const FORMAT_VERSION: u32 = 2;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckFile {
    pub format_version: u32,
    pub lab: String,
    pub checks: Vec<Check>,
    /// A short hash of the lab's files and this file (`lab::load` sets
    /// it): every grade records the checks that made it.
    #[serde(skip)]
    pub version: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// Also the answers key it reads.
    pub id: String,
    pub step: String,
    pub name: String,
    pub kind: Kind,
    /// `equals`: the expected value.
    #[serde(default)]
    pub expected: Option<toml::Value>,
    /// `fact`: the fact to compare with.
    #[serde(default)]
    pub fact: Option<String>,
    /// Other accepted answers (synonyms).
    #[serde(default)]
    pub accept: Vec<String>,
    /// How answers compare (text, bytes, file, syscall, function, errno,
    /// signal, number, seconds).
    #[serde(default)]
    pub form: Form,
    /// Numeric forms only: how far a measured answer may be from the fact,
    /// relative to it (0.2: within ±20%).
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// `artifact_contains`: strings the file must contain, with {fact}s.
    #[serde(default)]
    pub contains: Vec<String>,
    /// Points toward the grade; 0 for live checks, which are not graded.
    #[serde(default)]
    pub points: f64,
    /// What to type in place of the value in `kdiag answer` (e.g. `<PID>`).
    #[serde(default)]
    pub placeholder: Option<String>,
    pub hint: String,
    /// What is wrong, without the answer.
    pub fail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Equals,
    Fact,
    ArtifactContains,
}

impl Check {
    /// The facts this check reads.
    pub fn facts(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.fact.iter().map(String::as_str).collect();
        for c in &self.contains {
            names.extend(placeholders(c));
        }
        names
    }

    /// A live check compares with a fact of the running workload: the lab
    /// checks it, the grader cannot.
    pub fn live(&self) -> bool {
        self.facts().iter().any(|f| f.starts_with("live."))
    }

    /// Whether the answer names a file (evidence) rather than a value.
    pub fn is_artifact(&self) -> bool {
        self.kind == Kind::ArtifactContains
    }

    pub fn placeholder(&self) -> &str {
        self.placeholder
            .as_deref()
            .unwrap_or(if self.is_artifact() {
                "<FILE>"
            } else {
                "<VALUE>"
            })
    }
}

/// Parse and validate the checks file `path` (its `text`) of lab `lab`,
/// whose steps are `steps`.
pub fn parse(path: &str, text: &str, lab: &str, steps: &[String]) -> anyhow::Result<CheckFile> {
    let file: CheckFile = crate::error::parse_toml(path, text)?;
    validate(path, &file, lab, steps)?;
    Ok(file)
}

fn validate(path: &str, file: &CheckFile, lab: &str, steps: &[String]) -> anyhow::Result<()> {
    if file.format_version != FORMAT_VERSION {
        anyhow::bail!(
            "{path} has format_version {}; this kdiag reads {FORMAT_VERSION} \
             (facts: seed, workload.*, expect.*, live.*; see docs/instructor.md)",
            file.format_version
        );
    }
    if file.lab != lab {
        anyhow::bail!("{path} is for lab {:?}, not {lab:?}", file.lab);
    }
    let mut ids = HashSet::new();
    for c in &file.checks {
        let bad = |why: String| anyhow::anyhow!("{path}: check {}: {why}", c.id);
        if !ids.insert(c.id.as_str()) {
            return Err(bad("the id is used twice".into()));
        }
        if c.id.split('.').any(str::is_empty) {
            return Err(bad(
                "the id must be a dotted answers key like who.pid".into()
            ));
        }
        if !steps.is_empty() && !steps.contains(&c.step) {
            return Err(bad(format!("step {:?} is not a step of the lab", c.step)));
        }
        match c.kind {
            Kind::Equals if c.expected.is_none() => {
                return Err(bad("kind equals needs `expected`".into()));
            }
            Kind::Fact if c.fact.is_none() => return Err(bad("kind fact needs `fact`".into())),
            Kind::ArtifactContains if c.contains.is_empty() => {
                return Err(bad("kind artifact_contains needs `contains`".into()));
            }
            _ => {}
        }
        if let Some(t) = c.tolerance {
            if !c.form.numeric() || c.is_artifact() {
                return Err(bad(
                    "a tolerance needs a numeric form (bytes, number, seconds)".into(),
                ));
            }
            if !(t > 0.0 && t < 1.0) {
                return Err(bad(format!(
                    "tolerance {t} is not a fraction between 0 and 1 (0.2 is ±20%)"
                )));
            }
        }
        for f in c.facts() {
            let known = f == "seed"
                || ["workload.", "expect.", "live."]
                    .iter()
                    .any(|p| f.starts_with(p));
            if !known {
                return Err(bad(format!(
                    "unknown fact {f:?}: facts are seed, workload.*, expect.* or live.*"
                )));
            }
        }
        if c.live() && c.points != 0.0 {
            return Err(bad(
                "it reads a live.* fact, which a grader cannot know: live checks count \
                 toward the lab's progress only, so give it no points"
                    .into(),
            ));
        }
        let graded_points = c.points > 0.0 && c.points.is_finite();
        if !c.live() && !graded_points {
            return Err(bad("a graded check needs points > 0".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(checks: &str) -> anyhow::Result<CheckFile> {
        let text = format!("format_version = 2\nlab = \"l\"\n{checks}");
        let file: CheckFile = crate::error::parse_toml("c.toml", &text)?;
        validate("c.toml", &file, "l", &["s".to_string()])?;
        Ok(file)
    }

    const BASE: &str =
        "[[checks]]\nid = \"a.b\"\nstep = \"s\"\nname = \"n\"\nhint = \"h\"\nfail = \"f\"\n";

    #[test]
    fn live_checks_have_no_points_and_graded_ones_have_some() {
        let ok = parse(&format!("{BASE}kind = \"fact\"\nfact = \"live.pid\"\n")).unwrap();
        assert!(ok.checks[0].live());
        let e = parse(&format!(
            "{BASE}kind = \"fact\"\nfact = \"live.pid\"\npoints = 2\n"
        ));
        assert!(e.unwrap_err().to_string().contains("live checks"));
        let e = parse(&format!("{BASE}kind = \"fact\"\nfact = \"expect.file\"\n"));
        assert!(e.unwrap_err().to_string().contains("points > 0"));
        let art = parse(&format!(
            "{BASE}kind = \"artifact_contains\"\ncontains = [\"{{expect.fn}} x\"]\npoints = 1\n"
        ))
        .unwrap();
        assert!(!art.checks[0].live() && art.checks[0].is_artifact());
    }

    #[test]
    fn mistakes_are_named() {
        let e = parse(&format!(
            "{BASE}kind = \"fact\"\nfact = \"session.pid\"\npoints = 1\n"
        ));
        assert!(e.unwrap_err().to_string().contains("unknown fact"));
        let e = parse(&format!("{BASE}kind = \"equals\"\npoints = 1\n"));
        assert!(e.unwrap_err().to_string().contains("needs `expected`"));
        let e = parse(&format!(
            "{BASE}kind = \"fact\"\nfact = \"expect.n\"\npoints = 1\ntolerance = 0.2\n"
        ));
        assert!(e.unwrap_err().to_string().contains("numeric form"));
        let e = parse(&format!(
            "{BASE}kind = \"fact\"\nfact = \"expect.n\"\npoints = 1\nform = \"number\"\ntolerance = 20\n"
        ));
        assert!(e.unwrap_err().to_string().contains("between 0 and 1"));
        let ok = parse(&format!(
            "{BASE}kind = \"fact\"\nfact = \"expect.n\"\npoints = 1\nform = \"bytes\"\ntolerance = 0.2\n"
        ))
        .unwrap();
        assert_eq!(ok.checks[0].tolerance, Some(0.2));
        let other = BASE.replace("\"s\"", "\"t\"");
        let e = parse(&format!(
            "{other}kind = \"equals\"\nexpected = 1\npoints = 1\n"
        ));
        assert!(e.unwrap_err().to_string().contains("not a step"));
    }
}
