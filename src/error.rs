//! Exit codes and the error types every command shares.
//!
//! 0 ok, 1 failure or finding (a check failed, a problem was found, an
//! operation failed), 2 usage error (bad arguments, detected after clap),
//! 3 missing privilege or kernel feature.

/// Exit code for success.
pub const OK: u8 = 0;
/// Exit code for a failure or a finding (problems found, check failed).
pub const FAILURE: u8 = 1;
/// Exit code for a usage error.
pub const USAGE: u8 = 2;

/// Exit code for a missing privilege or kernel feature.
pub const MISSING: u8 = 3;

/// A missing privilege or kernel feature; the message says what to do.
/// `main` maps it to exit code 3.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MissingError(pub String);

/// Build a missing-privilege-or-feature error as an `anyhow::Error`.
pub fn missing(msg: impl Into<String>) -> anyhow::Error {
    MissingError(msg.into()).into()
}

/// A usage error found after argument parsing (for example two options that
/// contradict each other). `main` maps it to exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}\nRun with --help for usage.")]
pub struct UsageError(pub String);

/// Build a usage error as an `anyhow::Error`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// The exit code for an error that reached `main`.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<UsageError>().is_some() {
        USAGE
    } else if err.downcast_ref::<MissingError>().is_some() {
        MISSING
    } else {
        FAILURE
    }
}

/// Parse TOML, with errors that point at the line and column.
pub fn parse_toml<T: serde::de::DeserializeOwned>(path: &str, text: &str) -> anyhow::Result<T> {
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
