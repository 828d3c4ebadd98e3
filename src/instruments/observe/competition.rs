//! diagnose's drill-down for a process waiting for a CPU: every process's
//! CPU time at both ends of a window (as `kdiag top` reads it), and the
//! CPUs each of the busiest may run on.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::analysis::drill;
use crate::instruments::target::Scope;
use crate::model::drill::{ANOTHER_USERS, Competition};
use crate::sys::procfs::{self, Reader};

/// Who had the CPUs over `window` (cut short when `stop` is set), the
/// processes of `target` apart; a process out of `scope` (another user's,
/// for a learner) is counted but not named.
pub fn record(
    target: &[i32],
    scope: Scope,
    window: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<Competition> {
    let mut r = Reader::new();
    let before = r.all(false)?;
    let start = Instant::now();
    crate::instruments::for_window(window, stop, |wait| {
        std::thread::sleep(wait);
        Ok(())
    })?;
    let mut after = r.all(false)?;
    // kdiag's own CPU (these drill-downs) is reported as its cost.
    let me = std::process::id() as i32;
    after.retain(|p| p.pid != me);
    // SAFETY: sysconf has no preconditions. (Not available_parallelism:
    // that is kdiag's own affinity.)
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let mut c = drill::competition(
        &before,
        &after,
        start.elapsed().as_secs_f64(),
        procfs::hz(),
        target,
        cpus,
    );
    // How the kernel writes "every CPU" (CPUs are not always numbered
    // 0..n, but near enough for a note).
    let all = if cpus == 1 {
        "0".to_string()
    } else {
        format!("0-{}", cpus - 1)
    };
    c.target_cpus = target
        .first()
        .and_then(|&p| allowed_cpus(p))
        .unwrap_or_else(|| all.clone());
    let foreign: HashSet<i32> = after
        .iter()
        .filter(|p| !scope.admits(p.real_uid))
        .map(|p| p.pid)
        .collect();
    for o in &mut c.others {
        if foreign.contains(&o.pid) {
            (o.pid, o.comm) = (0, ANOTHER_USERS.into());
        }
        o.cpus = allowed_cpus(o.pid).filter(|l| *l != all);
    }
    Ok(c)
}

/// Cpus_allowed_list of a process ("0-1", "0"), None once it is gone.
fn allowed_cpus(pid: i32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}
