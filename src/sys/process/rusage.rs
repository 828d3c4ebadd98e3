//! Running a command for `kdiag time`: start it held (sys::spawn, under
//! the supervisor that kills whatever it leaves behind), point the signal
//! tracer at it, release it and wait for the supervisor's report of its
//! end: wait status, rusage and /proc/PID/io as it read at exit.

use std::ffi::OsString;
use std::io;
use std::time::Instant;

use crate::model::rusage::{CommandRun, Ending, IoBytes, Rusage};
use crate::sys::process::signal_origin::SignalTracer;
use crate::sys::process::spawn::{Forwarder, HeldChild};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// exec failed: the errno in words, as the shell would say it.
    #[error("cannot run '{program}': {}", describe(.source))]
    CannotStart { program: String, source: io::Error },
    #[error("waiting for the command: {0}")]
    Wait(io::Error),
}

impl RunError {
    /// The exit code for a command that could not run: 127 when it was not
    /// found, 126 when it was found but could not be executed (shell and
    /// GNU time conventions); 1 for our own failures.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::CannotStart { source, .. } if source.kind() == io::ErrorKind::NotFound => 127,
            RunError::CannotStart { .. } => 126,
            RunError::Wait(_) => 1,
        }
    }
}

/// The plain strerror text, without Rust's " (os error N)" suffix.
fn describe(err: &io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Run `argv` to completion (as the sudo invoker, if any) and measure it.
/// `tracer`, when given, was started before the spawn and tells who sent a
/// fatal signal.
pub fn run_command(
    argv: &[OsString],
    tracer: Option<&SignalTracer>,
) -> Result<CommandRun, RunError> {
    let cannot_start = |source| RunError::CannotStart {
        program: argv[0].to_string_lossy().into_owned(),
        source,
    };

    // Like GNU time, kdiag survives SIGINT/SIGQUIT/SIGTERM/SIGHUP and
    // reports how the command ended. The command runs in its own process
    // group (with the terminal, when kdiag had it): signals sent to kdiag
    // are passed on to that group. Handlers, not SIG_IGN, so the command
    // starts with default dispositions.
    let forwarder = Forwarder::catch().map_err(RunError::Wait)?;

    let start = Instant::now();
    // Held before its exec (HeldChild forks, never vforks: a vfork child
    // execs from kdiag's own mm, and the kernel would count kdiag's whole
    // RSS into the child's ru_maxrss). While it waits, point the signal
    // tracer at it; the supervisor has opened its /proc/PID/io already
    // (once the command is a zombie its /proc files belong to root).
    let mut child = HeldChild::spawn(argv).map_err(cannot_start)?;
    let pid = child.pid as libc::pid_t;
    if let Some(t) = tracer {
        t.target(pid);
    }
    child.release().map_err(RunError::Wait)?;
    if let Some(err) = child.exec_error().map_err(RunError::Wait)? {
        return Err(cannot_start(err)); // dropping the child reaps it
    }

    let ended = forwarder.wait(&mut child).map_err(RunError::Wait)?;
    let real_secs = ended.at.saturating_duration_since(start).as_secs_f64();
    let (io, io_error) = match ended.proc_io() {
        Some(text) => (Some(parse_proc_io(&text)), None),
        None => (None, Some(format!("/proc/{pid}/io could not be read"))),
    };
    let ending = ending(ended.status, pid, tracer);
    // Whatever the command left running is killed and reaped here.
    drop(child);

    Ok(CommandRun {
        command: argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        pid,
        real_secs,
        rusage: to_rusage(&ended.rusage),
        io,
        io_error,
        ending,
    })
}

fn ending(status: i32, pid: libc::pid_t, tracer: Option<&SignalTracer>) -> Ending {
    if libc::WIFEXITED(status) {
        return Ending::Exited {
            code: libc::WEXITSTATUS(status),
        };
    }
    let signal = libc::WTERMSIG(status);
    let origin = tracer.and_then(|t| t.origin(pid, signal));
    Ending::Signaled {
        signal,
        name: signal_name(signal),
        core_dumped: libc::WCOREDUMP(status),
        sent_by_kernel: origin.as_ref().and_then(|o| o.by_kernel(pid)),
        origin,
    }
}

fn to_rusage(ru: &libc::rusage) -> Rusage {
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Rusage {
        user_secs: secs(ru.ru_utime),
        sys_secs: secs(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss as u64,
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
        fs_inputs: ru.ru_inblock as u64,
        fs_outputs: ru.ru_oublock as u64,
    }
}

/// This process's own CPU seconds (user + system, its children not
/// included) and peak resident memory in KiB.
pub fn own_usage() -> (f64, u64) {
    // SAFETY: rusage is plain data the kernel fills in; a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_maxrss.max(0) as u64,
    )
}

/// A process's address-space limit (RLIMIT_AS, soft) in bytes; None when
/// unlimited or not readable (another user's process, without root).
pub fn address_space_limit(pid: libc::pid_t) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads only (new limit null); `lim` is a valid rlimit.
    let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_AS, std::ptr::null(), &mut lim) };
    (rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// Parse /proc/PID/io.
pub fn read_proc_io(pid: libc::pid_t) -> io::Result<IoBytes> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io"))?;
    Ok(parse_proc_io(&text))
}

fn parse_proc_io(text: &str) -> IoBytes {
    let mut io = IoBytes::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().parse().unwrap_or(0);
        match key {
            "rchar" => io.rchar = value,
            "wchar" => io.wchar = value,
            "syscr" => io.syscr = value,
            "syscw" => io.syscw = value,
            "read_bytes" => io.read_bytes = value,
            "write_bytes" => io.write_bytes = value,
            "cancelled_write_bytes" => io.cancelled_write_bytes = value,
            _ => {}
        }
    }
    io
}

pub use crate::model::signal::signal_name;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                    write_bytes: 8192\ncancelled_write_bytes: 512\n";
        let io = parse_proc_io(text);
        assert_eq!(
            (io.rchar, io.wchar, io.read_bytes, io.write_bytes),
            (10, 20, 4096, 8192)
        );
        assert_eq!(io.cancelled_write_bytes, 512);
        assert_eq!((io.syscr, io.syscw), (1, 2));
    }

    #[test]
    fn names_signals() {}

    #[test]
    fn missing_program_is_127() {
        let err = run_command(&["/nonexistent/kdiag-test".into()], None).unwrap_err();
        assert_eq!(err.exit_code(), 127);
        assert_eq!(
            err.to_string(),
            "cannot run '/nonexistent/kdiag-test': No such file or directory"
        );
    }
}
