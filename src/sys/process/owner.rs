//! Which kdiag owns a thing it leaves in a shared place (a cgroup, a tracefs
//! instance), so that the sweep of those a SIGKILLed kdiag left behind never
//! takes a live owner for a dead one. A pid alone is not enough (pids are
//! recycled) and neither is the process's name (a test binary or a renamed
//! copy `kdiag.real` is still a kdiag): the pid with its start time (field 22
//! of /proc/PID/stat) names one process for the whole life of the system.

use crate::sys::procfs::parse;

/// A process: its pid and its start time in clock ticks since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub start: u64,
}

impl Owner {
    /// This process.
    pub fn me() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start: start_time(pid).unwrap_or(0),
        }
    }

    /// "PID-START", the form names carry (`kdiag-PID-START-N`).
    pub fn tag(&self) -> String {
        format!("{}-{}", self.pid, self.start)
    }

    /// The owner named by a tag "PID-START".
    pub fn parse(tag: &str) -> Option<Owner> {
        let (pid, start) = tag.split_once('-')?;
        Some(Owner {
            pid: pid.parse().ok()?,
            start: start.parse().ok()?,
        })
    }

    /// True while this very process runs: its pid exists and started when
    /// the owner did (a recycled pid started later).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
    }
}

/// When process `pid` started, while it exists.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse::stat(&stat).map(|s| s.start_ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips() {
        let me = Owner::me();
        assert!(me.start > 0);
        assert_eq!(Owner::parse(&me.tag()), Some(me));
        assert_eq!(Owner::parse("12-34"), Some(Owner { pid: 12, start: 34 }));
        assert_eq!(Owner::parse("12"), None);
        assert_eq!(Owner::parse("12-x"), None);
        assert_eq!(Owner::parse("x-12"), None);
    }

    #[test]
    fn alive_is_this_pid_with_this_start_time() {
        let me = Owner::me();
        assert!(me.alive());
        let recycled = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(!recycled.alive(), "same pid, other start: another process");
        let gone = Owner {
            pid: 4_194_305, // above pid_max's ceiling: cannot exist
            start: me.start,
        };
        assert!(!gone.alive());
    }

    #[test]
    fn a_child_under_another_name_is_alive() {
        // The name plays no part: a process called anything is judged by
        // pid and start time alone.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let owner = Owner {
            pid: child.id(),
            start: start_time(child.id()).unwrap(),
        };
        assert!(owner.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!owner.alive(), "reaped: gone");
    }
}
