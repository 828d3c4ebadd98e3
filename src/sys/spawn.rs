//! Starting a command held before its exec, so tracing can attach to its
//! pid first: fork, wait on a pipe, then execve as the sudo invoker.
//!
//! std's `Command::spawn` waits for the exec to happen, so it cannot hold the
//! child; and its PATH search would add failed execs of its own to the trace.
//! Here the path is resolved first and execve is called exactly once.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// A forked child waiting for `release` before it calls execve.
pub struct HeldChild {
    pub pid: u32,
    /// The path passed to execve.
    pub path: String,
    gate: Option<std::os::fd::OwnedFd>,
    reaped: bool,
}

/// `program` as execve will get it: as given when it has a '/', else the
/// first executable file in $PATH (else as given, so execve reports ENOENT).
pub fn resolve(program: &str) -> String {
    if program.contains('/') {
        return program.to_string();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
        .map_or_else(|| program.to_string(), |p: PathBuf| p.display().to_string())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl HeldChild {
    /// Fork a child that will run `argv` once released.
    pub fn spawn(argv: &[String]) -> anyhow::Result<HeldChild> {
        let Some(program) = argv.first() else {
            bail!("no command given")
        };
        let path = resolve(program);
        let c_path = CString::new(path.as_bytes()).context("command contains a NUL byte")?;
        let c_args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .context("argument contains a NUL byte")?;
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
        let invoker = crate::sys::privilege::invoker();
        let user = invoker
            .and_then(|w| crate::sys::privilege::user_name(w.uid))
            .and_then(|n| CString::new(n).ok());

        let mut fds = [0; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("creating a pipe");
        }
        // SAFETY: the child only calls async-signal-safe functions on data
        // prepared above, then execs or _exits.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork");
        }
        if pid == 0 {
            unsafe {
                libc::close(fds[1]);
                let mut byte = 0u8;
                // EOF (kdiag gave up) means: do not run.
                if libc::read(fds[0], (&mut byte as *mut u8).cast(), 1) != 1 {
                    libc::_exit(127);
                }
                if let Some(who) = invoker {
                    let ok = match &user {
                        Some(name) => libc::initgroups(name.as_ptr(), who.gid) == 0,
                        None => libc::setgroups(0, std::ptr::null()) == 0,
                    };
                    if !ok || libc::setgid(who.gid) != 0 || libc::setuid(who.uid) != 0 {
                        libc::_exit(126);
                    }
                }
                libc::execve(c_path.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
                libc::_exit(127);
            }
        }
        // SAFETY: both descriptors are ours; the read end belongs to the child.
        unsafe { libc::close(fds[0]) };
        use std::os::fd::FromRawFd;
        Ok(HeldChild {
            pid: pid as u32,
            path,
            // SAFETY: fds[1] is an open descriptor we own.
            gate: Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) }),
            reaped: false,
        })
    }

    /// Let the child call execve.
    pub fn release(&mut self) -> anyhow::Result<()> {
        use std::io::Write;
        let gate = self.gate.take().context("child already released")?;
        std::fs::File::from(gate)
            .write_all(b"x")
            .context("releasing the command")
    }

    /// The wait status once the child has ended (non-blocking).
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.reaped {
            return None;
        }
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out pointer.
        let rc = unsafe { libc::waitpid(self.pid as i32, &mut status, libc::WNOHANG) };
        (rc == self.pid as i32).then(|| {
            self.reaped = true;
            status
        })
    }
}

impl Drop for HeldChild {
    /// A child never released is told to give up (the pipe closes) and reaped.
    fn drop(&mut self) {
        if self.gate.take().is_some() && !self.reaped {
            let mut status = 0;
            // SAFETY: waiting for our own child, which exits at once on EOF.
            unsafe { libc::waitpid(self.pid as i32, &mut status, 0) };
        }
    }
}
