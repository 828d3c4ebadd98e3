//! Exit codes and the error types every command shares.
//!
//! One convention for every command (also in `kdiag --help` and the README):
//!
//! | code  | meaning |
//! |-------|---------|
//! | 0     | ok |
//! | 1     | the command ran and found a problem, or a check failed |
//! | 2     | usage error, or an input that cannot be used (missing, not a regular file, too large, not yours) |
//! | 3     | missing privilege or kernel feature (the message says how to get it) |
//! | 126, 127 | the command given after `--` could not be executed / was not found |
//! | 128+N | kdiag was interrupted by signal N (SIGINT 130, SIGTERM 143, SIGHUP 129) |
//!
//! Where kdiag runs a command (`-- CMD`), `time` and `workload run` exit
//! with the command's own status; see each command's guide.
//!
//! Errors carry their kind as a type (`UsageError`, `Unavailable`,
//! `Interrupted`, `user_files::UserFileError`); `exit_code` finds it
//! anywhere in an error's chain, so context added on the way up keeps it.

use std::io;
use std::path::PathBuf;

/// Exit code for success.
pub const OK: u8 = 0;
/// Exit code for a failure or a finding (problems found, check failed).
pub const FAILURE: u8 = 1;
/// Exit code for a usage error or an unusable input.
pub const USAGE: u8 = 2;
/// Exit code for a missing privilege or kernel feature.
pub const UNAVAILABLE: u8 = 3;
/// The same, by its other name.
pub const MISSING: u8 = UNAVAILABLE;

/// The text of the convention, for `kdiag --help` (after_help).
pub const EXIT_CODES_HELP: &str = "Exit status: 0 ok; 1 the command ran and found a problem \
    or a check failed; 2 usage error or unusable input; 3 missing privilege or kernel feature \
    (the message says how to get it); 126/127 the command after -- could not be executed / was \
    not found; 128+N interrupted by signal N (130 for Ctrl-C, except where Ctrl-C is how a \
    trace without a duration ends). `time` and `workload run` exit with the command's own \
    status, `profile -- CMD` too when the command ended by itself.";

/// The exit code of a process killed by signal `sig`, as shells report it.
pub fn signal_exit(sig: i32) -> u8 {
    128u8.saturating_add(u8::try_from(sig).unwrap_or(127))
}

/// The exit code a shell reports for a child's wait status: its exit
/// code, or 128+N when signal N killed it.
pub fn status_exit(status: i32) -> u8 {
    if libc::WIFSIGNALED(status) {
        signal_exit(libc::WTERMSIG(status))
    } else {
        libc::WEXITSTATUS(status) as u8
    }
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

/// A PID the user named is not a running process: unusable input, exit 2
/// (`ps`, which only lists, exits 1 like procps' ps).
#[derive(Debug, thiserror::Error)]
#[error("no process with PID{} {}", if .0.len() > 1 { "s" } else { "" }, list(.0))]
pub struct NoSuchProcess(pub Vec<i64>);

impl NoSuchProcess {
    /// The error for one missing PID.
    pub fn one(pid: impl Into<i64>) -> anyhow::Error {
        NoSuchProcess(vec![pid.into()]).into()
    }
}

fn list(pids: &[i64]) -> String {
    let v: Vec<String> = pids.iter().map(i64::to_string).collect();
    v.join(", ")
}

/// The command kdiag was asked to run (`-- CMD`) could not be started:
/// exit 127 when it was not found, 126 when it could not be executed, as
/// a shell says (and `kdiag time` reports). The error is not the error's
/// `source`: the message says it already, and the chain would repeat it.
#[derive(Debug, thiserror::Error)]
#[error("cannot run `{program}`: {}", describe(.error))]
pub struct CannotRun {
    pub program: String,
    pub error: std::io::Error,
}

impl CannotRun {
    pub fn exit_code(&self) -> u8 {
        if self.error.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        }
    }
}

/// strerror's text without Rust's " (os error N)".
fn describe(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Something this run needs and does not have: a privilege or a kernel
/// feature. The message names the fix. Exit code 3.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// Root or capabilities are needed.
    #[error("{0}")]
    Privilege(String),
    /// The kernel lacks something (a tracepoint, BPF, a sysctl's setting).
    #[error("{0}")]
    Feature(String),
}

/// A missing privilege or kernel feature, when the message says it all.
pub fn missing(msg: impl Into<String>) -> anyhow::Error {
    Unavailable::Feature(msg.into()).into()
}

/// The error for an operation that needs privileges we do not have.
pub fn needs_privilege(what: &str) -> anyhow::Error {
    Unavailable::Privilege(format!(
        "{what} needs root, or CAP_PERFMON and CAP_BPF: run it with sudo \
         (sudo kdiag ...), or see `kdiag doctor` for what this machine allows"
    ))
    .into()
}

/// kdiag stopped because it received signal N (after cleaning up): exit
/// code 128+N.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("interrupted by {}", crate::model::signal::signal_name(*.0))]
pub struct Interrupted(pub i32);

/// The exit code for an error that reached `main`: its typed kind,
/// wherever it is (the error, a context added to it, or a source), else 1.
/// An interruption comes first: kdiag was stopped, whatever else failed.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(Interrupted(sig)) = kind::<Interrupted>(err) {
        return signal_exit(*sig);
    }
    if let Some(c) = kind::<CannotRun>(err) {
        return c.exit_code();
    }
    if kind::<UsageError>(err).is_some()
        || kind::<UserFileError>(err).is_some()
        || kind::<NoSuchProcess>(err).is_some()
        || kind::<crate::model::diagnose_run::RecordError>(err).is_some()
    {
        return USAGE;
    }
    if kind::<Unavailable>(err).is_some() {
        return UNAVAILABLE;
    }
    FAILURE
}

/// `T` in `err`: the error or a context of it (anyhow's downcast), or any
/// source in its chain.
fn kind<T: std::error::Error + Send + Sync + 'static>(err: &anyhow::Error) -> Option<&T> {
    err.downcast_ref::<T>()
        .or_else(|| err.chain().find_map(|c| c.downcast_ref::<T>()))
}

/// Why a user's file could not be used (`user_files`); each
/// message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    #[error("{}: permission denied{}", .path.display(), acting_note(.acting))]
    Denied { path: PathBuf, acting: bool },
    #[error("{}: is {what}, not a regular file", .path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{}: is a symbolic link; name the file itself", .0.display())]
    Symlink(PathBuf),
    #[error(
        "{}: {size} bytes is over the limit of {max} bytes (if the file is right, raise the limit with kdiag --max-input SIZE)",
        .path.display()
    )]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error(
        "{}: exists and belongs to uid {owner}, not to you; kdiag will not overwrite it (remove it or name another file)",
        .path.display()
    )]
    NotOwned { path: PathBuf, owner: u32 },
    #[error(
        "{}: has {links} names (hard links); kdiag will not truncate a file shared with other names (remove it or name another file)",
        .path.display()
    )]
    HardLinked { path: PathBuf, links: u64 },
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn acting_note(acting: &bool) -> &'static str {
    if *acting {
        " (kdiag opens files you name with your own rights, not root's)"
    } else {
        ""
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

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn kinds_survive_context() {
        let e = Err::<(), _>(usage("bad")).context("outer").unwrap_err();
        assert_eq!(exit_code(&e), USAGE);
        let e = Err::<(), _>(needs_privilege("x"))
            .context("outer")
            .unwrap_err();
        assert_eq!(exit_code(&e), UNAVAILABLE);
        let e = anyhow::Error::new(Interrupted(libc::SIGTERM));
        assert_eq!(exit_code(&e), 143);
        assert_eq!(e.to_string(), "interrupted by SIGTERM");
        // As a context on another error too.
        let e = anyhow::anyhow!("no samples").context(Interrupted(libc::SIGINT));
        assert_eq!(exit_code(&e), 130);
        // And as a source inside another error.
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] UsageError);
        let e = anyhow::Error::new(Outer(UsageError("x".into())));
        assert_eq!(exit_code(&e), USAGE);
        let e = anyhow::Error::new(UserFileError::NotFound("f".into())).context("reading");
        assert_eq!(exit_code(&e), USAGE);
        assert_eq!(exit_code(&anyhow::anyhow!("plain")), FAILURE);
    }

    #[test]
    fn signal_codes() {
        assert_eq!(signal_exit(libc::SIGINT), 130);
        assert_eq!(signal_exit(libc::SIGKILL), 137);
        assert_eq!(signal_exit(1000), 255);
    }
}
