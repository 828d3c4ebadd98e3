//! A HotSpot JVM asked for its perf map before the drill-down's profiles
//! are taken, so that `perf_map` names their Java frames: the JDK's own
//! `jcmd PID Compiler.perfmap` (beside the JVM's `java`), run as the JVM's
//! user, writes /tmp/perf-PID.map. Asked only where kdiag may and where
//! asking is safe: the caller is root (and the run's `Scope` admits the
//! JVM's user: a learner asks only their own JVMs) or is the JVM's user;
//! the JVM catches SIGQUIT (the attach handshake sends one, which kills a
//! JVM started with -Xrs); attach is not disabled; the JVM shares kdiag's
//! mount namespace and root (its /tmp is ours). A map kdiag caused did
//! not exist before: it goes when kdiag is done with it or ends.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use super::perf_map::PerfMap;
use crate::instruments::target::Scope;
use crate::model::drill::PerfMapAsk;
use crate::sys::process::janitor::Janitor;
use crate::sys::process::privilege::{InvokerSwitch, is_root};
use crate::sys::process::spawn::{HeldChild, Identity, Options};

/// jcmd starts a JVM of its own (0.4 s on an idle machine): the most it
/// is given before it is killed.
const DEADLINE: Duration = Duration::from_secs(5);

/// The files kdiag caused: the map the JVM wrote and any trigger file of
/// the attach handshake a killed jcmd left. Removed when dropped, and by
/// the janitor when kdiag ends before (SIGKILL included).
#[derive(Debug)]
pub struct MadeMap {
    _janitor: Janitor,
}

/// None unless `pid` is a HotSpot JVM. Else what kdiag did: asked (as
/// which uid, and what came of it) or why not, and what it made.
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
            // Watched before jcmd runs: none of these exists yet.
            let mut files = attach_files(pid);
            files.push(path.clone());
            match Janitor::start(&files, uid) {
                Err(e) => {
                    asked.why_not = Some(format!("cannot watch what it would leave ({e})"));
                    None
                }
                Ok(janitor) => {
                    match run(&jcmd, pid, identity) {
                        Err(why) => asked.why_not = Some(why),
                        Ok(()) => count_entries(&path, pid, &mut asked),
                    }
                    Some(MadeMap { _janitor: janitor })
                }
            }
        }
    };
    Some((asked, made))
}

/// The map jcmd made the JVM write, its entries counted.
fn count_entries(path: &str, pid: i32, asked: &mut PerfMapAsk) {
    match PerfMap::load(pid as u32, crate::sys::procfs::real_uid(pid as u32)) {
        Ok(Some(map)) => asked.entries = map.len(),
        Ok(None) => asked.why_not = Some(format!("jcmd succeeded but {path} did not appear")),
        Err(why) => asked.why_not = Some(why),
    }
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
    scope.may_act_on(uid, "ask it")?;
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
        // Killed mid-handshake, it left its trigger file: the janitor's.
        None => Err(format!("jcmd did not finish in {} s", DEADLINE.as_secs())),
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
/// else /tmp): jcmd removes its own unless killed.
fn attach_files(pid: i32) -> Vec<String> {
    let ns_pid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let l = s.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
            l.split_whitespace().last().map(str::to_string)
        })
        .unwrap_or_else(|| pid.to_string());
    vec![
        format!("/proc/{pid}/cwd/.attach_pid{ns_pid}"),
        format!("/tmp/.attach_pid{ns_pid}"),
    ]
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
