//! Exit codes and the error types every command shares.
//!
//! 0 ok, 1 failure or finding (a check failed, a problem was found, an
//! operation failed), 2 usage error (bad arguments, detected after clap),
//! 3 a privilege or kernel feature the command needs is missing.

/// Exit code for success.
pub const OK: u8 = 0;
/// Exit code for a failure or a finding (problems found, check failed).
pub const FAILURE: u8 = 1;
/// Exit code for a usage error.
pub const USAGE: u8 = 2;

/// A usage error found after argument parsing (for example two options that
/// contradict each other). `main` maps it to exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}\nRun with --help for usage.")]
pub struct UsageError(pub String);

/// Exit code for a missing privilege or kernel feature.
pub const MISSING: u8 = 3;

/// What was asked needs a privilege or kernel feature this machine lacks;
/// `main` maps it to exit code 3. The message says what is missing.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MissingError(pub String);

/// Build a missing-feature error as an `anyhow::Error`.
pub fn missing(msg: impl Into<String>) -> anyhow::Error {
    MissingError(msg.into()).into()
}

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
