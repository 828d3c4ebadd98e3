//! Stalls: a thread that stayed in one call for the whole window (it never
//! ran) while work waited for its process: connections queued on its
//! listening sockets, bytes unread on its connected ones, or other threads
//! waiting on a mutex of it.

use serde::{Deserialize, Serialize};

/// One thread that never ran in the window, in the call it sleeps in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stall {
    pub pid: i32,
    pub tid: i32,
    /// The thread's name.
    pub comm: String,
    /// Its state (S, D) at the end of the window.
    pub state: char,
    /// The system call it sleeps in ("clock_nanosleep"), "fault" outside
    /// one, "#NR" unnamed, empty when its syscall file is unreadable.
    pub call: String,
    /// The kernel function it waits in (/proc/TID/wchan).
    pub wchan: String,
    /// Seconds since it last ran (its `se.exec_start` against kdiag's own,
    /// /proc/TID/sched); None without that file.
    pub so_far_s: Option<f64>,
    /// Its stack, outermost frame first: user frames (unwound from its
    /// stack's bytes, which needs ptrace access), then the kernel's, marked
    /// `[k]` (/proc/TID/stack, root only).
    pub stack: Vec<String>,
    /// The work its process had waiting, at the start and the end.
    pub waiting: Waiting,
}

/// Work waiting on a process, at both ends of the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Waiting {
    /// Listening TCP and unix sockets with connections nobody accepted.
    pub listeners: Vec<Listener>,
    /// Connected TCP sockets with bytes nobody read (at the end), and
    /// those bytes.
    pub unread_sockets: usize,
    pub unread_bytes: u64,
    /// Other threads of the process seen waiting on a contended mutex.
    pub lock_waiters: usize,
}

/// A listening socket's accept queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Listener {
    /// A TCP listener's port (0 for a unix one).
    pub port: u16,
    /// A unix listener's path ("@name": abstract).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Connections waiting to be accepted, at the start and at the end.
    pub queued_start: u64,
    pub queued_end: u64,
}

impl Waiting {
    /// Connections queued at the end, over every listener.
    pub fn queued(&self) -> u64 {
        self.listeners.iter().map(|l| l.queued_end).sum()
    }

    /// Anything waits.
    pub fn any(&self) -> bool {
        self.queued() > 0 || self.unread_bytes > 0 || self.lock_waiters > 0
    }
}
