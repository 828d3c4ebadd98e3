//! A learner's answers: a TOML file of dotted keys (`who.pid = 1234`), read
//! by the checks and written by `kdiag answer`.

use std::path::Path;

use anyhow::Context;

/// Answers by dotted key.
#[derive(Debug, Clone, Default)]
pub struct Answers(toml::Table);

impl Answers {
    /// Read `path`; a missing file is no answers yet. Parse errors name the
    /// file, line and column.
    pub fn load(path: &Path) -> anyhow::Result<Answers> {
        use crate::user_files::{self, Limits, UserFileError};
        match user_files::read_to_string(path, &Limits::input()) {
            Ok(text) => Answers::parse(&path.display().to_string(), &text),
            Err(UserFileError::NotFound(_)) => Ok(Answers::default()),
            Err(e) => Err(e.into()),
        }
    }

    pub fn parse(name: &str, text: &str) -> anyhow::Result<Answers> {
        crate::error::parse_toml(name, text).map(Answers)
    }

    /// The answer at a dotted key, as text (numbers and booleans too).
    pub fn get(&self, key: &str) -> Option<String> {
        let mut parts = key.split('.');
        let mut value = self.0.get(parts.next()?)?;
        for part in parts {
            value = value.as_table()?.get(part)?;
        }
        match value {
            toml::Value::String(s) => Some(s.clone()),
            toml::Value::Integer(i) => Some(i.to_string()),
            toml::Value::Float(f) => Some(f.to_string()),
            toml::Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// Set a dotted key; `value` becomes an integer or a boolean when it
    /// reads as one, else a string.
    pub fn set(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        let parts: Vec<&str> = key.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(crate::error::usage(format!(
                "{key:?} is not a key: use dotted names like who.pid"
            )));
        }
        let typed = if let Ok(i) = value.parse::<i64>() {
            toml::Value::Integer(i)
        } else if let Ok(b) = value.parse::<bool>() {
            toml::Value::Boolean(b)
        } else {
            toml::Value::String(value.to_string())
        };
        let (last, tables) = parts.split_last().expect("at least one part");
        let mut table = &mut self.0;
        for part in tables {
            let entry = table
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = entry
                .as_table_mut()
                .with_context(|| format!("{part} already holds an answer, not a group of them"))?;
        }
        table.insert(last.to_string(), typed);
        Ok(())
    }

    /// Set a dotted key to `value` as text, whatever it looks like (a
    /// file's path, say).
    pub fn set_text(&mut self, key: &str, value: &str) -> anyhow::Result<()> {
        self.set(key, value)?;
        let (parent, last) = key.rsplit_once('.').unwrap_or(("", key));
        let mut table = &mut self.0;
        for part in parent.split('.').filter(|p| !p.is_empty()) {
            table = table
                .get_mut(part)
                .and_then(toml::Value::as_table_mut)
                .context("set just made this group")?;
        }
        table.insert(last.to_string(), toml::Value::String(value.to_string()));
        Ok(())
    }

    /// Every answer's dotted key, in the file's order of tables.
    pub fn keys(&self) -> Vec<String> {
        fn walk(prefix: &str, t: &toml::Table, out: &mut Vec<String>) {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match v {
                    toml::Value::Table(inner) => walk(&key, inner, out),
                    _ => out.push(key),
                }
            }
        }
        let mut out = Vec::new();
        walk("", &self.0, &mut out);
        out
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(&self.0).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_get_dotted_keys_with_types() {
        let mut a = Answers::default();
        a.set("who.pid", "4242").unwrap();
        a.set("who.comm", "io-app").unwrap();
        a.set("what.sync", "true").unwrap();
        let text = a.to_toml();
        assert!(text.contains("pid = 4242"), "{text}");
        let b = Answers::parse("a.toml", &text).unwrap();
        assert_eq!(b.get("who.pid").as_deref(), Some("4242"));
        assert_eq!(b.get("who.comm").as_deref(), Some("io-app"));
        assert_eq!(b.get("what.sync").as_deref(), Some("true"));
        assert_eq!(b.get("why.file"), None);
        assert!(a.set("who.pid.x", "1").is_err(), "a value is not a group");
        assert!(a.set("who..x", "1").is_err());
        a.set_text("art.p", "123").unwrap();
        assert!(a.to_toml().contains("p = \"123\""), "{}", a.to_toml());
        assert_eq!(a.keys(), ["art.p", "what.sync", "who.comm", "who.pid"]);
    }

    #[test]
    fn parse_errors_point_at_line_and_column() {
        let e = Answers::parse("answers.toml", "[who]\npid = = 3\n").unwrap_err();
        assert!(e.to_string().starts_with("answers.toml:2:"), "{e}");
    }
}
