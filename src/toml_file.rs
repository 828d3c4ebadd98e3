//! TOML files kdiag reads (labs, checks, answers, courses), with errors
//! that point at the line and column.

/// Parse TOML, with errors that point at the line and column.
pub fn parse<T: serde::de::DeserializeOwned>(path: &str, text: &str) -> anyhow::Result<T> {
    toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let before = &text[..s.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!(":{line}:{col}")
            })
            .unwrap_or_default();
        anyhow::anyhow!("{path}{at}: {}", e.message())
    })
}
