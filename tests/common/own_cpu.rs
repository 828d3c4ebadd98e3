//! A v1 cpu cgroup of a test's own, for tests whose verdict depends on the
//! workload getting its CPU.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A v1 cpu cgroup of the test's own with the largest weight
/// (`cpu.shares`): a workload in it gets its CPU whatever else the machine
/// runs, so its verdict is about the workload, not the machine's load
/// (beside `stress-ng --cpu 2` io-app was otherwise starved: `sched`, with
/// no storage wait left in the evidence). None without root or a v1 cpu
/// hierarchy; the workloads then compete as they are.
pub struct OwnCpu(PathBuf);

impl OwnCpu {
    pub fn new(name: &str) -> Option<OwnCpu> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let root = Path::new("/sys/fs/cgroup/cpu");
        if !root.join("cpu.shares").exists() {
            return None;
        }
        let dir = root.join(format!("kdiagtest-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let own = OwnCpu(dir);
        std::fs::write(own.0.join("cpu.shares"), "262144").ok()?;
        Some(own)
    }

    /// `bin` in the cgroup when there is one, else as it is.
    pub fn argv(own: Option<&OwnCpu>, bin: &str) -> Vec<String> {
        match own {
            Some(own) => own.wrap(bin),
            None => vec![bin.to_string()],
        }
    }

    /// The argv as the `&str`s the helpers take.
    pub fn refs(argv: &[String]) -> Vec<&str> {
        argv.iter().map(String::as_str).collect()
    }

    /// The start of a shell script that moves the shell (and what it then
    /// runs) into the cgroup when there is one.
    pub fn enter(own: Option<&OwnCpu>) -> String {
        match own {
            Some(own) => format!("echo $$ > {} && ", own.0.join("cgroup.procs").display()),
            None => String::new(),
        }
    }

    /// Move a running process (all its threads) into this cgroup.
    pub fn add(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string())
            .expect("a process moves into the test's cpu cgroup");
    }

    /// A command line that runs `bin` in this cgroup.
    pub fn wrap(&self, bin: &str) -> Vec<String> {
        let procs = self.0.join("cgroup.procs");
        let script = format!("echo $$ > {} && exec {bin}", procs.display());
        vec!["sh".into(), "-c".into(), script]
    }
}

impl Drop for OwnCpu {
    fn drop(&mut self) {
        // Its processes are gone (all_gone); rmdir once they have left.
        let end = Instant::now() + Duration::from_secs(2);
        while std::fs::remove_dir(&self.0).is_err() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
