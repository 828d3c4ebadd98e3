//! Starting a command held before its exec, so tracing can attach to its
//! pid first: fork, wait on a pipe, then execve as the sudo invoker.
//!
//! std's `Command::spawn` waits for the exec to happen, so it cannot hold the
//! child; and its PATH search would add failed execs of its own to the trace.
//! Here the path is resolved first and execve is called exactly once. A
//! second, close-on-exec pipe tells the caller whether that execve worked:
//! EOF means it did, four bytes are the errno it failed with.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys::process::privilege::InvokerSwitch;

/// Exit code of a child whose execve failed (the shell's "not found").
const EXEC_FAILED: i32 = 127;
/// Exit code of a child that could not become the invoking user.
const SWITCH_FAILED: i32 = 126;

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

/// After SIGKILL, how long `stop` waits for a process group to be gone
/// (killed processes in D state take a moment; a zombie whose parent is
/// outside the group may never go).
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Stop a process group: SIGTERM to every member, SIGKILL once `grace` has
/// passed, then wait (bounded) until no member is left. `reap` is called
/// while waiting to collect members that are our children (a group member
/// that is a zombie still counts as a member until reaped).
pub fn terminate_group(pgid: i32, grace: Duration, mut reap: impl FnMut()) {
    for (sig, wait) in [(libc::SIGTERM, grace), (libc::SIGKILL, KILL_WAIT)] {
        reap();
        if group_gone(pgid) {
            return;
        }
        // SAFETY: signalling the process group of a child we started.
        unsafe { libc::kill(-pgid, sig) };
        let t = Instant::now();
        loop {
            reap();
            if group_gone(pgid) {
                return;
            }
            if t.elapsed() > wait {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn group_gone(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    unsafe { libc::kill(-pgid, 0) != 0 && *libc::__errno_location() == libc::ESRCH }
}

/// Make this process the child subreaper of its descendants: orphans of a
/// command it started become its children (so they can be seen and reaped)
/// instead of init's.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A forked child waiting for `release` before it calls execve.
pub struct HeldChild {
    pub pid: u32,
    /// The path passed to execve.
    pub path: String,
    /// Write end of the gate: one byte releases the child, EOF dismisses it.
    gate: Option<OwnedFd>,
    /// Read end of the exec report pipe.
    report: Option<OwnedFd>,
    /// The child reported a failed exec, so it is exiting.
    exec_failed: bool,
    /// Leader of its own process group (`spawn_group`): `stop` stops the
    /// whole group.
    group: bool,
    /// Its wait status once reaped.
    status: Option<i32>,
    reaped: bool,
}

/// `program` as execve will get it: as given when it has a '/', else the
/// first executable file in $PATH. Like execvp, a name found nowhere never
/// runs from the working directory: it fails on the first file of that name
/// in $PATH (EACCES, say), else on the first place it was looked for (ENOENT).
fn resolve(program: &OsStr) -> PathBuf {
    if program.as_bytes().contains(&b'/') {
        return program.into();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    let candidates: Vec<PathBuf> = std::env::split_paths(&path)
        .map(|d| d.join(program))
        .collect();
    let found = candidates.iter().find(|p| is_executable(p));
    let present = || candidates.iter().find(|p| p.exists());
    found
        .or_else(present)
        .or(candidates.first())
        .cloned()
        .unwrap_or_else(|| program.into())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the command contains a NUL byte",
        )
    })
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

impl HeldChild {
    /// Fork a child that will run `argv` (as the sudo invoker, if any) once
    /// released.
    pub fn spawn<S: AsRef<OsStr>>(argv: &[S]) -> io::Result<HeldChild> {
        Self::spawn_with(argv, false)
    }

    /// The same, the child leading a process group of its own, so that
    /// `stop` stops everything it starts that stays in its group (a shell
    /// pipeline, worker processes). It is then not in the terminal's
    /// foreground group: reading from the terminal would stop it.
    pub fn spawn_group<S: AsRef<OsStr>>(argv: &[S]) -> io::Result<HeldChild> {
        Self::spawn_with(argv, true)
    }

    fn spawn_with<S: AsRef<OsStr>>(argv: &[S], group: bool) -> io::Result<HeldChild> {
        let Some(program) = argv.first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no command given",
            ));
        };
        // Everything the child needs is prepared here: between fork and
        // exec only async-signal-safe calls are allowed.
        let path = resolve(program.as_ref());
        let c_path = c_string(path.as_os_str().as_bytes())?;
        let c_args: Vec<CString> = argv
            .iter()
            .map(|a| c_string(a.as_ref().as_bytes()))
            .collect::<Result<_, _>>()?;
        let mut arg_ptrs: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());
        let c_env: Vec<CString> = std::env::vars_os()
            .filter_map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        let mut env_ptrs: Vec<*const libc::c_char> = c_env.iter().map(|a| a.as_ptr()).collect();
        env_ptrs.push(std::ptr::null());
        let switch = InvokerSwitch::prepare();
        // SAFETY: sigset_t is plain data that sigemptyset initialises.
        let mut no_signals: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe { libc::sigemptyset(&mut no_signals) };

        let (gate_r, gate_w) = pipe()?;
        let (report_r, report_w) = pipe()?;
        // SAFETY: the child only calls async-signal-safe functions on data
        // prepared above, then execs or _exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            use std::os::fd::AsRawFd;
            let (gate, report) = (gate_r.as_raw_fd(), report_w.as_raw_fd());
            // SAFETY: raw calls on descriptors this process owns; the child
            // never returns from this block.
            unsafe {
                libc::close(gate_w.as_raw_fd());
                libc::close(report_r.as_raw_fd());
                if group {
                    libc::setpgid(0, 0);
                }
                // Like std: the command starts with no blocked signals.
                libc::pthread_sigmask(libc::SIG_SETMASK, &no_signals, std::ptr::null_mut());
                let mut byte = 0u8;
                let n = loop {
                    let n = libc::read(gate, (&raw mut byte).cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break n;
                    }
                };
                // EOF (kdiag gave up) means: do not run.
                if n != 1 {
                    libc::_exit(EXEC_FAILED);
                }
                if let Some(switch) = &switch
                    && let Err(e) = switch.apply()
                {
                    report_errno(report, e.raw_os_error().unwrap_or(libc::EPERM));
                    libc::_exit(SWITCH_FAILED);
                }
                // Rust ignores SIGPIPE; the command must get the default, as
                // std gives it. Ignored again to report a failure safely.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::execve(c_path.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
                let errno = *libc::__errno_location();
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                report_errno(report, errno);
                libc::_exit(EXEC_FAILED);
            }
        }
        // The child's ends: closed here so EOFs reach each side.
        drop((gate_r, report_w));
        if group {
            // Both sides, so the group exists whichever runs first.
            // SAFETY: setpgid on our own child, before it execs.
            unsafe { libc::setpgid(pid, pid) };
        }
        Ok(HeldChild {
            pid: pid as u32,
            path: path.display().to_string(),
            gate: Some(gate_w),
            report: Some(report_r),
            exec_failed: false,
            group,
            status: None,
            reaped: false,
        })
    }

    /// Let the child call execve.
    pub fn release(&mut self) -> io::Result<()> {
        let gate = self
            .gate
            .take()
            .ok_or_else(|| io::Error::other("the command was already released"))?;
        File::from(gate).write_all(b"x")
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
            4 => {
                self.exec_failed = true;
                Ok(Some(io::Error::from_raw_os_error(i32::from_ne_bytes(buf))))
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "short exec report from the command",
            )),
        }
    }

    /// Stop the command (see `terminate`) unless it was already reaped;
    /// with its own process group, every process left in the group
    /// (`terminate_group`), each reaped when it is our child.
    pub fn stop(&mut self, grace: Duration) {
        if self.group {
            let pgid = self.pid as i32;
            terminate_group(pgid, grace, || self.reap_group());
            return;
        }
        if self.reaped {
            return;
        }
        let pid = self.pid;
        terminate(pid, grace, || self.try_wait().is_some());
    }

    /// Reap every ended child in the command's process group: the command
    /// itself, and orphans of its group re-parented to us as subreaper.
    fn reap_group(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waiting for our own children in the group we created.
            let rc = unsafe { libc::waitpid(-(self.pid as i32), &mut status, libc::WNOHANG) };
            if rc <= 0 {
                return;
            }
            if rc == self.pid as i32 {
                self.reaped = true;
                self.status = Some(status);
            }
        }
    }

    /// The wait status once the child has ended (non-blocking); the same
    /// status again once it was reaped.
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.reaped {
            return self.status;
        }
        self.try_reap().ok().flatten().map(|(status, _)| status)
    }

    /// Reap the child if it has ended (non-blocking): its wait status and
    /// resource usage.
    pub fn try_reap(&mut self) -> io::Result<Option<(i32, libc::rusage)>> {
        self.wait4(libc::WNOHANG)
    }

    /// Wait for the child to end and reap it: its wait status and resource
    /// usage (children it waited for included).
    pub fn reap(&mut self) -> io::Result<(i32, libc::rusage)> {
        self.wait4(0)?
            .ok_or_else(|| io::Error::other("wait4 returned without a child"))
    }

    fn wait4(&mut self, flags: i32) -> io::Result<Option<(i32, libc::rusage)>> {
        if self.reaped {
            return Err(io::Error::other("the command was already reaped"));
        }
        loop {
            let mut status = 0;
            // SAFETY: rusage is plain data that wait4 fills; pid is our
            // child, not reaped yet.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let rc = unsafe { libc::wait4(self.pid as i32, &mut status, flags, &mut ru) };
            if rc == self.pid as i32 {
                self.reaped = true;
                self.status = Some(status);
                return Ok(Some((status, ru)));
            }
            if rc == 0 {
                return Ok(None);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

/// Tell the parent why the command could not start (async-signal-safe).
fn report_errno(fd: libc::c_int, errno: i32) {
    let bytes = errno.to_ne_bytes();
    // SAFETY: writing a local buffer; a pipe write this small is atomic.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

impl Drop for HeldChild {
    /// A child never released is told to give up (the gate closes) and
    /// reaped, as is one whose exec failed; both exit at once.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if self.gate.take().is_some() || self.exec_failed {
            let _ = self.reap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn stopping_a_group_stops_what_the_command_started() {
        // A pipeline whose members ignore SIGTERM, and whose shell exits
        // first (its children are orphans, re-parented to init here).
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        let script = format!(
            "trap '' TERM; (trap '' TERM; yes) | (trap '' TERM; cat > /dev/null) & \
             echo $! > {}; sleep 30",
            pids.display()
        );
        let mut child = HeldChild::spawn_group(&["sh", "-c", &script]).unwrap();
        child.release().unwrap();
        assert!(child.exec_error().unwrap().is_none());
        let t = Instant::now();
        while !pids.exists() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        let pgid = child.pid as i32;
        assert!(!group_gone(pgid));
        child.stop(Duration::from_millis(200));
        assert!(group_gone(pgid), "a member of the group survived");
        assert!(child.try_wait().is_some(), "the command itself was reaped");
        // SAFETY: checking a PID that is gone.
        assert_eq!(unsafe { libc::getpgid(pgid) }, -1);
    }

    #[test]
    fn nul_bytes_are_refused() {
        let err = HeldChild::spawn(&["sh", "-c", "a\0b"]).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
