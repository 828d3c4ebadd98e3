//! Why an exec failed, from what exec-trace recorded: the syscall's errno,
//! whether the kernel had passed the point of no return (sched_prepare_exec,
//! or the SIGSEGV with si_code SI_KERNEL that follows), which kernel function
//! sent the signal (from its stack) and, when the file is an ELF or script,
//! the rule elf-check finds broken. Pure: the command collects the facts.

use serde::Serialize;

use crate::analysis::elf_rules;
use crate::model::elf::{ElfReport, FileKind};
use crate::model::exec::{
    ExecEvent, Exit, SI_KERNEL, SIGSEGV, SignalEvent, TraceEvent, errno_message,
};

/// What the file system said about a path an exec named (collected by the
/// command, keyed by the filename exactly as the program passed it).
#[derive(Debug, Clone)]
pub struct FileFacts {
    pub path: String,
    pub exists: bool,
    /// elf-check's report on the file, if it could be read.
    pub elf: Option<ElfReport>,
}

/// The families exec failures fall into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// execve succeeded and the program exited normally.
    Success,
    /// ENOEXEC: the kernel did not recognise the format; nothing was lost.
    FormatError,
    /// ENOENT and the file is not there.
    MissingFile,
    /// ENOENT for a file that exists: its interpreter is missing.
    MissingInterpreter,
    /// ELIBBAD: the interpreter is not a loadable ELF.
    BadInterpreter,
    /// EACCES: no execute permission, not a regular file, or a noexec mount.
    Permission,
    /// ETXTBSY: the file is open for writing.
    TextBusy,
    /// E2BIG: arguments plus environment too large.
    TooBig,
    /// Another errno before the point of no return.
    OtherError,
    /// The exec failed after the point of no return: the kernel killed the process.
    AfterPointOfNoReturn,
    /// The exec succeeded, then the new program crashed (fault in user space).
    UserCrash,
    /// The exec succeeded; the process was later killed by a signal.
    Killed,
}

/// The explanation of one exec attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub pid: u32,
    pub filename: Option<String>,
    pub family: Family,
    pub errno: Option<&'static str>,
    /// The fatal signal that followed, e.g. "SIGSEGV (SI_KERNEL)".
    pub signal: Option<String>,
    /// The kernel function that generated the signal, and its caller.
    pub sender: Option<String>,
    pub called_from: Option<String>,
    /// The broken rule elf-check names, with its numbers.
    pub cause: Option<String>,
    /// The plain-language explanation.
    pub text: String,
    /// A failed exec the same process followed with a successful one (a
    /// shell or execvp trying each $PATH entry): not the problem.
    pub recovered: bool,
}

impl Finding {
    /// Whether this finding is a problem worth explaining: an exec that
    /// failed, or a program that died of it; not one the OOM killer chose
    /// later (it ran: the memory is the story, not the exec).
    pub fn is_problem(&self) -> bool {
        self.family != Family::Success && !self.recovered && !self.oom_killed()
    }

    /// Killed by the OOM killer (its kernel function sent the signal).
    pub fn oom_killed(&self) -> bool {
        self.family == Family::Killed
            && self
                .sender
                .as_deref()
                .is_some_and(|s| s.contains("oom_kill"))
    }
}

/// Kernel functions that only carry a signal along; the sender is the first
/// frame outside them.
const SIGNAL_PLUMBING: &[&str] = &[
    "__send_signal_locked",
    "send_signal_locked",
    "__send_signal",
    "send_signal",
    "force_sig_info_to_task",
    "force_sig_info",
    "do_send_sig_info",
    "send_sig_info",
    "__group_send_sig_info",
    "group_send_sig_info",
    "do_send_specific",
    "complete_signal",
    "__kill_pgrp_info",
    "kill_pid_info",
    "kill_pid_info_type",
    "kill_something_info",
];

/// The function that generated a signal and its caller, from the kernel
/// stack (innermost first).
pub fn sender(stack: &[String]) -> Option<(String, Option<String>)> {
    let plain = |s: &String| s.split('.').next().unwrap_or(s).to_string();
    let mut frames = stack.iter().map(plain);
    let sender = frames.find(|f| !SIGNAL_PLUMBING.contains(&f.as_str()))?;
    Some((sender, frames.next()))
}

fn stack_names(s: &SignalEvent) -> Vec<String> {
    s.kernel_stack
        .iter()
        .filter_map(|f| f.symbol.clone())
        .collect()
}

/// Leave out the programs killed by a signal from one of `senders`
/// (kdiag stopping the command it ran at the end of its window): they ran,
/// and their end is no exec failure.
pub fn not_stopped_by(
    findings: Vec<Finding>,
    events: &[TraceEvent],
    senders: &[u32],
) -> Vec<Finding> {
    findings
        .into_iter()
        .filter(|f| {
            f.family != Family::Killed
                || !events.iter().any(|e| {
                    matches!(e, TraceEvent::Signal(s) if s.pid == f.pid && senders.contains(&s.sender_pid))
                })
        })
        .collect()
}

/// Explain every exec attempt in `events`, in order.
pub fn explain(events: &[TraceEvent], files: &[FileFacts]) -> Vec<Finding> {
    let execs: Vec<(usize, &ExecEvent)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            TraceEvent::Exec(x) => Some((i, x)),
            _ => None,
        })
        .collect();
    let mut findings = Vec::new();
    for (n, &(_, exec)) in execs.iter().enumerate() {
        // This exec's window: from the pid's previous exec to its next one.
        let prev = execs[..n]
            .iter()
            .rev()
            .find(|(_, e)| e.pid == exec.pid)
            .map_or(0, |(j, _)| j + 1);
        let next = execs[n + 1..]
            .iter()
            .find(|(_, e)| e.pid == exec.pid)
            .map_or(events.len(), |(j, _)| *j);
        let window = &events[prev..next];
        let is_last = next == events.len();
        let mut f = explain_one(exec, window, is_last, files);
        f.recovered = exec.ret < 0
            && execs[n + 1..]
                .iter()
                .any(|(_, e)| e.pid == exec.pid && e.ret == 0);
        findings.push(f);
    }
    findings
}

fn explain_one(
    exec: &ExecEvent,
    window: &[TraceEvent],
    is_last: bool,
    files: &[FileFacts],
) -> Finding {
    let pid = exec.pid;
    let prepared = window
        .iter()
        .any(|e| matches!(e, TraceEvent::PrepareExec(p) if p.pid == pid));
    let end = window.iter().find_map(|e| match e {
        TraceEvent::Exit(x) if x.pid == pid && is_last => Some(x.exit.clone()),
        _ => None,
    });
    let fatal = match end {
        Some(Exit::Signal { sig, .. }) => Some(sig),
        _ => None,
    };
    // The signal that killed it: the last one generated with that number.
    let signal = window.iter().rev().find_map(|e| match e {
        TraceEvent::Signal(s) if s.pid == pid && Some(s.sig) == fatal => Some(s),
        TraceEvent::Signal(s) if s.pid == pid && fatal.is_none() && s.sig == SIGSEGV => Some(s),
        _ => None,
    });
    let facts = exec
        .filename
        .as_deref()
        .and_then(|f| files.iter().find(|x| x.path == f));
    let name = exec.filename.as_deref().unwrap_or("(unknown file)");
    let call = format!("{}(\"{name}\")", exec.syscall);

    let mut f = Finding {
        pid,
        filename: exec.filename.clone(),
        family: Family::Success,
        errno: exec.errno,
        signal: signal.map(|s| format!("{} ({})", s.sig_name, s.code_name)),
        sender: None,
        called_from: None,
        cause: None,
        text: String::new(),
        recovered: false,
    };
    if let Some((s, from)) = signal.and_then(|s| sender(&stack_names(s))) {
        f.sender = Some(s);
        f.called_from = from;
    }
    let sent_by = match (&f.sender, &f.called_from) {
        (Some(s), Some(from)) => format!(", sent by {s} from {from}"),
        (Some(s), None) => format!(", sent by {s}"),
        _ => String::new(),
    };
    let report = facts.and_then(|x| x.elf.as_ref());

    if exec.ret < 0 {
        let errno = exec.errno.unwrap_or("an unknown errno");
        let msg = errno_message(errno);
        let killed_by_kernel = signal.is_some_and(|s| s.sig == SIGSEGV && s.code == SI_KERNEL);
        let after = killed_by_kernel || (prepared && fatal.is_some());
        f.cause = report
            .and_then(|r| elf_rules::explain(r, exec.errno, after))
            .map(|p| format!("{}; {}", p.message, p.quote));
        if after {
            f.family = Family::AfterPointOfNoReturn;
            let how = match signal {
                Some(s) => format!(
                    "so the kernel killed the process with {} (si_code {}){sent_by}",
                    s.sig_name, s.code_name
                ),
                None => "so the process cannot go on and is killed".to_string(),
            };
            f.text = format!(
                "{call} failed with {errno} ({msg}) after the point of no return: the old program \
                 image was already gone, {how}."
            );
        } else {
            let (family, why) = before_point_of_no_return(errno, facts, report);
            f.family = family;
            f.text = format!(
                "{call} failed with {errno} ({msg}) before the point of no return, so the calling \
                 program kept running and no signal was sent: {why}"
            );
        }
    } else {
        match (end, signal) {
            (Some(Exit::Signal { name, .. }), Some(s))
                if s.code > 0 && matches!(s.sig, 4 | 5 | 7 | 8 | 11) =>
            {
                f.family = Family::UserCrash;
                let at = s
                    .addr
                    .map(|a| format!(" at address {a:#x}"))
                    .unwrap_or_default();
                f.text = format!(
                    "{call} succeeded; then the new program crashed in user space: the kernel sent \
                     {name} (si_code {}){at}{sent_by}.",
                    s.code_name
                );
                f.cause = report
                    .and_then(|r| elf_rules::explain(r, None, false))
                    .map(|p| format!("{}; {}", p.message, p.quote));
            }
            (Some(Exit::Signal { name, .. }), s) => {
                f.family = Family::Killed;
                let by = match s {
                    _ if f.oom_killed() => " sent by the OOM killer".to_string(),
                    Some(s) => format!(" sent by {} (pid {})", s.sender_comm, s.sender_pid),
                    None => String::new(),
                };
                f.text = format!("{call} succeeded; the process was later killed by {name}{by}.");
            }
            (Some(Exit::Code { code }), _) => {
                f.text = format!("{call} succeeded and the program exited with code {code}.");
            }
            (None | Some(Exit::Unknown), _) => {
                f.text = format!("{call} succeeded.");
            }
        }
    }
    if let Some(cause) = &f.cause {
        f.text.push_str(&format!(" Cause (elf-check): {cause}"));
    }
    f
}

/// The family and reason of an errno returned before the point of no return.
fn before_point_of_no_return(
    errno: &str,
    facts: Option<&FileFacts>,
    report: Option<&ElfReport>,
) -> (Family, String) {
    let interpreter = report.and_then(|r| match &r.kind {
        FileKind::Script { interpreter } => Some(interpreter.clone()),
        _ => r.interpreter.clone(),
    });
    match errno {
        "ENOEXEC" => (
            Family::FormatError,
            "the kernel recognised no executable format (not an ELF for this machine, no #! line, \
             or an ELF header the loader rejects). A shell may then run such a file as a script."
                .into(),
        ),
        "ENOENT" if facts.is_some_and(|f| f.exists) => (
            Family::MissingInterpreter,
            match interpreter {
                Some(i) => format!(
                    "the file exists, but the interpreter it names, {i}, does not: execve reports \
                     ENOENT for the missing interpreter, not for the file."
                ),
                None => "the file exists, so ENOENT means an interpreter it names (PT_INTERP or \
                         #!) is missing."
                    .into(),
            },
        ),
        "ENOENT" => (
            Family::MissingFile,
            "no file exists at that path (or a directory on the way is missing).".into(),
        ),
        "ELIBBAD" => (
            Family::BadInterpreter,
            "the interpreter the file names (PT_INTERP) exists but is not a valid ELF interpreter."
                .into(),
        ),
        "EACCES" => (
            Family::Permission,
            "permission denied: the file has no execute permission for this user, is not a \
             regular file, or lies on a file system mounted noexec."
                .into(),
        ),
        "ETXTBSY" => (
            Family::TextBusy,
            "the file is open for writing by some process, and the kernel refuses to run a file \
             that is being written."
                .into(),
        ),
        "E2BIG" => (
            Family::TooBig,
            "the arguments and environment together exceed the limit (a quarter of the stack \
             rlimit, and 128 KiB per string)."
                .into(),
        ),
        _ => (
            Family::OtherError,
            "see the errno above; the old program image was still intact.".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::exec::{Frame, PrepareExec, ProcessEnd, errno_name, si_code_name};

    fn exec(pid: u32, t: u64, file: &str, ret: i64) -> TraceEvent {
        TraceEvent::Exec(ExecEvent {
            time_ns: t,
            pid,
            tid: pid,
            ppid: 1,
            uid: 1000,
            comm: "sh".into(),
            syscall: "execve",
            filename: Some(file.into()),
            argv: vec![file.into()],
            argv_truncated: false,
            ret,
            errno: errno_name(-ret as i32),
        })
    }

    fn signal(pid: u32, t: u64, sig: i32, code: i32, stack: &[&str]) -> TraceEvent {
        TraceEvent::Signal(SignalEvent {
            time_ns: t,
            sig,
            sig_name: crate::model::exec::signal_name(sig),
            code,
            code_name: si_code_name(sig, code),
            errno: 0,
            pid,
            tid: pid,
            comm: "x".into(),
            sender_pid: pid,
            sender_comm: "x".into(),
            addr: (code == 1).then_some(0x1234),
            kernel_stack: stack
                .iter()
                .map(|s| Frame {
                    addr: 0,
                    symbol: Some(s.to_string()),
                })
                .collect(),
        })
    }

    fn end(pid: u32, t: u64, status: i32) -> TraceEvent {
        TraceEvent::Exit(ProcessEnd {
            time_ns: t,
            pid,
            comm: "x".into(),
            exit: Exit::from_status(status),
        })
    }

    const FORCE: &[&str] = &[
        "__send_signal_locked",
        "force_sig_info_to_task",
        "force_fatal_sig",
        "bprm_execve",
        "do_execveat_common.isra.0",
        "__x64_sys_execve",
    ];

    #[test]
    fn after_point_of_no_return() {
        let events = [
            exec(7, 1, "./bad", -22),
            TraceEvent::PrepareExec(PrepareExec {
                time_ns: 2,
                pid: 7,
                filename: "./bad".into(),
                interp: "./bad".into(),
            }),
            signal(7, 3, 11, 0x80, FORCE),
            end(7, 4, 11),
        ];
        let f = &explain(&events, &[])[0];
        assert_eq!(f.family, Family::AfterPointOfNoReturn);
        assert_eq!(f.errno, Some("EINVAL"));
        assert_eq!(f.sender.as_deref(), Some("force_fatal_sig"));
        assert_eq!(f.called_from.as_deref(), Some("bprm_execve"));
        assert_eq!(
            f.text,
            "execve(\"./bad\") failed with EINVAL (Invalid argument) after the point of no \
             return: the old program image was already gone, so the kernel killed the process \
             with SIGSEGV (si_code SI_KERNEL), sent by force_fatal_sig from bprm_execve."
        );
    }

    #[test]
    fn format_error_has_no_signal() {
        let events = [exec(7, 1, "./junk", -8), end(7, 2, 1 << 8)];
        let f = &explain(&events, &[])[0];
        assert_eq!(f.family, Family::FormatError);
        assert!(
            f.text.contains("before the point of no return"),
            "{}",
            f.text
        );
        assert_eq!(f.signal, None);
    }

    #[test]
    fn enoent_tells_missing_file_from_missing_interpreter() {
        let events = [exec(7, 1, "./script", -2), exec(8, 2, "/nope", -2)];
        let facts = [FileFacts {
            path: "./script".into(),
            exists: true,
            elf: None,
        }];
        let f = explain(&events, &facts);
        assert_eq!(f[0].family, Family::MissingInterpreter);
        assert_eq!(f[1].family, Family::MissingFile);
    }

    #[test]
    fn other_errnos() {
        for (errno, family) in [
            (13, Family::Permission),
            (26, Family::TextBusy),
            (7, Family::TooBig),
            (80, Family::BadInterpreter),
            (9, Family::OtherError),
        ] {
            let f = &explain(&[exec(7, 1, "./x", -errno)], &[])[0];
            assert_eq!(f.family, family, "errno {errno}");
        }
    }

    #[test]
    fn user_crash_and_success() {
        let fault = [
            "__send_signal_locked",
            "force_sig_info_to_task",
            "force_sig_fault",
            "__bad_area_nosemaphore",
            "do_user_addr_fault",
            "exc_page_fault",
        ];
        let events = [
            exec(7, 1, "./crash", 0),
            signal(7, 2, 11, 1, &fault),
            end(7, 3, 11),
            exec(9, 4, "/bin/true", 0),
            end(9, 5, 0),
        ];
        let f = explain(&events, &[]);
        assert_eq!(f[0].family, Family::UserCrash);
        assert!(
            f[0].text.contains("SEGV_MAPERR) at address 0x1234"),
            "{}",
            f[0].text
        );
        assert_eq!(f[0].sender.as_deref(), Some("force_sig_fault"));
        assert_eq!(f[1].family, Family::Success);
        assert!(f[1].text.ends_with("exited with code 0."), "{}", f[1].text);
    }

    #[test]
    fn an_oom_kill_is_no_exec_failure() {
        // A memory cgroup's OOM kill of the program that allocated: the
        // signal's sender is the allocating task itself ("grow").
        let events = [
            exec(7, 1, "./grow", 0),
            signal(
                7,
                3,
                9,
                0,
                &[
                    "__send_signal_locked",
                    "do_send_sig_info",
                    "__oom_kill_process",
                    "oom_kill_process",
                ],
            ),
            end(7, 4, 9),
        ];
        let f = explain(&events, &[]);
        assert_eq!(f[0].family, Family::Killed);
        assert!(f[0].oom_killed() && !f[0].is_problem(), "{:?}", f[0]);
        assert!(
            f[0].text.contains("sent by the OOM killer"),
            "{}",
            f[0].text
        );
        // Killed by another process, it still is one.
        let events = [
            exec(7, 1, "./grow", 0),
            signal(7, 3, 9, 0, &["__send_signal_locked", "kill_something_info"]),
            end(7, 4, 9),
        ];
        assert!(explain(&events, &[])[0].is_problem());
    }

    #[test]
    fn the_window_is_per_exec() {
        // A shell's failed exec of a missing file, then its successful exec:
        // the crash after the second belongs to the second only.
        let events = [
            exec(7, 1, "/nope", -2),
            exec(7, 2, "./ok", 0),
            signal(7, 3, 9, 0, &["__send_signal_locked", "kill_something_info"]),
            end(7, 4, 9),
        ];
        let f = explain(&events, &[]);
        assert_eq!(f[0].family, Family::MissingFile);
        assert!(f[0].recovered && !f[0].is_problem());
        assert_eq!(f[1].family, Family::Killed);
    }
}
