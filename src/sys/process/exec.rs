//! The command's side of a spawn: the program resolved as execvp would,
//! and everything execve needs, prepared before the fork (between fork and
//! exec only async-signal-safe calls are allowed); then, in the forked
//! process, the wait on the gate, the switch to the invoker and the execve.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::privilege::{self, InvokerSwitch};

/// Exit code of a child whose execve failed (the shell's "not found").
pub(super) const EXEC_FAILED: i32 = 127;
/// Exit code of a child that could not become the invoking user.
const SWITCH_FAILED: i32 = 126;
/// `program` as execve will get it: as given when it has a '/', else the
/// first executable file in $PATH. Like execvp, a name found nowhere never
/// runs from the working directory: it fails on the first file of that name
/// in $PATH (EACCES, say), else on the first place it was looked for (ENOENT).
pub(super) fn resolve(program: &OsStr) -> PathBuf {
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

/// Whom a command runs as, when not the sudo invoker.
#[derive(Debug, Clone)]
pub struct Identity {
    /// None: kdiag's own user (who may not switch).
    pub switch: Option<InvokerSwitch>,
    /// Its whole environment.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// Everything the command's process needs, made before any fork: between
/// fork and exec only async-signal-safe calls are allowed.
pub(super) struct Exec {
    path: CString,
    _args: Vec<CString>,
    arg_ptrs: Vec<*const libc::c_char>,
    _env: Vec<CString>,
    env_ptrs: Vec<*const libc::c_char>,
    switch: Option<InvokerSwitch>,
    no_signals: libc::sigset_t,
}

impl Exec {
    /// As `identity` with only its environment when given, else as the
    /// sudo invoker with theirs.
    pub(super) fn prepare<S: AsRef<OsStr>>(
        path: &Path,
        argv: &[S],
        identity: Option<Identity>,
    ) -> io::Result<Exec> {
        let c_path = c_string(path.as_os_str().as_bytes())?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| c_string(a.as_ref().as_bytes()))
            .collect::<Result<_, _>>()?;
        let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());
        let (switch, env) = match identity {
            Some(i) => (i.switch, i.env),
            None => (
                InvokerSwitch::prepare(),
                privilege::child_env(super::fs_identity::runtime_dir),
            ),
        };
        let env: Vec<CString> = env
            .into_iter()
            .filter_map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
        env_ptrs.push(std::ptr::null());
        // SAFETY: sigset_t is plain data that sigemptyset initialises.
        let mut no_signals: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe { libc::sigemptyset(&mut no_signals) };
        Ok(Exec {
            path: c_path,
            _args: args,
            arg_ptrs,
            _env: env,
            env_ptrs,
            switch,
            no_signals,
        })
    }

    /// In the command's process (a child of `supervisor`): wait on the
    /// gate, become the invoker, restore default signal handling, execve;
    /// report a failure.
    ///
    /// # Safety
    /// Only in a forked child, with `gate`/`report` its ends of the pipes
    /// and `output` a descriptor for stdout and stderr, or -1.
    pub(super) unsafe fn run(&self, gate: i32, report: i32, output: i32, supervisor: i32) -> ! {
        // SAFETY: async-signal-safe calls on data prepared before the fork.
        unsafe {
            if output >= 0 {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::close(null);
                }
                libc::dup2(output, 1);
                libc::dup2(output, 2);
                libc::close(output);
            }
            // The supervisor ignores the terminal's signals; the command
            // starts with them as kdiag was started (the defaults, or
            // ignored under nohup) and no blocked signals, as std gives.
            for sig in super::supervisor::TERMINAL_SIGNALS {
                libc::signal(sig, super::supervisor::command_disposition(sig));
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.no_signals, std::ptr::null_mut());
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
            if let Some(switch) = &self.switch {
                if let Err(e) = switch.apply() {
                    report_errno(report, e.raw_os_error().unwrap_or(libc::EPERM));
                    libc::_exit(SWITCH_FAILED);
                }
                // Changing credentials cleared PDEATHSIG: ask again, and
                // do not run if the supervisor died meanwhile.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                if libc::getppid() != supervisor {
                    libc::_exit(EXEC_FAILED);
                }
            }
            libc::execve(
                self.path.as_ptr(),
                self.arg_ptrs.as_ptr(),
                self.env_ptrs.as_ptr(),
            );
            let errno = *libc::__errno_location();
            // Ignored again so a failure can be reported safely.
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            report_errno(report, errno);
            libc::_exit(EXEC_FAILED);
        }
    }
}

/// Tell the parent why the command could not start (async-signal-safe).
fn report_errno(fd: libc::c_int, errno: i32) {
    let bytes = errno.to_ne_bytes();
    // SAFETY: writing a local buffer; a pipe write this small is atomic.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}
