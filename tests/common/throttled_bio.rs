//! 4-bio's workload under the read-IOPS limit `kdiag workload run` puts on
//! it (a blkio or io cgroup of kdiag's own), and that cgroup's own count of
//! the reads it let through, for tests of what kdiag shows about it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Kids, kdiag};

/// Its reader threads (beside its main thread).
const READERS: usize = 20;

/// Killed, with its cgroup and scratch file, when dropped.
pub struct ThrottledBio {
    pub pid: u32,
    /// The cgroup file counting its reads: v1 blkio.throttle.io_serviced
    /// or v2 io.stat.
    counter: PathBuf,
    _kids: Kids,
    _dir: tempfile::TempDir,
}

impl ThrottledBio {
    /// Start it and wait until every reader is reading.
    pub fn start() -> ThrottledBio {
        // On a disk (not tmpfs): O_DIRECT reads reach the block layer.
        let dir = tempfile::Builder::new()
            .prefix("kdiag-bio")
            .tempdir_in("/var/tmp")
            .unwrap();
        let child = kdiag()
            .args(["workload", "run", "bio", "--duration", "120", "--threads"])
            .arg(READERS.to_string())
            .arg("--scratch")
            .arg(dir.path().join("bio"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let kpid = child.id();
        let kids = Kids(vec![child]);
        let pid = wait_for("the bio process", || child_named(kpid, "bio"));
        let counter = wait_for("its throttling cgroup", || counter_of(pid));
        let bio = ThrottledBio {
            pid,
            counter,
            _kids: kids,
            _dir: dir,
        };
        // Every reader started (a loaded machine starts them slowly), and
        // some of them in D.
        wait_for("its readers in D", || {
            let (in_d, threads) = bio.states();
            (threads > READERS && in_d > 1).then_some(())
        });
        bio
    }

    /// Reads the cgroup let through so far (on every device).
    pub fn reads(&self) -> u64 {
        let text = std::fs::read_to_string(&self.counter).unwrap();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                match f.as_slice() {
                    [_, "Read", n] => n.parse().unwrap(),
                    [_, kv @ ..] => kv
                        .iter()
                        .find_map(|kv| kv.strip_prefix("rios="))
                        .map_or(0, |n| n.parse().unwrap()),
                    _ => 0,
                }
            })
            .sum()
    }

    /// (threads in D, threads), from /proc.
    pub fn states(&self) -> (usize, usize) {
        let dir = std::fs::read_dir(format!("/proc/{}/task", self.pid)).unwrap();
        let states: Vec<char> = dir
            .flatten()
            .filter_map(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                stat.rsplit_once(") ")?.1.chars().next()
            })
            .collect();
        (states.iter().filter(|&&s| s == 'D').count(), states.len())
    }

    pub fn threads_in_d(&self) -> usize {
        self.states().0
    }
}

/// The descendant of `ancestor` named `comm`.
fn child_named(ancestor: u32, comm: &str) -> Option<u32> {
    let mut todo = vec![ancestor];
    while let Some(p) = todo.pop() {
        let kids = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).ok()?;
        for kid in kids
            .split_whitespace()
            .filter_map(|k| k.parse::<u32>().ok())
        {
            if std::fs::read_to_string(format!("/proc/{kid}/comm")).is_ok_and(|c| c.trim() == comm)
            {
                return Some(kid);
            }
            todo.push(kid);
        }
    }
    None
}

/// The counter of the cgroup that limits `pid`'s reads: its v1 blkio
/// cgroup when it is in one of kdiag's, else its v2 cgroup.
fn counter_of(pid: u32) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = |controllers: &str| {
        cgroups.lines().find_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (c, path) = rest.split_once(':')?;
            (c == controllers && path.contains("/kdiag-")).then(|| path.to_string())
        })
    };
    if let Some(p) = path("blkio") {
        return Some(PathBuf::from(format!(
            "/sys/fs/cgroup/blkio{p}/blkio.throttle.io_serviced"
        )));
    }
    let p = path("")?;
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .iter()
        .map(|root| PathBuf::from(format!("{root}{p}/io.max")))
        .find(|max| std::fs::read_to_string(max).is_ok_and(|m| m.contains("riops=")))
        .map(|max| max.with_file_name("io.stat"))
}

fn wait_for<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = found() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
