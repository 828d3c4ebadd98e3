//! What a tracing command traces, while it runs: a `-- CMD` it started
//! held (so tracing covers it from its exec), the processes of `-p PID,...`,
//! or the whole machine; when that target has ended, and the run's clocks.
//! `trace::Trace` drives it for every command that traces a target.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::sys::process::rusage::own_usage;
use crate::sys::process::spawn::HeldChild;
use crate::sys::procfs::parse;

/// Ctrl-C and SIGTERM, caught for the run: a command reaches it here, not in sys/.
pub use crate::sys::process::interrupt::Interrupt;

/// What is traced, while it runs.
pub enum Running {
    /// `-- CMD`: our child, stopped (if still running) and reaped at the end.
    Child {
        /// Boxed: the held child is large beside the other variants.
        child: Box<HeldChild>,
        /// Its CPU seconds, once reaped.
        usage: Option<f64>,
        /// The wait status, when the command ended by itself.
        own_status: Option<i32>,
    },
    /// `-p PID,...`: over when every one of them has gone.
    Pids(Vec<i32>),
    /// `-a`: until -d or Ctrl-C.
    All,
}

/// Whether the target has gone.
pub enum Ended {
    No,
    /// The command exited: the run covers all of it.
    Normally,
    /// The processes went away before -d was up.
    Early(String),
}

/// Every PID names a live process, or the error says which does not.
pub fn check_pids(pids: &[i32]) -> anyhow::Result<()> {
    match pids.iter().find(|&&pid| !exists(pid)) {
        Some(&pid) => Err(crate::error::NoSuchProcess::one(pid)),
        None => Ok(()),
    }
}

/// The one test that a process is there (a zombie is, until reaped).
pub fn exists(pid: i32) -> bool {
    pid > 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Whose process `pid` is: its real uid (as the kernel's ptrace check reads
/// it), none once it is gone.
pub fn owner(pid: u32) -> Option<u32> {
    crate::sys::procfs::real_uid(pid)
}

/// Whose processes a command observes: everyone's (root, an
/// administrator, a learner's own machine) or one user's (a learner on a
/// course server: `course::policy::observed_user`). Each instrument applies
/// it where its events are made, not after collecting them: a uid checked
/// in the BPF program before anything is copied (exec), or events opened on
/// the user's own processes and the children they start (profile, offcpu).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    Everyone,
    /// Processes whose real uid is this one (the kernel's ptrace and
    /// perf_event_paranoid rule: a user observes their own).
    User(u32),
}

impl Scope {
    pub fn uid(self) -> Option<u32> {
        match self {
            Scope::Everyone => None,
            Scope::User(uid) => Some(uid),
        }
    }

    /// Whether a process of real uid `uid` is in scope.
    pub fn admits(self, uid: u32) -> bool {
        self.uid().is_none_or(|u| u == uid)
    }

    /// Whether kdiag may `act` ("ask it", "read its memory") on a process
    /// of `uid`: as root within the scope (a learner only their own), else
    /// only as that user; the refusal says why.
    pub fn may_act_on(self, uid: u32, act: &str) -> Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        match crate::sys::process::privilege::is_root() {
            true if !self.admits(uid) => Err(format!("it runs as uid {uid}, not as you")),
            false if me != uid => Err(format!(
                "it runs as uid {uid}: only root or its own user may {act}"
            )),
            _ => Ok(()),
        }
    }

    /// The processes in scope now, ascending (their children are followed
    /// by the instruments that take them); None: every process. Never an
    /// empty list, which the instruments read as every process.
    pub fn processes(self) -> anyhow::Result<Option<Vec<i32>>> {
        let Some(uid) = self.uid() else {
            return Ok(None);
        };
        let pids: Vec<i32> = crate::sys::procfs::pids()?
            .into_iter()
            .filter(|&p| owner(p as u32) == Some(uid))
            .collect();
        anyhow::ensure!(
            !pids.is_empty(),
            "{} has no process to observe",
            self.describe("")
        );
        Ok(Some(pids))
    }

    /// What a system-wide run covers, for its report: "all CPUs" or
    /// "every process of kdiag-learner".
    pub fn describe(self, everyone: &str) -> String {
        match self.uid() {
            None => everyone.to_string(),
            Some(uid) => format!(
                "every process of {}",
                crate::sys::process::privilege::user_name(uid)
                    .unwrap_or_else(|| format!("uid {uid}"))
            ),
        }
    }
}

/// The cgroup a command observes, named by its path under /sys/fs/cgroup
/// or in full: its directory, resolved on the cgroup file system only (so
/// `..` or a link never makes root read a cgroup.procs elsewhere for the
/// user); else the path it was looked for at.
pub fn cgroup(c: &Path) -> Result<std::path::PathBuf, std::path::PathBuf> {
    crate::sys::cgroupfs::resolve(c).ok_or_else(|| crate::sys::cgroupfs::full_path(c))
}

/// The cgroup of systemd unit `name`, found by its name in the cgroup
/// trees (no systemd API: a course server may have none running).
pub fn unit_cgroup(name: &str) -> Option<std::path::PathBuf> {
    crate::sys::cgroupfs::find_unit(name)
}

/// The uid of the user a command observes (`-u`), by name or number.
pub fn uid_of(user: &str) -> Option<u32> {
    crate::sys::procfs::users::uid_of(user)
}

/// `-- CMD`, started held: it waits before its exec until [`release`].
pub fn spawn<S: AsRef<OsStr>>(command: &[S]) -> anyhow::Result<HeldChild> {
    let program = command[0].as_ref().to_string_lossy().into_owned();
    HeldChild::spawn(command).with_context(|| format!("cannot start `{program}`"))
}

/// Let a held command exec, now that tracing is attached; an exec that
/// fails is the command's error (exit 126/127).
pub fn release(mut child: HeldChild, command: &[OsString]) -> anyhow::Result<Running> {
    child.release().context("releasing the command")?;
    if let Some(source) = child.exec_error().context("starting the command")? {
        return Err(crate::error::CannotRun {
            program: command[0].to_string_lossy().into_owned(),
            error: source,
        }
        .into());
    }
    Ok(Running::Child {
        child: Box::new(child),
        usage: None,
        own_status: None,
    })
}

impl Running {
    /// Whether the target has gone, and why when that ends the run early.
    pub fn ended(&mut self) -> anyhow::Result<Ended> {
        match self {
            Running::Child {
                child,
                usage,
                own_status,
            } => {
                let reaped = child.try_reap().context("waiting for the command")?;
                Ok(match reaped {
                    Some((status, ru)) => {
                        *usage = Some(cpu_secs(&ru));
                        *own_status = Some(status);
                        Ended::Normally
                    }
                    None => Ended::No,
                })
            }
            Running::Pids(pids) => {
                let alive = pids.iter().any(|&pid| {
                    let state = stat(pid).map(|s| s.state);
                    !matches!(state, None | Some('Z') | Some('X'))
                });
                Ok(if alive {
                    Ended::No
                } else if pids.len() == 1 {
                    Ended::Early(format!("PID {} exited during the run", pids[0]))
                } else {
                    Ended::Early("every traced PID exited during the run".into())
                })
            }
            Running::All => Ok(Ended::No),
        }
    }

    /// Whether the run is over because the target has gone; `early` gets
    /// why, when it went before -d was up.
    pub fn over(&mut self, early: &mut Option<String>) -> anyhow::Result<bool> {
        Ok(match self.ended()? {
            Ended::No => false,
            Ended::Normally => true,
            Ended::Early(why) => {
                *early = Some(why);
                true
            }
        })
    }

    /// CPU seconds used so far by `-p` processes or the whole machine,
    /// where they can be read (a command's come from its rusage at the end).
    pub fn busy_secs(&self) -> Option<f64> {
        let hz = crate::sys::procfs::hz() as f64;
        match self {
            Running::Child { .. } => None,
            Running::Pids(pids) => {
                let ticks = pids
                    .iter()
                    .map(|&p| stat(p).map(|s| s.utime + s.stime))
                    .sum::<Option<u64>>()?;
                Some(ticks as f64 / hz)
            }
            Running::All => {
                let (cpu, _) = parse::proc_stat(&std::fs::read("/proc/stat").ok()?);
                // Everything but idle and iowait.
                let busy = cpu.user + cpu.nice + cpu.system + cpu.irq + cpu.softirq + cpu.steal;
                Some(busy as f64 / hz)
            }
        }
    }

    /// End a command still running (after -d or Ctrl-C), with everything
    /// it started (SIGTERM, `grace`, SIGKILL), and reap it.
    pub fn finish(&mut self, grace: Duration) -> anyhow::Result<()> {
        if let Running::Child { child, usage, .. } = self
            && usage.is_none()
        {
            child.stop(grace);
            let (_, ru) = child.reap().context("waiting for the command")?;
            *usage = Some(cpu_secs(&ru));
        }
        Ok(())
    }
}

fn stat(pid: i32) -> Option<parse::Stat> {
    parse::stat(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// User plus system CPU seconds of a reaped child.
fn cpu_secs(ru: &libc::rusage) -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Now in the clock of perf records and BPF (CLOCK_MONOTONIC ns).
pub fn now_ns() -> u64 {
    crate::sys::monotonic_ns()
}

/// Root, or the error saying that `what` needs it.
pub fn require_root(what: &str) -> anyhow::Result<()> {
    match crate::sys::process::privilege::is_root() {
        true => Ok(()),
        false => Err(crate::error::needs_privilege(what)),
    }
}

/// kdiag's own CPU seconds so far (what tracing costs).
pub fn self_cpu_secs() -> f64 {
    own_usage().0
}

/// The kernel's name for a process running `program` (basename, 15 bytes).
pub fn comm_name(program: &OsString) -> String {
    let base = Path::new(program)
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    base.chars().take(15).collect()
}

/// A process's name, "?" once it has gone; printable (the process chose it).
pub fn comm_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| crate::analysis::ps::printable(c.trim_end()))
        .unwrap_or_else(|_| "?".into())
}

/// `cpu-burn --duration 5` for `/path/to/cpu-burn --duration 5`.
pub fn command_line(argv: &[OsString]) -> String {
    let mut line: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    line[0] = comm_name(&argv[0]);
    let line = line.join(" ");
    if line.chars().count() > 60 {
        line.chars().take(57).collect::<String>() + "..."
    } else {
        line
    }
}

/// Now, as `2026-11-22T07:02:28Z` and in ns since the epoch.
pub fn utc_now() -> (String, u64) {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    (
        crate::analysis::calendar::utc_iso8601(since.as_secs() as i64),
        since.as_nanos() as u64,
    )
}
