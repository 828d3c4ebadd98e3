//! Who we run as, and acting for the user who invoked `sudo kdiag`.
//!
//! Under sudo, commands kdiag spawns for `-- CMD` run as the invoking user,
//! and files the user names are opened with their identity (`user_files`), so
//! a learner's files and processes stay theirs.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
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

/// Make `cmd` run as the invoking user, with that user's supplementary groups
/// (no-op without sudo).
pub fn run_as_invoker(cmd: &mut Command) {
    let Some(switch) = InvokerSwitch::prepare() else {
        return;
    };
    // SAFETY: `apply` only makes async-signal-safe calls on data prepared
    // before the fork. It sets groups, gid and uid itself: std runs pre_exec
    // hooks after its own setuid, when setgroups would fail with EPERM.
    unsafe { cmd.pre_exec(move || switch.apply()) };
}

/// Everything a forked child needs to become the invoking user, resolved
/// before the fork: initgroups reads /etc/group and allocates, which is not
/// safe between fork and exec.
#[derive(Debug, Clone)]
pub struct InvokerSwitch {
    who: Invoker,
    groups: Vec<libc::gid_t>,
}

impl InvokerSwitch {
    /// The switch to the sudo invoker; None without sudo.
    pub fn prepare() -> Option<InvokerSwitch> {
        let who = invoker()?;
        let groups = user_name(who.uid)
            .and_then(|n| CString::new(n).ok())
            .map(|name| group_list(&name, who.gid))
            .unwrap_or_default();
        Some(InvokerSwitch { who, groups })
    }

    /// The invoker's uid, gid and supplementary groups.
    pub fn identity(&self) -> (libc::uid_t, libc::gid_t, &[libc::gid_t]) {
        (self.who.uid, self.who.gid, &self.groups)
    }

    /// Take the invoker's groups, gid and uid, in that order (each step
    /// needs the privilege the next one drops). Async-signal-safe: meant for
    /// a forked child before it execs.
    pub fn apply(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on owned, initialised data.
        let failed = unsafe {
            libc::setgroups(self.groups.len(), self.groups.as_ptr()) != 0
                || libc::setgid(self.who.gid) != 0
                || libc::setuid(self.who.uid) != 0
        };
        if failed {
            // From errno alone: no allocation.
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The supplementary groups of user `name` (primary group `gid` included).
fn group_list(name: &CString, gid: libc::gid_t) -> Vec<libc::gid_t> {
    let mut groups = vec![0 as libc::gid_t; 64];
    loop {
        let mut n = groups.len() as libc::c_int;
        // SAFETY: groups has room for n entries; n is updated to the count.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n as usize);
            return groups;
        }
        groups.resize(n.max(groups.len() as libc::c_int * 2) as usize, 0);
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

/// The error for an operation that needs privileges we do not have (exit
/// code 3; see `crate::error`).
pub fn needs_privilege(what: &str) -> anyhow::Error {
    crate::error::needs_privilege(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }
}
