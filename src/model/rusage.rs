//! What `kdiag time` measures about one command run: resource usage from
//! wait4, storage bytes from /proc/PID/io, and how the child ended.

use serde::{Deserialize, Serialize};

/// Resource usage of a finished child and its waited-for descendants
/// (`struct rusage` from wait4), in friendly units.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rusage {
    pub user_secs: f64,
    pub sys_secs: f64,
    pub max_rss_kb: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// 512-byte blocks read from the file system (ru_inblock).
    pub fs_inputs: u64,
    /// 512-byte blocks written to the file system (ru_oublock).
    pub fs_outputs: u64,
}

/// /proc/PID/io read while the child was a zombie: its own I/O plus that of
/// the descendants it reaped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoBytes {
    /// Bytes passed to read-like syscalls (rchar), cache hits included.
    pub rchar: u64,
    /// Bytes passed to write-like syscalls (wchar).
    pub wchar: u64,
    /// Read-like system calls made (syscr): read, pread, readv, sendfile...
    #[serde(default)]
    pub syscr: u64,
    /// Write-like system calls made (syscw).
    #[serde(default)]
    pub syscw: u64,
    /// Bytes really fetched from storage (read_bytes).
    pub read_bytes: u64,
    /// Bytes sent towards storage (write_bytes), including dirtied page cache.
    pub write_bytes: u64,
    /// Written bytes whose dirty pages were dropped before writeback
    /// (truncate, delete): they never reached storage.
    pub cancelled_write_bytes: u64,
}

/// Who generated the fatal signal, as the `signal:signal_generate`
/// tracepoint saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalOrigin {
    /// The si_code the kernel stored (SI_USER 0, SI_KERNEL 128, SI_TKILL -6,
    /// positive codes for faults such as SEGV_MAPERR).
    pub code: i32,
    /// The thread that was running when the signal was generated (for a
    /// kernel signal that is often the victim itself, or any bystander).
    pub sender_tid: i32,
    /// Its process, when it was still alive to be looked up.
    pub sender_pid: Option<i32>,
    pub sender_comm: String,
}

/// si_code values from <asm-generic/siginfo.h>.
const SI_USER: i32 = 0;
const SI_KERNEL: i32 = 0x80;
const SI_QUEUE: i32 = -1;
const SI_TKILL: i32 = -6;

impl SignalOrigin {
    /// Whether the kernel generated the signal: Some(true) for faults and
    /// SI_KERNEL, Some(false) for another process's kill/tgkill/sigqueue,
    /// None when the record cannot tell (a process signalling itself with
    /// SI_USER looks the same as the kernel's SIGPIPE or SIGXFSZ).
    pub fn by_kernel(&self, target_pid: i32) -> Option<bool> {
        match self.code {
            c if c > 0 || c == SI_KERNEL => Some(true),
            SI_USER if self.own(target_pid) => None,
            _ => Some(false),
        }
    }

    /// Whether the process sent it to itself (any of its threads).
    fn own(&self, target_pid: i32) -> bool {
        self.sender_pid == Some(target_pid) || self.sender_tid == target_pid
    }

    /// One line for humans saying who sent the signal and how.
    pub fn describe(&self, target_pid: i32) -> String {
        let sender = match self.sender_pid {
            Some(pid) => format!("process {pid} ({})", self.sender_comm),
            None => format!("thread {} ({}, exited)", self.sender_tid, self.sender_comm),
        };
        let own = self.own(target_pid);
        match self.code {
            // SI_KERNEL is positive too: test it before the fault codes.
            SI_KERNEL if own => "the kernel (SI_KERNEL: OOM killer, CPU rlimit, timer...) while \
                                 the process ran"
                .to_string(),
            SI_KERNEL => format!(
                "the kernel (SI_KERNEL: OOM killer, CPU rlimit, timer...) while {sender} ran"
            ),
            c if c > 0 => format!("the kernel, for a fault in the process (si_code {c})"),
            SI_USER if own => "the process itself (SI_USER: its own kill(), or the kernel on its \
                               behalf, e.g. SIGPIPE on a broken pipe)"
                .to_string(),
            SI_USER => format!("{sender} with kill()"),
            SI_TKILL if own => "the process itself with tgkill() (raise, abort)".to_string(),
            SI_TKILL => format!("{sender} with tgkill()"),
            SI_QUEUE => format!("{sender} with sigqueue()"),
            c => format!("{sender} (si_code {c})"),
        }
    }
}

/// How the child ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ending {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
        name: String,
        core_dumped: bool,
        /// None when kdiag could not trace signal generation (not root, or
        /// the event was lost).
        origin: Option<SignalOrigin>,
        /// Whether the kernel generated it; None when unknown or ambiguous
        /// (see `SignalOrigin::by_kernel`).
        sent_by_kernel: Option<bool>,
    },
}

impl Ending {
    /// kdiag's own exit code: the child's, or 128+N for signal N, like `time`.
    pub fn exit_code(&self) -> u8 {
        match self {
            Ending::Exited { code } => *code as u8,
            Ending::Signaled { signal, .. } => (128 + signal) as u8,
        }
    }
}

/// One complete `kdiag time` measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRun {
    pub command: Vec<String>,
    pub pid: i32,
    pub real_secs: f64,
    pub rusage: Rusage,
    /// None when /proc/PID/io could not be read (kernel without
    /// CONFIG_TASK_XACCT); the reason is in `io_error`.
    pub io: Option<IoBytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_error: Option<String>,
    pub ending: Ending,
}

impl CommandRun {
    /// Share of one CPU used, in percent, as GNU time computes it
    /// ((user + sys) / real).
    pub fn cpu_percent(&self) -> f64 {
        if self.real_secs <= 0.0 {
            return 0.0;
        }
        100.0 * (self.rusage.user_secs + self.rusage.sys_secs) / self.real_secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_time() {
        assert_eq!(Ending::Exited { code: 3 }.exit_code(), 3);
        let killed = Ending::Signaled {
            signal: 9,
            name: "SIGKILL".into(),
            core_dumped: false,
            origin: None,
            sent_by_kernel: None,
        };
        assert_eq!(killed.exit_code(), 137);
    }

    fn origin(code: i32, sender: i32) -> SignalOrigin {
        SignalOrigin {
            code,
            sender_tid: sender,
            sender_pid: Some(sender),
            sender_comm: "x".into(),
        }
    }

    #[test]
    fn tells_kernel_from_user_signals() {
        // SEGV_MAPERR raised by the fault handler in the process's context.
        assert_eq!(origin(1, 10).by_kernel(10), Some(true));
        assert_eq!(origin(SI_KERNEL, 99).by_kernel(10), Some(true));
        assert_eq!(origin(SI_USER, 99).by_kernel(10), Some(false));
        assert_eq!(origin(SI_TKILL, 10).by_kernel(10), Some(false));
        assert_eq!(origin(SI_USER, 10).by_kernel(10), None);
        assert_eq!(
            origin(SI_USER, 99).describe(10),
            "process 99 (x) with kill()"
        );
    }
}
