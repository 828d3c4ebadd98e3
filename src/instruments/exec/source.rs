//! What both exec tiers share: which processes to watch, what kdiag
//! started, and the source type they both implement.

use crate::instruments::Source;
use crate::instruments::target::Scope;
use crate::model::exec::TraceEvent;

/// Which processes to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    /// Only this process (None: every process).
    pub pid: Option<u32>,
    /// Also the processes it forks, and theirs.
    pub follow_children: bool,
    /// Record signals generated for the watched processes (and their ends).
    pub signals: bool,
    /// Whose processes: another user's execs never leave the kernel.
    pub scope: Scope,
}

/// The command kdiag started: the perf tier cannot read user strings, but
/// knows what it passed to execve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    pub pid: u32,
    pub path: String,
    pub argv: Vec<String>,
}

/// A running exec trace, on either tier.
pub type ExecSource = dyn Source<Event = TraceEvent>;
