//! Starting a command held before its exec, so tracing can attach to its
//! pid first, under a supervisor so that it and everything it starts die
//! with kdiag (see `supervisor`): kdiag forks the supervisor, which forks
//! the command into its own process group (and cgroup, where v2 is
//! writable); the command waits on a pipe, then execs as the sudo invoker.
//!
//! std's `Command::spawn` waits for the exec to happen, so it cannot hold the
//! child; and its PATH search would add failed execs of its own to the trace.
//! Here the path is resolved first and execve is called exactly once. A
//! second, close-on-exec pipe tells the caller whether that execve worked:
//! EOF means it did, four bytes are the errno it failed with.
//!
//! The command's pid is the one kdiag reports and traces; its wait status
//! and rusage come from the supervisor, which reaps it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

pub use super::exec::Identity;
use super::exec::{Exec, resolve};
use super::supervisor::{self, Fds, Report};
use crate::sys::cgroup::CommandCgroup;

/// How long dropping a child waits for the supervisor to have killed and
/// reaped everything (it takes milliseconds unless a process is stuck in
/// the kernel).
const CLEANUP_WAIT: Duration = Duration::from_secs(5);

/// Stop a child of ours: SIGTERM, then SIGKILL once `grace` has passed.
/// `ended` polls it without blocking and reaps it when it has ended; it is
/// not called again once it said so. Returns when the child is reaped.
pub fn terminate(pid: u32, grace: Duration, mut ended: impl FnMut() -> bool) {
    for (sig, wait) in [(libc::SIGTERM, Some(grace)), (libc::SIGKILL, None)] {
        if ended() {
            return;
        }
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(pid as i32, sig) };
        let t = Instant::now();
        loop {
            if ended() {
                return;
            }
            if wait.is_some_and(|w| t.elapsed() > w) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// How to start a command.
#[derive(Debug, Clone)]
pub struct Options {
    /// Hand the terminal to the command while it runs (when kdiag has it in
    /// the foreground), so it can read it and Ctrl-C reaches it. Off for a
    /// workload running beside an interactive kdiag (the lab).
    pub foreground: bool,
    /// The command's stdout and stderr (its stdin then /dev/null): a
    /// descriptor the caller keeps open until `spawn_with` returns. None:
    /// kdiag's own.
    pub output: Option<RawFd>,
    /// None: as the sudo invoker (or kdiag's own user), with their
    /// environment.
    pub identity: Option<Identity>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            foreground: true,
            output: None,
            identity: None,
        }
    }
}

/// How the command ended, from the supervisor.
#[derive(Clone, Copy)]
pub struct Ended {
    /// The wait status.
    pub status: i32,
    pub rusage: libc::rusage,
    /// When the supervisor saw it end.
    pub at: Instant,
    report: Report,
}

impl Ended {
    /// /proc/PID/io as it read at the command's end (None if unreadable).
    pub fn proc_io(&self) -> Option<String> {
        self.report.io_text()
    }
}

/// A command waiting for `release` before it calls execve, under a
/// supervisor: dropping it kills the command and everything it started.
pub struct HeldChild {
    /// The command's pid (and process group).
    pub pid: u32,
    /// The path passed to execve.
    pub path: String,
    /// Write end of the gate: one byte releases the child, EOF dismisses it.
    gate: Option<OwnedFd>,
    /// Read end of the exec report pipe.
    report: Option<OwnedFd>,
    /// The supervisor's pid, until it is reaped.
    supervisor: Option<i32>,
    /// kdiag's end of the control pipe: closing it makes the supervisor
    /// kill everything and exit.
    control: Option<OwnedFd>,
    /// The supervisor's reports.
    events: File,
    ended: Option<Ended>,
    cgroup: Option<CommandCgroup>,
    /// Our process group, when the terminal was handed to the command.
    tty_owner: Option<i32>,
}

/// A pipe whose ends close on exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 returns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A connected pair of close-on-exec Unix stream sockets.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors socketpair returns.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Read one report from the supervisor; Ok(None) at EOF.
fn read_report(events: &mut File) -> io::Result<Option<Report>> {
    let mut buf = [0u8; size_of::<Report>()];
    let mut len = 0;
    while len < buf.len() {
        match events.read(&mut buf[len..]) {
            Ok(0) if len == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "short report from kdiag's supervisor",
                ));
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(Report::from_bytes(&buf)))
}

/// Whether `fd` has data within `timeout` (None: wait as long as needed).
fn readable(fd: &File, timeout: Option<Duration>) -> io::Result<bool> {
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl HeldChild {
    /// The supervisor's pid while it runs: the sender of the signals that
    /// stop the command.
    pub fn supervisor_pid(&self) -> Option<u32> {
        self.supervisor.map(|p| p as u32)
    }

    /// Start a supervisor and under it a command that will run `argv` (as
    /// the sudo invoker, if any) once released; it gets the terminal.
    pub fn spawn<S: AsRef<OsStr>>(argv: &[S]) -> io::Result<HeldChild> {
        Self::spawn_with(argv, Options::default())
    }

    /// `spawn` with options.
    pub fn spawn_with<S: AsRef<OsStr>>(argv: &[S], options: Options) -> io::Result<HeldChild> {
        let Some(program) = argv.first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no command given",
            ));
        };
        let path = resolve(program.as_ref());
        let exec = Exec::prepare(&path, argv, options.identity)?;
        let cgroup = CommandCgroup::create();
        let (gate_r, gate_w) = socket_pair()?;
        let (report_r, report_w) = pipe()?;
        let (events_r, events_w) = pipe()?;
        // A socket, like the gate: a supervisor already gone gives EPIPE,
        // not a SIGPIPE that kills kdiag.
        let (control_r, control_w) = socket_pair()?;
        let fds = Fds {
            events: events_w.as_raw_fd(),
            control: control_r.as_raw_fd(),
            for_child: [
                gate_r.as_raw_fd(),
                report_w.as_raw_fd(),
                options.output.unwrap_or(-1),
            ],
            cgroup: cgroup
                .as_ref()
                .map(|c| (c.procs.as_raw_fd(), c.kill.as_raw_fd(), c.dir_c.as_ptr())),
        };
        let (gate, report, output) = (
            gate_r.as_raw_fd(),
            report_w.as_raw_fd(),
            options.output.unwrap_or(-1),
        );
        // SAFETY: getpid has no preconditions.
        let kdiag = unsafe { libc::getpid() };
        // SAFETY: the supervisor only makes async-signal-safe calls on data
        // prepared above (see `supervisor`), and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: in the fresh fork, with its descriptors.
            unsafe { supervisor::supervise(kdiag, fds, |s| exec.run(gate, report, output, s)) }
        }
        // The other processes' ends: closed here so EOFs reach each side.
        drop((gate_r, report_w, events_w, control_r));
        let mut child = HeldChild {
            pid: 0,
            path: path.display().to_string(),
            gate: Some(gate_w),
            report: Some(report_r),
            supervisor: Some(pid),
            control: Some(control_w),
            events: File::from(events_r),
            ended: None,
            cgroup,
            tty_owner: None,
        };
        match read_report(&mut child.events)? {
            Some(r) if r.kind == supervisor::STARTED => child.pid = r.pid as u32,
            Some(r) if r.kind == supervisor::FORK_FAILED => {
                return Err(io::Error::from_raw_os_error(r.errno));
            }
            _ => return Err(io::Error::other("kdiag's supervisor failed to start")),
        }
        if options.foreground {
            child.take_terminal();
        }
        Ok(child)
    }

    /// Make the command's group the terminal's foreground group, when
    /// kdiag's is: then it can read the terminal, and Ctrl-C reaches it.
    fn take_terminal(&mut self) {
        // SAFETY: plain queries and tcsetpgrp on stdin.
        unsafe {
            let ours = libc::getpgrp();
            if libc::isatty(0) == 1
                && libc::tcgetpgrp(0) == ours
                && libc::tcsetpgrp(0, self.pid as i32) == 0
            {
                self.tty_owner = Some(ours);
            }
        }
    }

    /// Take the terminal back (kdiag is then a background group: SIGTTOU
    /// is blocked for the call, as shells do).
    fn give_back_terminal(&mut self) {
        let Some(ours) = self.tty_owner.take() else {
            return;
        };
        // SAFETY: sigset manipulation on locals; tcsetpgrp on stdin.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            libc::tcsetpgrp(0, ours);
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }

    /// Let the child call execve. A child killed while held (by someone
    /// else) is not an error here: its end is reported like any other.
    pub fn release(&mut self) -> io::Result<()> {
        let gate = self
            .gate
            .take()
            .ok_or_else(|| io::Error::other("the command was already released"))?;
        // A socket, so a dead reader gives EPIPE, not a SIGPIPE that kills
        // kdiag (whose SIGPIPE is the default).
        let byte = b'x';
        loop {
            // SAFETY: one byte from a local to our socket.
            let n = unsafe {
                libc::send(
                    gate.as_raw_fd(),
                    (&raw const byte).cast(),
                    1,
                    libc::MSG_NOSIGNAL,
                )
            };
            if n == 1 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EPIPE | libc::ECONNRESET) => return Ok(()),
                _ => return Err(e),
            }
        }
    }

    /// After `release`, wait until the command runs (None) or could not be
    /// started: Some(the errno of its execve, or of the switch to the
    /// invoking user). The child then exits with 127 (126 if the switch
    /// failed).
    pub fn exec_error(&mut self) -> io::Result<Option<io::Error>> {
        if self.gate.is_some() {
            return Err(io::Error::other("the command was not released"));
        }
        let report = self
            .report
            .take()
            .ok_or_else(|| io::Error::other("the exec report was already read"))?;
        let mut file = File::from(report);
        let mut buf = [0u8; size_of::<i32>()];
        let mut len = 0;
        while len < buf.len() {
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        match len {
            0 => Ok(None),
            4 => Ok(Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)))),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "short exec report from the command",
            )),
        }
    }

    /// Send `sig` to the command's process group (what the terminal would
    /// do), unless it has ended. Its other descendants are not signalled.
    pub fn signal_group(&self, sig: i32) {
        if self.ended.is_none() {
            // SAFETY: the group the command leads; the supervisor has not
            // reported it reaped, so its pid is not reused.
            unsafe { libc::kill(-(self.pid as i32), sig) };
        }
    }

    /// Stop the command and everything it started: SIGTERM to its group and
    /// the processes re-parented to the supervisor, then SIGKILL to all of
    /// them once `grace` has passed; returns when all are reaped.
    pub fn stop(&mut self, grace: Duration) {
        if self.ended.is_none() {
            self.control_byte(supervisor::TERMINATE);
            let t = Instant::now();
            while self.ended.is_none() && t.elapsed() < grace {
                let left = grace.saturating_sub(t.elapsed());
                if self.wait_report(Some(left)).is_err() {
                    break;
                }
            }
        }
        self.shut_down();
    }

    /// Tell the supervisor to kill everything, wait for it to finish.
    fn shut_down(&mut self) {
        self.control_byte(supervisor::KILL);
        self.control = None;
        while self.ended.is_none() {
            match self.wait_report(None) {
                Ok(true) => {}
                _ => break,
            }
        }
        self.give_back_terminal();
        self.reap_supervisor();
    }

    fn control_byte(&mut self, byte: u8) {
        if let Some(c) = &self.control {
            // SAFETY: one byte to our end of the socket. A failure means the
            // supervisor has gone: nothing to tell.
            unsafe {
                libc::send(
                    c.as_raw_fd(),
                    (&raw const byte).cast(),
                    1,
                    libc::MSG_NOSIGNAL,
                )
            };
        }
    }

    /// Read the supervisor's next report, within `timeout`. Ok(false) when
    /// there was none in time or the supervisor has gone.
    fn wait_report(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if !readable(&self.events, timeout)? {
            return Ok(false);
        }
        match read_report(&mut self.events)? {
            Some(r) if r.kind == supervisor::ENDED => {
                let at = Instant::now()
                    .checked_sub(Duration::from_nanos(
                        crate::sys::monotonic_ns().saturating_sub(r.ended_ns),
                    ))
                    .unwrap_or_else(Instant::now);
                self.ended = Some(Ended {
                    status: r.status,
                    rusage: r.rusage,
                    at,
                    report: r,
                });
                self.give_back_terminal();
                Ok(true)
            }
            Some(_) => Ok(true),
            None => Ok(false),
        }
    }

    /// The wait status once the child has ended (non-blocking).
    pub fn try_wait(&mut self) -> Option<i32> {
        self.try_reap().ok().flatten().map(|(status, _)| status)
    }

    /// The command's wait status and resource usage if it has ended
    /// (non-blocking). Asked again, the same answer.
    pub fn try_reap(&mut self) -> io::Result<Option<(i32, libc::rusage)>> {
        if self.ended.is_none() {
            self.wait_report(Some(Duration::ZERO))?;
        }
        Ok(self.ended.map(|e| (e.status, e.rusage)))
    }

    /// Wait for the command to end: its wait status and resource usage
    /// (children it waited for included).
    pub fn reap(&mut self) -> io::Result<(i32, libc::rusage)> {
        self.wait_ended()?
            .map(|e| (e.status, e.rusage))
            .ok_or_else(|| {
                io::Error::other("kdiag's supervisor ended without the command's status")
            })
    }

    /// Wait for the command to end: everything the supervisor saw of it.
    pub fn wait_ended(&mut self) -> io::Result<Option<Ended>> {
        while self.ended.is_none() {
            if !self.wait_report(None)? {
                break;
            }
        }
        Ok(self.ended)
    }

    /// How the command ended, if it has.
    pub fn ended(&self) -> Option<&Ended> {
        self.ended.as_ref()
    }

    /// Reap the supervisor (within CLEANUP_WAIT); if it died abnormally,
    /// do its last job: kill the command's group and cgroup.
    fn reap_supervisor(&mut self) {
        let Some(pid) = self.supervisor else {
            return;
        };
        let t = Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: our own child, not yet reaped.
            let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if rc == pid
                || (rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
            {
                break;
            }
            if t.elapsed() > CLEANUP_WAIT {
                // Stuck (a process in uninterruptible sleep): it finishes
                // on its own; init reaps it after kdiag is gone.
                self.supervisor = None;
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.supervisor = None;
        let clean = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if !clean {
            // SAFETY: the command's group, if anything of it is left.
            unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
        }
        if let Some(c) = &self.cgroup {
            c.kill_and_remove();
        }
    }
}

/// Signals sent to kdiag while a command runs to its end, passed on to the
/// command's process group, as GNU time does: kdiag survives them and
/// reports the command's own status (`time`, `workload run`). Caught before
/// the spawn so none is missed.
pub struct Forwarder {
    /// The last signal caught and not yet passed on (0: none).
    pending: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ids: Vec<signal_hook::SigId>,
}

impl Forwarder {
    /// Catch SIGINT, SIGQUIT, SIGTERM and SIGHUP from now on.
    pub fn catch() -> io::Result<Forwarder> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let pending = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ids = [SIGINT, SIGQUIT, SIGTERM, SIGHUP]
            .into_iter()
            .map(|sig| {
                signal_hook::flag::register_usize(
                    sig,
                    std::sync::Arc::clone(&pending),
                    sig as usize,
                )
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Forwarder { pending, ids })
    }

    /// Wait for `child` to end, passing signals on to its group meanwhile
    /// (within 50 ms). A flag, not signal-hook's iterator: its wake-up
    /// write to a socket whose reader had gone raised SIGPIPE in kdiag.
    pub fn wait(self, child: &mut HeldChild) -> io::Result<Ended> {
        let group = child.pid as i32;
        while child.ended.is_none() {
            let sig = self.pending.swap(0, std::sync::atomic::Ordering::SeqCst);
            if sig != 0 {
                // SAFETY: the group the command leads, which has not been
                // reported ended.
                unsafe { libc::kill(-group, sig as i32) };
            }
            // A report, or EOF: the supervisor has gone without one.
            if readable(&child.events, Some(Duration::from_millis(50)))?
                && !child.wait_report(Some(Duration::ZERO))?
            {
                break;
            }
        }
        child
            .ended
            .ok_or_else(|| io::Error::other("the command's end was not reported"))
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl Drop for HeldChild {
    /// A child never released is told to give up (the gate closes); then
    /// the supervisor kills whatever is left and reaps it all.
    fn drop(&mut self) {
        self.gate = None;
        if self.supervisor.is_some() {
            self.shut_down();
        }
        self.give_back_terminal();
    }
}

#[cfg(test)]
mod tests {
    use super::super::exec::EXEC_FAILED;
    use super::*;
    use std::path::Path;

    fn exit_code(status: i32) -> Option<i32> {
        libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
    }

    #[test]
    fn terminate_kills_what_ignores_sigterm() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; while :; do sleep 0.05; done"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100)); // let the trap be set
        let t = Instant::now();
        terminate(child.id(), Duration::from_millis(200), || {
            child.try_wait().unwrap().is_some()
        });
        let status = child.try_wait().unwrap().expect("reaped");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(t.elapsed() >= Duration::from_millis(200));
    }

    #[test]
    fn holds_until_released_then_runs() {
        let mut child = HeldChild::spawn(&["sh", "-c", "exit 3"]).unwrap();
        assert!(child.path.ends_with("/sh"), "{}", child.path);
        // Held: still this test binary, not yet sh.
        let exe = std::fs::read_link(format!("/proc/{}/exe", child.pid)).unwrap();
        assert_eq!(exe, std::env::current_exe().unwrap());
        child.release().unwrap();
        assert!(child.exec_error().unwrap().is_none());
        let (status, _) = child.reap().unwrap();
        assert_eq!(exit_code(status), Some(3));
    }

    #[test]
    fn a_failed_exec_reports_its_errno_and_exits_127() {
        let mut child = HeldChild::spawn(&["kdiag-no-such-command"]).unwrap();
        assert!(
            child.path.ends_with("/kdiag-no-such-command"),
            "{}",
            child.path
        );
        child.release().unwrap();
        let err = child.exec_error().unwrap().expect("exec must fail");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let (status, _) = child.reap().unwrap();
        assert_eq!(exit_code(status), Some(EXEC_FAILED));

        let mut child = HeldChild::spawn(&["/dev/null"]).unwrap();
        child.release().unwrap();
        let err = child.exec_error().unwrap().expect("exec must fail");
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn a_child_never_released_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("ran");
        let script = format!("touch {}", mark.display());
        let child = HeldChild::spawn(&["sh", "-c", &script]).unwrap();
        let pid = child.pid;
        drop(child);
        // Reaped by drop, and it never ran the command.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(!mark.exists());
    }

    fn ignores_sigpipe(status: &str) -> bool {
        let line = status.lines().find(|l| l.starts_with("SigIgn:")).unwrap();
        let mask = u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap();
        mask & (1 << (libc::SIGPIPE - 1)) != 0
    }

    #[test]
    fn the_command_gets_the_default_sigpipe() {
        // Rust programs, this test harness included, ignore SIGPIPE.
        let ours = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(
            ignores_sigpipe(&ours),
            "premise: the harness ignores SIGPIPE"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("status");
        let script = format!("cat /proc/self/status > {}", out.display());
        let mut child = HeldChild::spawn(&["sh", "-c", &script]).unwrap();
        child.release().unwrap();
        assert!(child.exec_error().unwrap().is_none());
        let (status, _) = child.reap().unwrap();
        assert_eq!(exit_code(status), Some(0));
        let theirs = std::fs::read_to_string(&out).unwrap();
        assert!(!ignores_sigpipe(&theirs), "{theirs}");
    }

    /// Live (not zombie) processes whose command line contains `marker`.
    fn alive_with(marker: &str) -> Vec<u32> {
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let zombie = std::fs::read(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|b| crate::sys::procfs::parse::stat(&b))
                .is_some_and(|st| st.state == 'Z');
            if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
                found.push(pid);
            }
        }
        found
    }

    /// A shell with a pipeline, a background job and a setsid'd pair, each
    /// process named by `marker` (a sleep length unique to the test).
    fn tree(marker: &str) -> Vec<String> {
        let script = format!(
            "trap '' TERM; sleep {marker} | cat & setsid sh -c 'sleep {marker} & sleep {marker}' & \
             sleep {marker}; wait"
        );
        vec!["sh".into(), "-c".into(), script]
    }

    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let t = Instant::now();
        while !cond() {
            assert!(t.elapsed() < Duration::from_secs(5), "waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn dropping_the_child_kills_its_whole_tree() {
        let marker = format!("7{}.1", std::process::id());
        let mut child = HeldChild::spawn(&tree(&marker)).unwrap();
        child.release().unwrap();
        assert!(child.exec_error().unwrap().is_none());
        // 4 sleeps (one setsid'd with its own child) and the shell's script.
        wait_until("the tree", || alive_with(&marker).len() >= 5);
        drop(child);
        assert_eq!(alive_with(&marker), Vec::<u32>::new());
    }

    #[test]
    fn stop_ends_a_tree_that_ignores_sigterm() {
        let marker = format!("7{}.2", std::process::id());
        let mut child = HeldChild::spawn(&tree(&marker)).unwrap();
        child.release().unwrap();
        assert!(child.exec_error().unwrap().is_none());
        wait_until("the tree", || alive_with(&marker).len() >= 5);
        let t = Instant::now();
        child.stop(Duration::from_millis(300));
        assert!(t.elapsed() >= Duration::from_millis(300));
        let (status, _) = child.reap().unwrap();
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
        assert_eq!(alive_with(&marker), Vec::<u32>::new());
    }

    #[test]
    fn the_command_ending_reports_its_status_and_io() {
        let mut child =
            HeldChild::spawn(&["sh", "-c", "head -c 100000 /dev/zero > /dev/null; exit 7"])
                .unwrap();
        child.release().unwrap();
        assert!(child.exec_error().unwrap().is_none());
        let ended = child.wait_ended().unwrap().unwrap();
        assert_eq!(exit_code(ended.status), Some(7));
        let io = ended.proc_io().expect("/proc/PID/io read at exit");
        let rchar: u64 = io
            .lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(rchar >= 100_000, "{io}");
        // Asked again: the same answer.
        assert_eq!(child.try_wait(), Some(ended.status));
    }

    #[test]
    fn nul_bytes_are_refused() {
        let err = HeldChild::spawn(&["sh", "-c", "a\0b"]).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
