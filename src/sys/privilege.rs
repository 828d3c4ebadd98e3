//! Who we run as, and acting for the user who invoked `sudo kdiag`.
//!
//! Under sudo, files kdiag writes belong to the invoking user and commands it
//! spawns for `-- CMD` run as that user, so a learner's files and processes stay
//! theirs.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The user behind `sudo`, when kdiag runs as root through sudo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invoker {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// True when the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The invoking user from SUDO_UID / SUDO_GID, if we are root through sudo and
/// that user is not root itself.
pub fn invoker() -> Option<Invoker> {
    if !is_root() {
        return None;
    }
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    (uid != 0).then_some(Invoker { uid, gid })
}

/// Give a file kdiag wrote to the invoking user (no-op without sudo).
pub fn chown_to_invoker(path: &Path) -> std::io::Result<()> {
    match invoker() {
        Some(who) => std::os::unix::fs::chown(path, Some(who.uid), Some(who.gid)),
        None => Ok(()),
    }
}

/// Make `cmd` run as the invoking user, with that user's supplementary groups
/// (no-op without sudo).
pub fn run_as_invoker(cmd: &mut Command) {
    let Some(who) = invoker() else { return };
    let name = user_name(who.uid).and_then(|n| CString::new(n).ok());
    // The ids are dropped here rather than with `Command::uid/gid`: std
    // switches uid before running pre_exec closures, and initgroups needs
    // root, so it must come first.
    // SAFETY: the closure runs between fork and exec and only calls
    // async-signal-safe functions on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let ok = match &name {
                Some(name) => libc::initgroups(name.as_ptr(), who.gid) == 0,
                None => libc::setgroups(0, std::ptr::null()) == 0,
            };
            if !ok || libc::setgid(who.gid) != 0 || libc::setuid(who.uid) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The login name of `uid` from the password database.
pub fn user_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the duration of the call and buf's
    // length is passed along.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points to a NUL-terminated string inside buf.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The error for an operation that needs privileges we do not have.
pub fn needs_privilege(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} needs root, or CAP_PERFMON and CAP_BPF: run it with sudo \
         (sudo kdiag ...), or see `kdiag doctor` for what this machine allows"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }
}
