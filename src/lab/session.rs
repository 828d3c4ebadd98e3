//! One run of a lab, as kdiag records it next to the learner's answers:
//! which workload process it started, with which seed, and that seed's
//! ground truth. The checks compare answers with these facts; grading
//! reads the same file from a submission.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub lab: String,
    pub seed: u64,
    /// The workload process the lab started.
    pub pid: u32,
    /// The learner's directory for this lab.
    pub dir: PathBuf,
    /// The workload's `--describe` output for `seed`.
    pub truth: serde_json::Value,
}

impl Session {
    pub const FILE: &str = "session.json";

    pub fn load(path: &Path) -> anyhow::Result<Session> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read the lab session {} (it is written when `kdiag lab` starts the workload)",
                path.display()
            )
        })?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a kdiag lab session", path.display()))
    }

    /// Write it, owned by the learner (the sudo invoker).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        Ok(crate::sys::process::user_files::write(path, text)?)
    }

    /// The facts checks refer to: `session.*`, and the ground truth's
    /// `workload.*` and `expect.*`.
    pub fn facts(&self) -> serde_json::Value {
        let mut facts = serde_json::json!({
            "session": {
                "lab": self.lab,
                "seed": self.seed,
                "pid": self.pid,
                "dir": self.dir.display().to_string(),
            },
        });
        for part in ["workload", "expect"] {
            facts[part] = self.truth[part].clone();
        }
        facts
    }
}

/// A fact by dotted name ("expect.file"), as text.
pub fn fact(facts: &serde_json::Value, name: &str) -> Option<String> {
    let mut v = facts;
    for part in name.split('.') {
        v = v.get(part)?;
    }
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `text` with every `{fact.name}` replaced by its value; None names the
/// first fact that is missing.
pub fn fill(text: &str, facts: &serde_json::Value) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            break;
        };
        let name = &rest[open + 1..open + len];
        out.push_str(&rest[..open]);
        out.push_str(&fact(facts, name).ok_or_else(|| name.to_string())?);
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_and_placeholders() {
        let s = Session {
            lab: "0-demo".into(),
            seed: 7,
            pid: 4242,
            dir: "/tmp/x".into(),
            truth: serde_json::json!({
                "workload": {"name": "io-app"},
                "expect": {"file": "/var/tmp/f", "sync": true, "region_bytes": 10485760}
            }),
        };
        let f = s.facts();
        assert_eq!(fact(&f, "session.pid").as_deref(), Some("4242"));
        assert_eq!(fact(&f, "expect.sync").as_deref(), Some("true"));
        assert_eq!(fact(&f, "workload.name").as_deref(), Some("io-app"));
        assert_eq!(fact(&f, "expect.nothing"), None);
        assert_eq!(
            fill("\"pid\": {session.pid} in {expect.file}", &f).unwrap(),
            "\"pid\": 4242 in /var/tmp/f"
        );
        assert_eq!(fill("{expect.nope}", &f).unwrap_err(), "expect.nope");
    }
}
