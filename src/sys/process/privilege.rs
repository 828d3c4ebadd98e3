//! Who we run as, and acting for the user who invoked `sudo kdiag`.
//!
//! Under sudo, commands kdiag spawns for `-- CMD` run as the invoking user,
//! and files the user names are opened with their identity (`fs_identity`,
//! for `crate::user_files`), so a learner's files and processes stay theirs.

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

/// Whether this process may trace by itself: CAP_BPF and CAP_PERFMON in
/// its effective set (root has them; a user given them by the
/// administrator needs no service).
pub fn can_trace() -> bool {
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3: two Data
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget fills two Data for version 3.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    let has = |cap: u32| data[(cap / 32) as usize].effective & (1 << (cap % 32)) != 0;
    rc == 0 && has(CAP_PERFMON) && has(CAP_BPF)
}

/// Set by `kdiag serve` in the kdiag it runs for a caller: that run is a
/// learner's unless they administer the machine, course or not. Under sudo
/// a learner could only set it to narrow what they see.
pub const SERVED: &str = "KDIAG_SERVED";

/// Whether this kdiag was started by `kdiag serve` for a caller.
pub fn served() -> bool {
    std::env::var_os(SERVED).is_some()
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
/// and environment (`child_env`) (no-op without sudo).
pub fn run_as_invoker(cmd: &mut Command) {
    let Some(switch) = InvokerSwitch::prepare() else {
        return;
    };
    cmd.env_clear().envs(child_env(|| None));
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

    /// A switch to another identity than the invoker's: a process's own
    /// (a program run as its owner, as jcmd must to attach to a JVM).
    pub fn to(uid: libc::uid_t, gid: libc::gid_t, groups: Vec<libc::gid_t>) -> InvokerSwitch {
        InvokerSwitch {
            who: Invoker { uid, gid },
            groups,
        }
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

/// A user's entry in the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passwd {
    pub name: String,
    pub home: std::ffi::OsString,
    pub shell: std::ffi::OsString,
    pub gid: libc::gid_t,
}

/// The password database entry of `uid`.
pub fn passwd(uid: libc::uid_t) -> Option<Passwd> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the duration of the call and buf's
    // length is passed along.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return None;
    }
    // SAFETY: on success the fields point to NUL-terminated strings in buf.
    let field = |p: *const libc::c_char| unsafe { std::ffi::CStr::from_ptr(p) };
    Some(Passwd {
        name: field(pwd.pw_name).to_string_lossy().into_owned(),
        home: std::ffi::OsStr::from_bytes(field(pwd.pw_dir).to_bytes()).to_owned(),
        shell: std::ffi::OsStr::from_bytes(field(pwd.pw_shell).to_bytes()).to_owned(),
        gid: pwd.pw_gid,
    })
}

/// The login name of `uid` from the password database.
pub fn user_name(uid: libc::uid_t) -> Option<String> {
    passwd(uid).map(|p| p.name)
}

/// Whether user `uid` belongs to one of the groups `names` (as primary or
/// supplementary group), from the system's databases: files only root
/// can write.
pub fn in_group(uid: libc::uid_t, names: &[&str]) -> bool {
    let Some(pw) = passwd(uid) else {
        return false;
    };
    let Ok(name) = CString::new(pw.name) else {
        return false;
    };
    let groups = group_list(&name, pw.gid);
    names.iter().any(|g| {
        let Ok(c) = CString::new(*g) else {
            return false;
        };
        let mut buf = vec![0 as libc::c_char; 16384];
        // SAFETY: zeroed group is a valid out-parameter.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: valid pointers, buf's length passed along.
        let rc = unsafe {
            libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found)
        };
        rc == 0 && !found.is_null() && groups.contains(&gr.gr_gid)
    })
}

/// The environment for a command kdiag runs: its own, except that under
/// sudo the command gets the invoking user's HOME, USER, LOGNAME, SHELL and
/// XDG_RUNTIME_DIR (sudo sets root's), and no SUDO_* variables, so it
/// behaves as if the user had started it. Their runtime directory is
/// /run/user/UID when it is theirs, else what `fallback_runtime` gives
/// (`fs_identity::runtime_dir`: one kdiag makes for them).
pub fn child_env(
    fallback_runtime: impl FnOnce() -> Option<std::path::PathBuf>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let env: Vec<_> = std::env::vars_os().collect();
    match invoker().and_then(|who| Some((who.uid, passwd(who.uid)?))) {
        Some((uid, pw)) => {
            use std::os::unix::fs::MetadataExt;
            let login = std::path::PathBuf::from(format!("/run/user/{uid}"));
            let runtime = match std::fs::metadata(&login) {
                Ok(m) if m.is_dir() && m.uid() == uid => Some(login),
                _ => fallback_runtime(),
            };
            env_for(env, &pw, runtime)
        }
        None => env,
    }
}

/// `env` made the user's (see `child_env`), with `runtime` (theirs) as
/// XDG_RUNTIME_DIR.
fn env_for(
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pw: &Passwd,
    runtime: Option<std::path::PathBuf>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    const REPLACED: [&str; 5] = ["HOME", "USER", "LOGNAME", "SHELL", "XDG_RUNTIME_DIR"];
    let mut out: Vec<_> = env
        .into_iter()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            !k.starts_with("SUDO_") && !REPLACED.contains(&k.as_ref())
        })
        .collect();
    out.push(("HOME".into(), pw.home.clone()));
    out.push(("USER".into(), pw.name.clone().into()));
    out.push(("LOGNAME".into(), pw.name.clone().into()));
    if !pw.shell.is_empty() {
        out.push(("SHELL".into(), pw.shell.clone()));
    }
    if let Some(runtime) = runtime {
        out.push(("XDG_RUNTIME_DIR".into(), runtime.into()));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_is_in_root_s_group() {
        assert!(super::in_group(0, &["root"]));
        assert!(!super::in_group(0, &["no-such-group-kdiag"]));
    }

    use super::*;

    #[test]
    fn root_has_a_name() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
    }

    #[test]
    fn the_command_gets_the_users_environment() {
        let pw = Passwd {
            name: "learner".into(),
            home: "/home/learner".into(),
            shell: "/bin/bash".into(),
            gid: 1000,
        };
        let sudo_env = [
            ("HOME", "/root"),
            ("USER", "root"),
            ("LOGNAME", "root"),
            ("SHELL", "/bin/sh"),
            ("SUDO_UID", "4242"),
            ("SUDO_USER", "learner"),
            ("SUDO_COMMAND", "/usr/bin/kdiag"),
            ("PATH", "/usr/bin:/bin"),
            ("XDG_RUNTIME_DIR", "/run/user/0"),
        ]
        .map(|(k, v)| (k.into(), v.into()))
        .to_vec();
        let env = env_for(sudo_env.clone(), &pw, Some("/run/user/4242".into()));
        let get = |env: &[(std::ffi::OsString, std::ffi::OsString)], k: &str| {
            let v: Vec<_> = env
                .iter()
                .filter(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .collect();
            assert!(v.len() <= 1, "{k} twice");
            v.first().map(|v| v.to_string_lossy().into_owned())
        };
        assert_eq!(get(&env, "HOME").as_deref(), Some("/home/learner"));
        assert_eq!(get(&env, "USER").as_deref(), Some("learner"));
        assert_eq!(get(&env, "LOGNAME").as_deref(), Some("learner"));
        assert_eq!(get(&env, "SHELL").as_deref(), Some("/bin/bash"));
        assert_eq!(get(&env, "PATH").as_deref(), Some("/usr/bin:/bin"));
        assert_eq!(
            get(&env, "XDG_RUNTIME_DIR").as_deref(),
            Some("/run/user/4242")
        );
        assert!(
            env.iter()
                .all(|(k, _)| !k.to_string_lossy().starts_with("SUDO_"))
        );
        // No runtime directory of theirs: none at all, not root's.
        let env = env_for(sudo_env, &pw, None);
        assert_eq!(get(&env, "XDG_RUNTIME_DIR"), None);
    }
}
