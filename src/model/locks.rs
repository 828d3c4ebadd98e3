//! Locks by what holds them: what blocked threads were seen waiting in,
//! named by the runtime that waits that way (`analysis::locks`' table).

use serde::{Deserialize, Serialize};

/// One kind of wait, found in blocked threads' user stacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeLock {
    /// "CPython", "JVM", "Go", "PostgreSQL", "glibc".
    pub runtime: String,
    /// "the GIL", "a monitor (synchronized)", "a condition variable", ...
    pub kind: String,
    /// A lock threads wait for each other on (false: a condition, which
    /// is sleeping by design).
    pub lock: bool,
    /// The function that takes it (`take_gil`, `ObjectMonitor::enter`).
    pub function: String,
    /// The nearest named function outside the lock's own, when known.
    pub caller: Option<String>,
    /// The system call the waits were seen in (`futex`, `epoll_wait`);
    /// empty when unknown.
    pub call: String,
    /// Thread samples seen waiting this way, and their share of all the
    /// thread samples taken.
    pub samples: u64,
    pub share: f64,
    /// The most common stack waiting this way, outermost first.
    pub stack: Vec<String>,
}

/// The calls a runtime's lock waits in: futexes and semaphores, and the
/// event waits of runtimes that sleep on a latch (PostgreSQL's lock sleeps
/// wait in epoll_wait).
pub const LOCK_CALLS: &[&str] = &[
    "futex",
    "futex_waitv",
    "semop",
    "semtimedop",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
];
