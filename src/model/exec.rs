//! What exec-trace and execsnoop record: exec attempts, the point of no
//! return, signals generated, forks and process ends. Plain data, plus the
//! static tables that name errnos, signals and si_codes.

use serde::Serialize;

/// One execve/execveat, seen at syscall exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecEvent {
    /// Monotonic time (CLOCK_MONOTONIC), in ns.
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub ppid: u32,
    pub uid: u32,
    /// The caller's comm, or the new program's after a successful exec.
    pub comm: String,
    /// "execve" or "execveat".
    pub syscall: &'static str,
    /// The path passed to the syscall; None when the tier could not read it.
    pub filename: Option<String>,
    /// The first arguments (BPF tier; empty when unknown).
    pub argv: Vec<String>,
    /// More arguments were passed than recorded.
    pub argv_truncated: bool,
    /// The syscall's return value: 0 or -errno.
    pub ret: i64,
    /// Name of -ret ("EINVAL") when the exec failed.
    pub errno: Option<&'static str>,
}

/// sched_prepare_exec: the kernel passed the point of no return (6.10+).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrepareExec {
    pub time_ns: u64,
    pub pid: u32,
    pub filename: String,
    /// The file actually loaded (differs for scripts: the interpreter's path).
    pub interp: String,
}

/// One kernel stack frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frame {
    pub addr: u64,
    /// kallsyms name, or None when unknown (e.g. kptr_restrict).
    pub symbol: Option<String>,
}

/// A signal generated for a traced process (signal:signal_generate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignalEvent {
    pub time_ns: u64,
    pub sig: i32,
    pub sig_name: String,
    pub code: i32,
    /// "SI_KERNEL", "SEGV_MAPERR", ...
    pub code_name: String,
    pub errno: i32,
    /// Target process and thread.
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Who was running when the signal was generated (the kernel acting for
    /// that task, or another process sending it).
    pub sender_pid: u32,
    pub sender_comm: String,
    /// si_addr of a fault signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE), if known.
    pub addr: Option<u64>,
    /// The kernel stack at generation, innermost first.
    pub kernel_stack: Vec<Frame>,
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "how")]
pub enum Exit {
    Code {
        code: i32,
    },
    Signal {
        sig: i32,
        name: String,
        core_dumped: bool,
    },
    /// The tier saw the end but not the status (perf: no exit code).
    Unknown,
}

/// How an exit reads: "exited with code 1", "killed by SIGKILL (9)".
impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code { code } => write!(f, "exited with code {code}"),
            Exit::Signal {
                sig,
                name,
                core_dumped,
            } => write!(
                f,
                "killed by {name} ({sig}){}",
                if *core_dumped { ", core dumped" } else { "" }
            ),
            Exit::Unknown => f.write_str("exited (status unknown to this tier)"),
        }
    }
}

impl Exit {
    /// Decode a wait status / task->exit_code.
    pub fn from_status(status: i32) -> Exit {
        let sig = status & 0x7f;
        if sig == 0 {
            Exit::Code {
                code: (status >> 8) & 0xff,
            }
        } else {
            Exit::Signal {
                sig,
                name: signal_name(sig),
                core_dumped: status & 0x80 != 0,
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessEnd {
    pub time_ns: u64,
    pub pid: u32,
    pub comm: String,
    pub exit: Exit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fork {
    pub time_ns: u64,
    pub parent: u32,
    pub child: u32,
}

/// Everything exec-trace records, in time order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "event")]
pub enum TraceEvent {
    Exec(ExecEvent),
    PrepareExec(PrepareExec),
    Signal(SignalEvent),
    Fork(Fork),
    Exit(ProcessEnd),
}

impl TraceEvent {
    pub fn time_ns(&self) -> u64 {
        match self {
            TraceEvent::Exec(e) => e.time_ns,
            TraceEvent::PrepareExec(e) => e.time_ns,
            TraceEvent::Signal(e) => e.time_ns,
            TraceEvent::Fork(e) => e.time_ns,
            TraceEvent::Exit(e) => e.time_ns,
        }
    }
}

pub use super::errno::{errno_message, errno_name, errno_number};
pub use super::signal::signal_name;

pub const SIGSEGV: i32 = 11;
pub const SI_KERNEL: i32 = 0x80;

/// The name of an si_code, which depends on the signal for positive codes.
pub fn si_code_name(sig: i32, code: i32) -> String {
    let generic = match code {
        0 => Some("SI_USER"),
        0x80 => Some("SI_KERNEL"),
        -1 => Some("SI_QUEUE"),
        -2 => Some("SI_TIMER"),
        -3 => Some("SI_MESGQ"),
        -4 => Some("SI_ASYNCIO"),
        -5 => Some("SI_SIGIO"),
        -6 => Some("SI_TKILL"),
        _ => None,
    };
    let specific: &[&str] = match sig {
        4 => &[
            "ILL_ILLOPC",
            "ILL_ILLOPN",
            "ILL_ILLADR",
            "ILL_ILLTRP",
            "ILL_PRVOPC",
        ],
        7 => &[
            "BUS_ADRALN",
            "BUS_ADRERR",
            "BUS_OBJERR",
            "BUS_MCEERR_AR",
            "BUS_MCEERR_AO",
        ],
        8 => &[
            "FPE_INTDIV",
            "FPE_INTOVF",
            "FPE_FLTDIV",
            "FPE_FLTOVF",
            "FPE_FLTUND",
        ],
        11 => &["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"],
        17 => &[
            "CLD_EXITED",
            "CLD_KILLED",
            "CLD_DUMPED",
            "CLD_TRAPPED",
            "CLD_STOPPED",
            "CLD_CONTINUED",
        ],
        _ => &[],
    };
    generic
        .or_else(|| {
            usize::try_from(code - 1)
                .ok()
                .and_then(|i| specific.get(i).copied())
        })
        .map_or_else(|| code.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(errno_name(22), Some("EINVAL"));
        assert_eq!(errno_number("ELIBBAD"), Some(80));
        assert_eq!(errno_message("ENOEXEC"), "Exec format error");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(si_code_name(11, 0x80), "SI_KERNEL");
        assert_eq!(si_code_name(11, 1), "SEGV_MAPERR");
        assert_eq!(si_code_name(17, 2), "CLD_KILLED");
        assert_eq!(si_code_name(10, 7), "7");
    }

    #[test]
    fn wait_statuses() {
        assert_eq!(Exit::from_status(0), Exit::Code { code: 0 });
        assert_eq!(Exit::from_status(3 << 8), Exit::Code { code: 3 });
        assert_eq!(
            Exit::from_status(11 | 0x80),
            Exit::Signal {
                sig: 11,
                name: "SIGSEGV".to_string(),
                core_dumped: true
            }
        );
    }
}
