//! The facts checks compare answers with. A learner's truth is computed
//! from their seed alone: `seed` (the token), `workload.*` and `expect.*`
//! (the workload's ground truth for that seed). Facts only a running
//! workload knows are `live.*` (`live.pid`); only the lab, which started
//! that workload, has them, so checks on them count toward the lab's
//! progress and never toward a grade.

use crate::course::Token;

/// A set of facts as a JSON object (dotted names reach inside).
#[derive(Debug, Clone, PartialEq)]
pub struct Facts(serde_json::Value);

impl Facts {
    /// The facts of `seed`, from the workload's ground truth document.
    pub fn from_truth(seed: &Token, truth: &serde_json::Value) -> Facts {
        let mut v = serde_json::json!({ "seed": seed.as_str() });
        for part in ["workload", "expect"] {
            v[part] = truth.get(part).cloned().unwrap_or(serde_json::Value::Null);
        }
        Facts(v)
    }

    /// The same with the live run's facts added.
    pub fn with_live(&self, pid: u32) -> Facts {
        let mut v = self.0.clone();
        v["live"] = serde_json::json!({ "pid": pid });
        Facts(v)
    }

    /// Whether the live facts are known (in the lab, not in a grader).
    pub fn has_live(&self) -> bool {
        self.0.get("live").is_some()
    }

    /// A fact by dotted name ("expect.file", "expect.list.0"), as text.
    pub fn get(&self, name: &str) -> Option<String> {
        scalar(self.value(name)?)
    }

    /// A fact's values: its items when it is a list (a check on it accepts
    /// any of them), else the fact itself.
    pub fn get_all(&self, name: &str) -> Option<Vec<String>> {
        match self.value(name)? {
            serde_json::Value::Array(items) => {
                let all: Vec<String> = items.iter().filter_map(scalar).collect();
                (!all.is_empty()).then_some(all)
            }
            v => scalar(v).map(|s| vec![s]),
        }
    }

    fn value(&self, name: &str) -> Option<&serde_json::Value> {
        let mut v = &self.0;
        for part in name.split('.') {
            v = match v {
                serde_json::Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
                _ => v.get(part)?,
            };
        }
        Some(v)
    }

    /// `text` with every `{fact.name}` replaced by its value; the error
    /// names the first fact that is missing.
    pub fn fill(&self, text: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let Some(len) = rest[open..].find('}') else {
                break;
            };
            let name = &rest[open + 1..open + len];
            out.push_str(&rest[..open]);
            out.push_str(&self.get(name).ok_or_else(|| name.to_string())?);
            rest = &rest[open + len + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The fact names a text refers to with `{name}`.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(len) = rest[open..].find('}') else {
            break;
        };
        names.push(&rest[open + 1..open + len]);
        rest = &rest[open + len + 1..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_and_placeholders() {
        let truth = serde_json::json!({
            "workload": {"name": "io-app"},
            "expect": {"file": "f.dat", "sync": true, "region_bytes": 10485760}
        });
        let f = Facts::from_truth(&Token::parse("7").unwrap(), &truth);
        assert_eq!(f.get("seed").as_deref(), Some("7"));
        assert_eq!(f.get("expect.sync").as_deref(), Some("true"));
        assert_eq!(f.get("workload.name").as_deref(), Some("io-app"));
        assert_eq!(f.get("expect.nothing"), None);
        assert!(!f.has_live());
        assert_eq!(f.get("live.pid"), None);
        let live = f.with_live(4242);
        assert_eq!(live.get("live.pid").as_deref(), Some("4242"));
        assert_eq!(
            live.fill("\"pid\": {live.pid} in {expect.file}").unwrap(),
            "\"pid\": 4242 in f.dat"
        );
        assert_eq!(f.fill("{expect.nope}").unwrap_err(), "expect.nope");
        assert_eq!(placeholders("a {x.y} b {z}"), ["x.y", "z"]);
    }
}
