//! A HotSpot JVM asked for its perf map before the drill-down's profiles
//! are taken, so that `perf_map` names their Java frames: the JDK's own
//! `jcmd PID Compiler.perfmap` (beside the JVM's `java`), run as the JVM's
//! user, writes /tmp/perf-PID.map. Asked only where kdiag may and where
//! asking is safe: the caller is root (and the run's `Scope` admits the
//! JVM's user: a learner asks only their own JVMs) or is the JVM's user;
//! the JVM catches SIGQUIT (the attach handshake sends one, which kills a
//! JVM started with -Xrs); attach is not disabled; the JVM shares kdiag's
//! mount namespace and root (its /tmp is ours). A map kdiag caused is
//! removed when dropped: it did not exist before.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use super::perf_map::PerfMap;
use crate::instruments::target::Scope;
use crate::model::drill::PerfMapAsk;
use crate::sys::process::privilege::{InvokerSwitch, is_root};
use crate::sys::process::spawn::{HeldChild, Identity, Options};

/// jcmd starts a JVM of its own (0.4 s on an idle machine): the most it
/// is given before it is killed.
const DEADLINE: Duration = Duration::from_secs(5);

/// The map kdiag made a JVM write: unlinked when dropped, if the path
/// still names the file the JVM wrote (never a file put there since).
#[derive(Debug)]
pub struct MadeMap {
    path: String,
    id: (u64, u64),
}

impl Drop for MadeMap {
    fn drop(&mut self) {
        // lstat and unlink: a symbolic link is never followed.
        if let Ok(m) = std::fs::symlink_metadata(&self.path)
            && (m.dev(), m.ino()) == self.id
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// None unless `pid` is a HotSpot JVM. Else what kdiag did: asked (as
/// which uid, and what came of it) or why not, and the map it made.
pub fn ask(pid: i32, scope: Scope) -> Option<(PerfMapAsk, Option<MadeMap>)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    if !maps.contains("/libjvm.so") {
        return None;
    }
    let mut asked = PerfMapAsk {
        pid,
        ..Default::default()
    };
    let path = format!("/tmp/perf-{pid}.map");
    let made = match may_ask(pid, scope, &path) {
        Err(why) => {
            asked.why_not = Some(why);
            None
        }
        Ok((jcmd, uid, identity)) => {
            asked.uid = Some(uid);
            match run(&jcmd, pid, identity) {
                Err(why) => {
                    asked.why_not = Some(why);
                    None
                }
                Ok(()) => read_made(&path, pid, &mut asked),
            }
        }
    };
    Some((asked, made))
}

/// The map jcmd made the JVM write, its entries counted.
fn read_made(path: &str, pid: i32, asked: &mut PerfMapAsk) -> Option<MadeMap> {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        asked.why_not = Some(format!("jcmd succeeded but {path} did not appear"));
        return None;
    };
    let made = MadeMap {
        path: path.into(),
        id: (m.dev(), m.ino()),
    };
    match PerfMap::load(pid as u32, crate::sys::procfs::real_uid(pid as u32)) {
        Ok(Some(map)) => asked.entries = map.len(),
        Ok(None) => asked.why_not = Some(format!("{path} is gone")),
        Err(why) => asked.why_not = Some(why),
    }
    Some(made)
}

/// The checks, in order: jcmd and the identity to run it as, or why kdiag
/// does not ask.
fn may_ask(pid: i32, scope: Scope, map: &str) -> Result<(String, u32, Identity), String> {
    if std::fs::symlink_metadata(map).is_ok() {
        return Err(format!("{map} exists already (read as it is)"));
    }
    let ns = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    if ns(&format!("/proc/{pid}/ns/mnt")) != ns("/proc/self/ns/mnt")
        || ns(&format!("/proc/{pid}/root")) != ns("/proc/self/root")
    {
        return Err(
            "it runs in another mount namespace or root (a container): its /tmp is not kdiag's; \
             run `jcmd PID Compiler.perfmap` in it"
                .into(),
        );
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("its status is unreadable ({e})"))?;
    let ids = |key: &str| -> Vec<u32> {
        let line = status.lines().find_map(|l| l.strip_prefix(key));
        let words = line.unwrap_or_default().split_whitespace();
        words.filter_map(|w| w.parse().ok()).collect()
    };
    // Effective ids: the attach listener admits a peer with the JVM's own.
    let (Some(&uid), Some(&gid)) = (ids("Uid:").get(1), ids("Gid:").get(1)) else {
        return Err("its user is unknown".into());
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if is_root() {
        if !scope.admits(uid) {
            return Err(format!("it runs as uid {uid}, not as you"));
        }
    } else if me != uid {
        return Err(format!(
            "it runs as uid {uid}: only root or its own user may ask it"
        ));
    }
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0);
    if caught & 1 << (libc::SIGQUIT - 1) == 0 {
        return Err(
            "it does not catch SIGQUIT (-Xrs?): the attach handshake's SIGQUIT would kill it"
                .into(),
        );
    }
    let flags = [
        std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default(),
        std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default(),
    ]
    .concat();
    if String::from_utf8_lossy(&flags).contains("+DisableAttachMechanism") {
        return Err("it was started with -XX:+DisableAttachMechanism".into());
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| format!("its program is unreadable ({e})"))?;
    let jcmd = exe.with_file_name("jcmd");
    if !jcmd.is_file() {
        return Err(format!(
            "no jcmd beside {} (a JRE without the JDK's tools)",
            exe.display()
        ));
    }
    // As root, become the JVM's user; as that user, stay.
    let identity = Identity {
        switch: is_root().then(|| InvokerSwitch::to(uid, gid, ids("Groups:"))),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
    };
    Ok((jcmd.to_string_lossy().into_owned(), uid, identity))
}

/// Run `jcmd PID Compiler.perfmap` as `identity`, stdin null, its output
/// kept for the reason it failed; killed and reaped at the deadline.
fn run(jcmd: &str, pid: i32, identity: Identity) -> Result<(), String> {
    let (mut out, write) = pipe().map_err(|e| format!("cannot run jcmd ({e})"))?;
    let argv: Vec<OsString> = [
        jcmd,
        // Its own JVM leaves no hsperfdata file behind, even when killed.
        "-J-XX:-UsePerfData",
        &pid.to_string(),
        "Compiler.perfmap",
    ]
    .map(OsString::from)
    .to_vec();
    let options = Options {
        foreground: false,
        output: Some(write.as_raw_fd()),
        identity: Some(identity),
    };
    let mut child =
        HeldChild::spawn_with(&argv, options).map_err(|e| format!("cannot run jcmd ({e})"))?;
    drop(write);
    let attach = leftovers(pid);
    let started = child.release().and_then(|()| child.exec_error());
    if let Ok(Some(e)) | Err(e) = started {
        return Err(format!("cannot run {jcmd} ({e})"));
    }
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait() {
            break Some(s);
        }
        if t.elapsed() > DEADLINE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Killed and reaped (the supervisor's job) on every path.
    drop(child);
    let mut text = Vec::new();
    let _ = (&mut out).take(4096).read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text);
    match status {
        None => {
            // Killed mid-handshake, it left its trigger file.
            for f in attach {
                let _ = std::fs::remove_file(f);
            }
            Err(format!("jcmd did not finish in {} s", DEADLINE.as_secs()))
        }
        Some(s) if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0 => Ok(()),
        Some(_) => Err(format!(
            "jcmd failed: {}",
            text.lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("no message")
        )),
    }
}

/// The attach handshake's trigger files (in the JVM's working directory,
/// else /tmp) that do not exist yet: jcmd removes its own unless killed.
fn leftovers(pid: i32) -> Vec<String> {
    let ns_pid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let l = s.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
            l.split_whitespace().last().map(str::to_string)
        })
        .unwrap_or_else(|| pid.to_string());
    [
        format!("/proc/{pid}/cwd/.attach_pid{ns_pid}"),
        format!("/tmp/.attach_pid{ns_pid}"),
    ]
    .into_iter()
    .filter(|f| std::fs::symlink_metadata(f).is_err())
    .collect()
}

/// A pipe for jcmd's output: (kdiag's read end, jcmd's write end).
fn pipe() -> std::io::Result<(std::fs::File, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 returns; only
    // kdiag's end is made non-blocking (read once jcmd has ended).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0
        || unsafe { libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            OwnedFd::from_raw_fd(fds[1]),
        )
    })
}
