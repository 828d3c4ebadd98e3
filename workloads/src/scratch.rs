//! The scratch directory: the only place a workload writes. It is capped in
//! size, removed on exit, SIGINT, SIGTERM and SIGHUP, and a directory left
//! behind by a SIGKILLed run is removed at the next start: an owner file
//! records the pid and its start time, so a dead (or recycled) pid is stale.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Cli;

/// The marker file that makes a directory ours (and removable).
const OWNER: &str = ".kdiag-owner";

/// Where a workload's files must live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// No files at all: no directory is made, and parallel runs never clash.
    None,
    /// Anywhere, tmpfs included (default $XDG_RUNTIME_DIR/kdiag-workloads
    /// or /tmp/kdiag-UID; see `base`).
    Any,
    /// A real disk: the I/O workloads are pointless on tmpfs, where nothing
    /// reaches a block device and O_DIRECT fails (default /var/tmp/kdiag-UID).
    Disk,
}

#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
    cap: u64,
    used: AtomicU64,
    /// Also remove the per-user base directory when it empties (default
    /// layout only: a --scratch DIR's parent belongs to the user).
    tidy_parent: bool,
}

impl Scratch {
    /// The directory a run would use, without creating it.
    pub fn path_for(cli: &Cli, name: &str, storage: Storage) -> PathBuf {
        cli.scratch().unwrap_or_else(|| base(storage).join(name))
    }

    /// Create `dir` (sweeping stale runs first) and arrange its removal on
    /// signals. Call before starting any thread.
    pub fn create(
        dir: PathBuf,
        storage: Storage,
        cap: u64,
        tidy_parent: bool,
    ) -> Result<Scratch, String> {
        let show = dir.display().to_string();
        // Blocked before the directory exists: a SIGTERM between its
        // creation and the cleanup thread's start would leave it behind.
        let signals = block_exit_signals();
        if let Some(parent) = dir.parent() {
            // The default base is private (0700); a --scratch DIR's parent
            // is made as any directory of the user's.
            let mode = if tidy_parent { 0o700 } else { 0o777 };
            std::os::unix::fs::DirBuilderExt::mode(fs::DirBuilder::new().recursive(true), mode)
                .create(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            if tidy_parent {
                check_owned(parent)?;
            }
            sweep_stale(parent);
        }
        match fs::read_to_string(dir.join(OWNER)) {
            Ok(owner) if owner_alive(&owner) => {
                let pid = owner.split_whitespace().next().unwrap_or("?");
                return Err(format!(
                    "{show} is in use by a running workload (pid {pid}): stop it, or pass --scratch DIR"
                ));
            }
            Ok(_) => remove(&dir, false),
            Err(_) if dir.exists() => {
                // Not ours: never delete what we did not create.
                if fs::remove_dir(&dir).is_err() {
                    return Err(format!(
                        "{show} exists and was not made by a workload; pass another --scratch DIR"
                    ));
                }
            }
            Err(_) => {}
        }
        fs::create_dir(&dir).map_err(|e| format!("cannot create scratch directory {show}: {e}"))?;
        let me = std::process::id();
        let owner = format!("{me} {}\n", start_time(me).unwrap_or(0));
        fs::write(dir.join(OWNER), owner).map_err(|e| format!("cannot write in {show}: {e}"))?;
        let scratch = Scratch {
            dir,
            cap,
            used: AtomicU64::new(0),
            tidy_parent,
        };
        if storage == Storage::Disk && on_tmpfs(&scratch.dir) {
            return Err(format!(
                "{show} is on tmpfs, where writes never reach a disk: pass --scratch DIR on a disk-backed file system"
            ));
        }
        remove_on_signal(signals, &scratch.dir, tidy_parent);
        Ok(scratch)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A path inside the scratch directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Account for `bytes` about to be written; refuse past the cap or when
    /// the file system would be left with less than 256 MiB free.
    pub fn reserve(&self, bytes: u64) -> Result<(), String> {
        let used = self.used.fetch_add(bytes, Ordering::SeqCst) + bytes;
        if used > self.cap {
            return Err(format!(
                "would write {} MiB into {}, over the scratch cap of {} MiB (raise --scratch-cap)",
                used >> 20,
                self.dir.display(),
                self.cap >> 20
            ));
        }
        if let Some(free) = free_bytes(&self.dir)
            && free < bytes + (256 << 20)
        {
            return Err(format!(
                "only {} MiB free under {}: pass --scratch DIR elsewhere or a smaller size",
                free >> 20,
                self.dir.display()
            ));
        }
        Ok(())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        remove(&self.dir, self.tidy_parent);
    }
}

/// The per-user base directory of the default scratch directories: one
/// only this user can have made, so no other user can block a run by
/// creating it first. $XDG_RUNTIME_DIR when it is the user's (kdiag sets it
/// under sudo: the user's /run/user/UID, else /run/kdiag/UID), else
/// `kdiag-UID` under /tmp or /var/tmp, or, when someone else took that
/// name, `kdiag-UID-SUFFIX` (one of the user's own, or a fresh one).
pub fn base(storage: Storage) -> PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    match storage {
        Storage::Disk => per_user(Path::new("/var/tmp"), uid),
        Storage::Any | Storage::None => match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(d) if owned_dir(Path::new(&d), uid) => Path::new(&d).join("kdiag-workloads"),
            _ => per_user(Path::new("/tmp"), uid),
        },
    }
}

/// A real directory (not a symlink to one) owned by `uid`.
fn owned_dir(dir: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid)
}

/// `parent/kdiag-UID` unless another user holds that name; then one of
/// the user's own `kdiag-UID-*` (a run in progress, or a stale one to
/// sweep), else a fresh unguessable name, created by `Scratch::create`.
fn per_user(parent: &Path, uid: u32) -> PathBuf {
    let first = parent.join(format!("kdiag-{uid}"));
    if fs::symlink_metadata(&first).is_err() || owned_dir(&first, uid) {
        return first;
    }
    let prefix = format!("kdiag-{uid}-");
    let mut ours: Vec<PathBuf> = fs::read_dir(parent)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .filter(|p| owned_dir(p, uid))
                .collect()
        })
        .unwrap_or_default();
    ours.sort();
    ours.into_iter()
        .next()
        .unwrap_or_else(|| parent.join(format!("{prefix}{:016x}", unguessable())))
}

/// 64 random bits from the kernel (the pid and time if that fails).
fn unguessable() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: buf is valid for 8 bytes.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n == 8 {
        return u64::from_ne_bytes(buf);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ u64::from(std::process::id()) << 32
}

/// The shared default base (e.g. /tmp/kdiag-UID) must be a real directory
/// of ours, not something another user planted there.
fn check_owned(dir: &Path) -> Result<(), String> {
    // SAFETY: getuid has no preconditions.
    if !owned_dir(dir, unsafe { libc::getuid() }) {
        return Err(format!(
            "{} is not a directory owned by you: remove it or pass --scratch DIR",
            dir.display()
        ));
    }
    Ok(())
}

/// Remove our directory and, if asked and now empty, its parent.
fn remove(dir: &Path, tidy_parent: bool) {
    // On a signal the workload's own threads still run, and one may create
    // a file in the directory while it is being emptied (a copy loop
    // opening its output again): try until it is gone, or a while.
    for _ in 0..100 {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => continue,
            _ => break,
        }
    }
    if tidy_parent && let Some(parent) = dir.parent() {
        let _ = fs::remove_dir(parent);
    }
}

/// Remove directories under `parent` left by runs that died without cleaning up.
fn sweep_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if let Ok(owner) = fs::read_to_string(path.join(OWNER))
            && !owner_alive(&owner)
        {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// "PID STARTTIME": alive when that pid exists with that start time.
fn owner_alive(owner: &str) -> bool {
    let mut it = owner.split_whitespace().map(|s| s.parse::<u64>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(pid), Some(start)) => {
            start_time(pid as u32).is_some_and(|s| s == start || start == 0)
        }
        _ => false,
    }
}

/// Field 22 of /proc/PID/stat: start time in clock ticks since boot.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(19)?.parse().ok()
}

fn statfs(dir: &Path) -> Option<libc::statfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: c is a valid C string and buf a properly sized out-parameter.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut buf) } == 0).then_some(buf)
}

// statfs field types differ between architectures, hence the casts.
#[allow(clippy::unnecessary_cast)]
fn on_tmpfs(dir: &Path) -> bool {
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    statfs(dir).is_some_and(|s| {
        let t = s.f_type as i64;
        t == libc::TMPFS_MAGIC as i64 || t == RAMFS_MAGIC
    })
}

#[allow(clippy::unnecessary_cast)]
fn free_bytes(dir: &Path) -> Option<u64> {
    statfs(dir).map(|s| s.f_bavail as u64 * s.f_bsize as u64)
}

/// Block SIGINT, SIGTERM and SIGHUP in this thread (and so in every thread
/// started later); `remove_on_signal` then waits for them.
fn block_exit_signals() -> libc::sigset_t {
    // SAFETY: plain signal-set manipulation on a local sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Let one thread wait for the blocked `set`: it removes the directory and
/// exits with 128 + the signal, however busy the workers are.
fn remove_on_signal(set: libc::sigset_t, dir: &Path, tidy_parent: bool) {
    let dir = dir.to_path_buf();
    std::thread::Builder::new()
        .name("scratch-cleanup".into())
        .spawn(move || {
            let mut sig = 0;
            // SAFETY: set is a valid blocked signal set; sig an out-parameter.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            remove(&dir, tidy_parent);
            // SAFETY: ends the process without running destructors of other
            // threads' state, which may be mid-write.
            unsafe { libc::_exit(128 + sig) }
        })
        .expect("start the scratch cleanup thread");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kdiag-scratch-unit-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn owner_liveness() {
        let me = std::process::id();
        let start = start_time(me).unwrap();
        assert!(owner_alive(&format!("{me} {start}\n")));
        assert!(
            !owner_alive(&format!("{me} {}\n", start + 1)),
            "recycled pid"
        );
        assert!(!owner_alive("4194304 1\n"), "no such pid");
        assert!(!owner_alive("garbage"));
    }

    #[test]
    fn stale_directories_are_swept_and_foreign_ones_kept() {
        let base = temp("sweep");
        let stale = base.join("stale");
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join(OWNER), "4194304 1\n").unwrap();
        let foreign = base.join("foreign");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("data"), "mine").unwrap();
        sweep_stale(&base);
        assert!(!stale.exists() && foreign.exists());
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_base_name_taken_by_someone_else_falls_back_to_one_of_ours() {
        use std::os::unix::fs::symlink;
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let parent = temp("per-user");
        assert_eq!(per_user(&parent, me), parent.join(format!("kdiag-{me}")));
        // Someone else's uid: our directory of that name is theirs to them.
        fs::create_dir(parent.join("kdiag-4242")).unwrap();
        let fresh = per_user(&parent, 4242);
        let name = fresh.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("kdiag-4242-") && name.len() == 27,
            "{name}"
        );
        assert!(!fresh.exists());
        assert_ne!(per_user(&parent, 4242), fresh, "unguessable");
        // A symlink planted at the name, and a fallback of ours to reuse.
        symlink("/", parent.join(format!("kdiag-{me}"))).unwrap();
        fs::create_dir(parent.join(format!("kdiag-{me}-0abc"))).unwrap();
        assert_eq!(
            per_user(&parent, me),
            parent.join(format!("kdiag-{me}-0abc"))
        );
        fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn reserve_enforces_the_cap() {
        let scratch = Scratch {
            dir: temp("cap"),
            cap: 1 << 20,
            used: AtomicU64::new(0),
            tidy_parent: false,
        };
        assert!(scratch.reserve(512 << 10).is_ok());
        let err = scratch.reserve(600 << 10).unwrap_err();
        assert!(err.contains("scratch cap"), "{err}");
        drop(scratch); // removes the directory
    }
}
