//! Who sent a fatal signal. waitid only says that a child was killed and by
//! which signal; the sender and si_code are only visible when the signal is
//! generated. A private tracefs instance records `signal:signal_generate`
//! while the command runs; the instance is removed on drop.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::model::rusage::SignalOrigin;
use crate::sys::process::owner::Owner;

/// A tracefs instance recording signal generation, removed on drop.
pub struct SignalTracer {
    dir: PathBuf,
}

impl SignalTracer {
    /// Start recording. Needs root (tracefs is root-only).
    pub fn start() -> io::Result<Self> {
        let tracefs = crate::sys::tracefs::Tracefs::open()
            .map_err(|e| io::Error::other(format!("{e:#}")))?
            .root()
            .to_path_buf();
        remove_stale(&tracefs.join("instances"));
        let dir = tracefs.join(format!("instances/kdiag-time-{}", Owner::me().tag()));
        fs::create_dir(&dir)?;
        let tracer = SignalTracer { dir };
        let event = tracer.dir.join("events/signal/signal_generate");
        // SIGCHLD, SIGWINCH and SIGURG never kill by default: skip the noise.
        fs::write(event.join("filter"), "sig != 17 && sig != 28 && sig != 23")?;
        fs::write(event.join("enable"), "1")?;
        Ok(tracer)
    }

    /// Narrow recording to signals aimed at `pid` (events recorded before
    /// this call are kept and filtered when read).
    pub fn target(&self, pid: i32) {
        let filter = self.dir.join("events/signal/signal_generate/filter");
        let _ = fs::write(filter, format!("pid == {pid}"));
    }

    /// The last generation of `sig` aimed at `pid`, if recorded.
    pub fn origin(&self, pid: i32, sig: i32) -> Option<SignalOrigin> {
        let text = fs::read_to_string(self.dir.join("trace")).ok()?;
        text.lines()
            .rev()
            .filter_map(parse_line)
            .find(|e| e.target == pid && e.sig == sig)
            .map(|e| SignalOrigin {
                sender_pid: tgid(e.origin.sender_tid),
                ..e.origin
            })
    }
}

impl Drop for SignalTracer {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("events/signal/signal_generate/enable"), "0");
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Remove instances left by a kdiag that was killed with SIGKILL (the only
/// way to skip Drop): those whose owner (pid and start time) is gone.
fn remove_stale(instances: &std::path::Path) {
    let Ok(entries) = fs::read_dir(instances) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix("kdiag-time-"))
            .and_then(Owner::parse)
        else {
            continue;
        };
        if !owner.alive() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The process a thread belongs to, while it lives (a task being released
/// reads Tgid 0: unknown).
fn tgid(tid: i32) -> Option<i32> {
    let status = fs::read(format!("/proc/{tid}/status")).ok()?;
    Some(crate::sys::procfs::parse::status(&status).tgid).filter(|&t| t != 0)
}

struct Generated {
    sig: i32,
    target: i32,
    origin: SignalOrigin,
}

/// Parse one trace line, by the field names of the event's print format:
/// `  bash-1234  [001] d..2.  5.6: signal_generate: sig=9 errno=0 code=0 comm=sleep pid=1235 grp=1 res=0`
fn parse_line(line: &str) -> Option<Generated> {
    let (head, fields) = line.split_once(": signal_generate: ")?;
    let task = head[..head.rfind('[')?].trim();
    let (sender_comm, sender_tid) = task.rsplit_once('-')?;
    let num = |key: &str| -> Option<i32> {
        let start = fields.find(key)? + key.len();
        fields[start..].split(' ').next()?.parse().ok()
    };
    // comm may hold spaces: the target pid is the last " pid=" field.
    let pid_at = fields.rfind(" pid=")?;
    let target = fields[pid_at + 5..].split(' ').next()?.parse().ok()?;
    Some(Generated {
        sig: num("sig=")?,
        target,
        origin: SignalOrigin {
            code: num(" code=")?,
            sender_tid: sender_tid.parse().ok()?,
            sender_pid: None,
            sender_comm: sender_comm.to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_trace_line() {
        let line = "     my shell-1234    [001] d..2.  5.678901: signal_generate: \
                    sig=9 errno=0 code=0 comm=sl eep pid=1235 grp=1 res=0";
        let e = parse_line(line).unwrap();
        assert_eq!((e.sig, e.target), (9, 1235));
        assert_eq!(e.origin.code, 0);
        assert_eq!(e.origin.sender_tid, 1234);
        assert_eq!(e.origin.sender_comm, "my shell");
        assert!(parse_line("# tracer: nop").is_none());
    }
}
