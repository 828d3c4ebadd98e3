//! Running a command for `kdiag time`: start it held (sys::spawn), open its
//! /proc/PID/io, release it, wait for it to exit without reaping (waitid
//! WEXITED|WNOWAIT) so the counters can still be read, then reap it with
//! wait4 to get its rusage.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::io::Read;
use std::time::Instant;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

use crate::model::rusage::{CommandRun, Ending, IoBytes, Rusage};
use crate::sys::process::signal_origin::SignalTracer;
use crate::sys::process::spawn::HeldChild;

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

    // Like GNU time, survive the terminal's SIGINT/SIGQUIT (they reach the
    // child through the process group) and report; forward SIGTERM/SIGHUP,
    // which were meant for the measured command. Handlers, not SIG_IGN, so
    // the child starts with default dispositions.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP])
        .map_err(RunError::Wait)?;
    let handle = signals.handle();

    let start = Instant::now();
    // Held before its exec (HeldChild forks, never vforks: a vfork child
    // execs from kdiag's own mm, and the kernel would count kdiag's whole
    // RSS into the child's ru_maxrss). While it waits, point the signal
    // tracer at it and open /proc/PID/io: once the child is a zombie its
    // /proc files belong to root, so a normal user can only read them
    // through an fd opened while it lived, and a fast command could
    // otherwise win the race.
    let mut child = HeldChild::spawn(argv).map_err(cannot_start)?;
    let pid = child.pid as libc::pid_t;
    if let Some(t) = tracer {
        t.target(pid);
    }
    let io_file = File::open(format!("/proc/{pid}/io"));
    child.release().map_err(RunError::Wait)?;
    if let Some(err) = child.exec_error().map_err(RunError::Wait)? {
        return Err(cannot_start(err)); // dropping the child reaps it
    }

    let forwarder = std::thread::spawn(move || {
        for sig in signals.forever() {
            if sig == SIGTERM || sig == SIGHUP {
                // SAFETY: the child is not reaped while this thread runs
                // (the handle is closed before the reap), so pid is still ours.
                unsafe { libc::kill(pid, sig) };
            }
        }
    });

    let info = wait_exited_nowait(pid);
    let real_secs = start.elapsed().as_secs_f64();
    handle.close();
    let _ = forwarder.join();
    let info = info.map_err(RunError::Wait)?;

    // The child is a zombie now: its /proc entry and I/O counters remain.
    let io = match io_file {
        Ok(mut file) => {
            let mut text = String::new();
            file.read_to_string(&mut text).map(|_| parse_proc_io(&text))
        }
        Err(_) => read_proc_io(pid),
    };
    let (io, io_error) = match io {
        Ok(io) => (Some(io), None),
        Err(e) => (None, Some(format!("/proc/{pid}/io: {}", describe(&e)))),
    };
    let ending = ending(&info, pid, tracer);
    let (_, ru) = child.reap().map_err(RunError::Wait)?;

    Ok(CommandRun {
        command: argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        pid,
        real_secs,
        rusage: to_rusage(&ru),
        io,
        io_error,
        ending,
    })
}

/// The exit status of `pid` once it has exited, leaving it unreaped.
fn wait_exited_nowait(pid: libc::pid_t) -> io::Result<libc::siginfo_t> {
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return Ok(info);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn ending(info: &libc::siginfo_t, pid: libc::pid_t, tracer: Option<&SignalTracer>) -> Ending {
    // SAFETY: waitid filled a SIGCHLD siginfo, whose si_status is valid.
    let status = unsafe { info.si_status() };
    match info.si_code {
        libc::CLD_EXITED => Ending::Exited { code: status },
        code => {
            let origin = tracer.and_then(|t| t.origin(pid, status));
            Ending::Signaled {
                signal: status,
                name: signal_name(status),
                core_dumped: code == libc::CLD_DUMPED,
                sent_by_kernel: origin.as_ref().and_then(|o| o.by_kernel(pid)),
                origin,
            }
        }
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
