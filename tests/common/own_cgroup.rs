//! A v1 cgroup of a test's own, under /sys/fs/cgroup/CONTROLLER: made
//! with a name no kdiag sweeps (not `kdiag-PID-N`, which kdiag removes for
//! dead kdiags), emptied (SIGKILL) and removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub struct OwnCg {
    /// Its folder in the hierarchy.
    pub dir: PathBuf,
    /// Its path as /proc/PID/cgroup names it: `/NAME`.
    pub path: String,
}

impl OwnCg {
    /// `kdiagtest-cg-PID-N` (N counts them: the tests run at once).
    pub fn new(controller: &str) -> OwnCg {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OwnCg::named(
            controller,
            &format!("kdiagtest-cg-{}-{n}", std::process::id()),
        )
    }

    /// One named `name` (unique to the test: it is the caller's), as a
    /// unit's or a container's would be.
    pub fn named(controller: &str, name: &str) -> OwnCg {
        let dir = Path::new("/sys/fs/cgroup").join(controller).join(name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        OwnCg {
            dir,
            path: format!("/{name}"),
        }
    }

    pub fn set(&self, file: &str, value: &str) {
        let f = self.dir.join(file);
        std::fs::write(&f, value).unwrap_or_else(|e| panic!("{} <- {value}: {e}", f.display()));
    }

    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect()
    }

    /// Start `script` (sh) after it has joined this cgroup: everything it
    /// runs is in it from its first instruction.
    pub fn spawn(&self, script: &str) -> Child {
        let procs = self.dir.join("cgroup.procs");
        let child = super::command("sh")
            .args(["-c", &format!("echo $$ > {} && {script}", procs.display())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while !self.pids().contains(&(child.id() as i32)) {
            assert!(Instant::now() < end, "{script} did not join {}", self.path);
            std::thread::sleep(Duration::from_millis(10));
        }
        child
    }
}

/// dd reading a file of its own (`super::direct_read_file(name)`, on a
/// real disk) 4 KiB at a time with O_DIRECT, each read a request, in a
/// blkio cgroup of its own that limits reads on that disk to 100 IOPS.
pub fn iops_limited_reader(name: &str) -> (OwnCg, Child) {
    let file = super::direct_read_file(name);
    let disk = kdiag::sys::cgroup::disk_of(&file).unwrap();
    let cg = OwnCg::new("blkio");
    cg.set(
        "blkio.throttle.read_iops_device",
        &format!("{}:{} 100", disk.major, disk.minor),
    );
    let dd = cg.spawn(&format!(
        "exec dd if={} of=/dev/null bs=4k iflag=direct",
        file.display()
    ));
    (cg, dd)
}

impl Drop for OwnCg {
    fn drop(&mut self) {
        let end = Instant::now() + Duration::from_secs(5);
        while !self.pids().is_empty() && Instant::now() < end {
            for pid in self.pids() {
                // SAFETY: plain kill(2) of a process in the test's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
