//! A cgroup of kdiag's own that limits a disk's read IOPS for the processes
//! in it (the `bio` workload needs a slow disk to be faithful); and the v2
//! cgroup a command kdiag supervises runs in (`CommandCgroup`).
//!
//! cgroup v2 with the `io` controller (`io.max`) where that controller is
//! available to the unified hierarchy; else the v1 `blkio` hierarchy
//! (`blkio.throttle.read_iops_device`). Where the io controller is bound to
//! v1 (a hybrid layout: v2 mounted at /sys/fs/cgroup/unified with no
//! controllers), v2 cannot throttle; on a systemd laptop it is v2.
//!
//! Nothing outlives kdiag: the handle kills everything in its cgroup and
//! removes it on drop, and every creation first removes `kdiag-PID-START-N`
//! cgroups whose kdiag is dead (a SIGKILLed kdiag cannot clean up), judged
//! by pid and start time (`sys::process::owner`), never by name.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::model::block::DevId;
use crate::sys::process::owner::Owner;
use crate::sys::process::supervisor::decimal;

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("limiting a disk for a process needs root (cgroups are root's): run kdiag with sudo")]
    NotRoot,
    #[error("no usable cgroup I/O controller: {0}")]
    NoController(String),
    #[error("cannot find the block device under {path}: {why}")]
    NoDevice { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Which hierarchy the cgroup lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Unified hierarchy, `io.max`.
    V2,
    /// Legacy `blkio` hierarchy, `blkio.throttle.*`.
    V1,
}

/// A cgroup `kdiag-PID-START-N` (see [`fresh_name`]), killed and removed on drop.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    version: Version,
    /// The v2 parent whose `cgroup.subtree_control` we gave `+io`, to undo.
    enabled_io: Option<PathBuf>,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Cgroup {
    /// Create a fresh cgroup in the hierarchy that can throttle I/O, after
    /// removing stale ones of dead kdiag processes.
    pub fn create() -> Result<Cgroup, CgroupError> {
        if !crate::sys::process::privilege::is_root() {
            return Err(CgroupError::NotRoot);
        }
        let (root, version) = find_hierarchy()?;
        sweep_stale(&root);
        let mut enabled_io = None;
        if version == Version::V2 {
            let control = root.join("cgroup.subtree_control");
            let has_io = fs::read_to_string(&control)
                .map_err(io_err(&control))?
                .split_whitespace()
                .any(|c| c == "io");
            if !has_io {
                fs::write(&control, "+io").map_err(io_err(&control))?;
                enabled_io = Some(control);
            }
        }
        let name = fresh_name();
        let dir = root.join(name);
        fs::create_dir(&dir).map_err(io_err(&dir))?;
        Ok(Cgroup {
            dir,
            version,
            enabled_io,
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// Limit reads from `disk` (a whole disk: see [`disk_of`]) to `iops`
    /// requests per second for the processes in this cgroup.
    pub fn limit_read_iops(&self, disk: DevId, iops: u64) -> Result<(), CgroupError> {
        let dev = format!("{}:{}", disk.major, disk.minor);
        let (file, line) = match self.version {
            Version::V2 => ("io.max", format!("{dev} riops={iops}")),
            Version::V1 => ("blkio.throttle.read_iops_device", format!("{dev} {iops}")),
        };
        let path = self.dir.join(file);
        fs::write(&path, line).map_err(io_err(&path))
    }

    /// Move process `pid` (all its threads) into this cgroup.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        let path = self.dir.join("cgroup.procs");
        fs::write(&path, pid.to_string()).map_err(io_err(&path))
    }

    /// Make `cmd`'s child join this cgroup between fork and exec, before
    /// anything else: register this before the switch to the invoking user
    /// (which would lose the right to write the file), so the workload
    /// never runs a single instruction outside the cgroup.
    pub fn join_on_exec(&self, cmd: &mut Command) -> Result<(), CgroupError> {
        let path = self.dir.join("cgroup.procs");
        let procs: OwnedFd = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?
            .into();
        // SAFETY: the hook only calls getpid and write (async-signal-safe)
        // on a stack buffer and a descriptor it owns.
        unsafe {
            cmd.pre_exec(move || {
                let mut buf = [0u8; 10];
                let digits = decimal(libc::getpid() as u32, &mut buf);
                if libc::write(procs.as_raw_fd(), digits.as_ptr().cast(), digits.len()) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            })
        };
        Ok(())
    }

    /// The read-IOPS rules in force, as the kernel shows them (e.g.
    /// "254:0 200" for v1, "254:0 rbps=max wbps=max riops=200 wiops=max").
    pub fn limits(&self) -> String {
        let file = match self.version {
            Version::V2 => "io.max",
            Version::V1 => "blkio.throttle.read_iops_device",
        };
        fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    /// The processes in this cgroup now.
    pub fn pids(&self) -> Vec<u32> {
        read_pids(&self.dir)
    }

    /// SIGKILL every process in the cgroup and wait (up to 2 s) until it
    /// is empty.
    pub fn kill_all(&self) {
        kill_all(&self.dir);
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        kill_all(&self.dir);
        remove(&self.dir);
        if let Some(control) = &self.enabled_io {
            // Fails harmlessly while another cgroup still uses io.
            let _ = fs::write(control, "-io");
        }
    }
}

/// A v2 cgroup `kdiag-PID-START-N` for a command kdiag runs under its supervisor
/// (`sys::process::supervisor`): one write to `cgroup.kill` kills every
/// process in it, wherever it is in the tree. The supervisor writes the
/// command's pid into `procs` and `1` into `kill` through these descriptors
/// (opened here: it makes only raw system calls), and removes `dir_c`.
pub struct CommandCgroup {
    pub dir: PathBuf,
    pub dir_c: std::ffi::CString,
    pub procs: OwnedFd,
    pub kill: OwnedFd,
}

impl CommandCgroup {
    /// A new cgroup at the root of the v2 hierarchy, after removing stale
    /// ones of dead kdiag processes; None when v2 is not mounted, not
    /// writable (not root) or has no cgroup.kill (before Linux 5.14).
    pub fn create() -> Option<CommandCgroup> {
        if !crate::sys::process::privilege::is_root() {
            return None;
        }
        let (root, _) = cgroup_mounts().into_iter().find(|m| m.1 == Version::V2)?;
        sweep_stale(&root);
        let name = fresh_name();
        let dir = root.join(name);
        fs::create_dir(&dir).ok()?;
        let open = |name: &str| -> Option<OwnedFd> {
            Some(
                OpenOptions::new()
                    .write(true)
                    .open(dir.join(name))
                    .ok()?
                    .into(),
            )
        };
        match (open("cgroup.procs"), open("cgroup.kill")) {
            (Some(procs), Some(kill)) => Some(CommandCgroup {
                dir_c: std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?,
                dir,
                procs,
                kill,
            }),
            _ => {
                remove(&dir);
                None
            }
        }
    }

    /// Kill everything in it and remove it (kdiag's fallback when the
    /// supervisor died before it could).
    pub fn kill_and_remove(&self) {
        if self.dir.exists() {
            kill_all(&self.dir);
            remove(&self.dir);
        }
    }
}

/// The tightest memory.max on the way from `pid`'s v2 cgroup up to the
/// root: (that cgroup's path in the hierarchy, its limit, its usage now).
/// None when no cgroup on the way has a limit, or v2 is not mounted.
pub fn memory_max(pid: i32) -> Option<(String, u64, u64)> {
    let (root, _) = cgroup_mounts().into_iter().find(|m| m.1 == Version::V2)?;
    let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mut path = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
    let read = |p: &str, f: &str| -> Option<u64> {
        let dir = root.join(p.trim_start_matches('/'));
        fs::read_to_string(dir.join(f)).ok()?.trim().parse().ok()
    };
    let mut best: Option<(String, u64, u64)> = None;
    loop {
        if let Some(max) = read(&path, "memory.max")
            && best.as_ref().is_none_or(|b| max < b.1)
        {
            best = Some((
                path.clone(),
                max,
                read(&path, "memory.current").unwrap_or(0),
            ));
        }
        match path.rfind('/') {
            Some(0) if path.len() > 1 => path.truncate(1),
            Some(i) if i > 0 => path.truncate(i),
            _ => break,
        }
    }
    best
}

/// The hierarchy to use and its version: v2 when its root offers the `io`
/// controller, else a mounted v1 `blkio` hierarchy.
fn find_hierarchy() -> Result<(PathBuf, Version), CgroupError> {
    let mounts = cgroup_mounts();
    let v2 = mounts.iter().find(|m| m.1 == Version::V2).map(|m| &m.0);
    if let Some(root) = v2 {
        let controllers = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "io") {
            return Ok((root.clone(), Version::V2));
        }
    }
    if let Some((root, _)) = mounts.iter().find(|m| m.1 == Version::V1) {
        return Ok((root.clone(), Version::V1));
    }
    Err(CgroupError::NoController(match v2 {
        Some(root) => format!(
            "{} does not offer the io controller and no v1 blkio hierarchy is mounted \
             (a kernel without CONFIG_BLK_CGROUP, or io bound elsewhere)",
            root.join("cgroup.controllers").display()
        ),
        None => "no cgroup2 and no v1 blkio hierarchy is mounted \
                 (mount cgroup2 on /sys/fs/cgroup)"
            .to_string(),
    }))
}

/// Mount points of cgroup2 and of v1 hierarchies with `blkio`: the
/// hierarchies kdiag's own cgroups can be made in.
fn cgroup_mounts() -> Vec<(PathBuf, Version)> {
    crate::sys::cgroupfs::mounts()
        .into_iter()
        .filter_map(|m| match m.v2 {
            true => Some((m.dir, Version::V2)),
            false if m.controllers.iter().any(|c| c == "blkio") => Some((m.dir, Version::V1)),
            false => None,
        })
        .collect()
}

/// A new cgroup name `kdiag-PID-START-N`: this kdiag (pid and start time,
/// so a sweep can tell it is alive whatever its binary is called) and a
/// counter of its own.
fn fresh_name() -> String {
    format!(
        "kdiag-{}-{}",
        Owner::me().tag(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Remove `kdiag-PID-START-N` cgroups under `root` whose kdiag is gone.
/// Names of another form (an older kdiag's `kdiag-PID-N`) are left alone:
/// their owner cannot be told for sure, and killing a live one's workload
/// is worse than leaving a dead one's cgroup.
fn sweep_stale(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(owner_of) else {
            continue;
        };
        if !owner.alive() {
            let dir = entry.path();
            kill_all(&dir);
            remove(&dir);
        }
    }
}

/// The kdiag that made a cgroup named `kdiag-PID-START-N`.
fn owner_of(name: &str) -> Option<Owner> {
    let (tag, n) = name.strip_prefix("kdiag-")?.rsplit_once('-')?;
    n.parse::<u32>().ok()?;
    Owner::parse(tag)
}

fn read_pids(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn kill_all(dir: &Path) {
    let kill_file = dir.join("cgroup.kill"); // v2, Linux 5.14+
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        let pids = read_pids(dir);
        if pids.is_empty() || Instant::now() > end {
            return;
        }
        if fs::write(&kill_file, "1").is_err() {
            for pid in pids {
                // SAFETY: plain kill(2); the pids are in our cgroup.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// rmdir, retried briefly: a killed task leaves the cgroup as it exits.
fn remove(dir: &Path) {
    let end = Instant::now() + Duration::from_secs(2);
    while fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The whole disk holding `path` (or its nearest existing ancestor): a
/// partition is replaced by its disk, since the I/O controllers only take
/// whole disks (a partition gives ENODEV).
pub fn disk_of(path: &Path) -> Result<DevId, CgroupError> {
    let existing = path
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let no_device = |why: String| CgroupError::NoDevice {
        path: existing.to_path_buf(),
        why,
    };
    let meta = fs::metadata(existing).map_err(io_err(existing))?;
    let dev = DevId::new(libc::major(meta.dev()), libc::minor(meta.dev()));
    let dev = if sys_block(dev).exists() {
        dev
    } else {
        // btrfs and others report an anonymous device: take the block
        // device the file system was mounted from.
        mount_source(dev).ok_or_else(|| {
            no_device(format!(
                "{dev} is not a block device and its mount has no /dev source \
                 (a network or memory file system): pass --scratch DIR on a local disk"
            ))
        })?
    };
    whole_disk(dev).map_err(|e| no_device(format!("{}: {e}", sys_block(dev).display())))
}

fn sys_block(dev: DevId) -> PathBuf {
    PathBuf::from(format!("/sys/dev/block/{}:{}", dev.major, dev.minor))
}

/// The disk of a partition (its parent in sysfs); other devices as they are.
fn whole_disk(dev: DevId) -> io::Result<DevId> {
    let node = fs::canonicalize(sys_block(dev))?;
    if !node.join("partition").exists() {
        return Ok(dev);
    }
    let parent = node.parent().ok_or(io::ErrorKind::NotFound)?;
    parse_dev(&fs::read_to_string(parent.join("dev"))?)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad dev file"))
}

fn parse_dev(text: &str) -> Option<DevId> {
    let (major, minor) = text.trim().split_once(':')?;
    Some(DevId::new(major.parse().ok()?, minor.parse().ok()?))
}

/// The device number of the `/dev/...` source of the mount whose st_dev is
/// `dev`.
fn mount_source(dev: DevId) -> Option<DevId> {
    let text = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = format!("{}:{}", dev.major, dev.minor);
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if left.split_whitespace().nth(2)? != want {
            return None;
        }
        let source = right.split_whitespace().nth(1)?;
        if !source.starts_with("/dev/") {
            return None;
        }
        let meta = fs::metadata(source).ok()?;
        let rdev = meta.rdev();
        (rdev != 0).then(|| DevId::new(libc::major(rdev), libc::minor(rdev)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        let owner = |pid, start| Some(Owner { pid, start });
        assert_eq!(owner_of("kdiag-123-456-0"), owner(123, 456));
        assert_eq!(owner_of("kdiag-123-456-17"), owner(123, 456));
        // An older kdiag's name: owner unknown, never swept.
        assert_eq!(owner_of("kdiag-123-0"), None);
        assert_eq!(owner_of("kdiag-123"), None);
        assert_eq!(owner_of("kdiag-x-1-2"), None);
        assert_eq!(owner_of("other-1-2-3"), None);
        assert_eq!(owner_of(&fresh_name()), Some(Owner::me()));
        assert_eq!(parse_dev("254:0\n"), Some(DevId::new(254, 0)));
    }

    #[test]
    fn the_disk_of_a_path_is_a_whole_disk() {
        // Whatever holds /var/tmp here, the answer has no "partition" file.
        let disk = disk_of(Path::new("/var/tmp/kdiag-no-such/dir")).unwrap();
        let node = fs::canonicalize(sys_block(disk)).unwrap();
        assert!(!node.join("partition").exists(), "{}", node.display());
    }

    #[test]
    fn limits_joins_kills_and_removes() {
        if !crate::testing::require_root("limits_joins_kills_and_removes") {
            return;
        }
        let disk = disk_of(Path::new("/var/tmp")).unwrap();
        let cg = Cgroup::create().unwrap();
        let dir = cg.path().to_path_buf();
        cg.limit_read_iops(disk, 123).unwrap();
        assert!(
            cg.limits()
                .contains(&format!("{}:{}", disk.major, disk.minor))
                && cg.limits().contains("123"),
            "{}",
            cg.limits()
        );
        // One child joins before exec, another is added by pid.
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        cg.join_on_exec(&mut cmd).unwrap();
        let mut joined = cmd.spawn().unwrap();
        let mut added = Command::new("sleep").arg("30").spawn().unwrap();
        cg.add(added.id()).unwrap();
        let mut pids = cg.pids();
        pids.sort();
        let mut want = vec![joined.id(), added.id()];
        want.sort();
        assert_eq!(pids, want);
        let own = fs::read_to_string(format!("/proc/{}/cgroup", joined.id())).unwrap();
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert!(own.contains(name), "{own}");
        drop(cg);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(joined.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(added.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(!dir.exists(), "{} removed", dir.display());
    }

    #[test]
    fn stale_cgroups_of_dead_kdiags_are_swept() {
        if !crate::testing::require_root("stale_cgroups_of_dead_kdiags_are_swept") {
            return;
        }
        let (root, _) = find_hierarchy().unwrap();
        let me = Owner::me();
        // A pid that cannot exist (above pid_max's ceiling), with a process
        // still inside, as a SIGKILLed kdiag leaves it.
        let stale = root.join(format!("kdiag-4194305-{}-7", me.start));
        let _ = fs::create_dir(&stale);
        let mut orphan = Command::new("sleep").arg("30").spawn().unwrap();
        fs::write(stale.join("cgroup.procs"), orphan.id().to_string()).unwrap();
        // A recycled pid: this process's pid, another start time.
        let recycled = root.join(format!("kdiag-{}-{}-7", me.pid, me.start + 1));
        let _ = fs::create_dir(&recycled);
        // One of a live kdiag whose binary has another name (this test
        // binary) is left alone.
        let live = root.join(format!("kdiag-{}-999", me.tag()));
        let _ = fs::create_dir(&live);
        let cg = Cgroup::create().unwrap();
        assert!(!stale.exists(), "stale cgroup swept");
        assert!(!recycled.exists(), "a recycled pid's cgroup swept");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(orphan.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(live.exists(), "a live kdiag's cgroup is kept");
        drop(cg);
        fs::remove_dir(&live).unwrap();
    }
}
