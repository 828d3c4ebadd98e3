//! Reading single files of processes and threads fast and often, for
//! diagnose's sampling: one reused path and buffer, and the files read
//! most kept open and read again with pread (a /proc file regenerates its
//! text at offset 0), which costs a third of open + read + close (3 µs
//! against 10 µs for a thread's stat, measured on this machine). Also what
//! a blocked thread waits on: its system call, and the kind of file behind
//! a descriptor.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::model::process::{Io, SmapsRollup};
use crate::sys::procfs::parse::{self, Stat, Status, Syscall};

/// One reused path and read buffer for /proc files.
pub struct ProcFile {
    buf: Vec<u8>,
    len: usize,
    path: String,
}

impl Default for ProcFile {
    fn default() -> Self {
        ProcFile {
            buf: vec![0; 16 * 1024],
            len: 0,
            path: String::with_capacity(64),
        }
    }
}

impl ProcFile {
    /// Read the file at the path `args` formats (`format_args!`).
    ///
    /// Plain read calls into a buffer kept at full length: std's
    /// `read_to_end` would also stat and seek every file to size it, and
    /// /proc files all claim size 0. A short read means the end, since
    /// /proc's seq_files hand out everything that fits at once.
    pub fn read(&mut self, args: std::fmt::Arguments) -> io::Result<&[u8]> {
        let f = self.open(args)?;
        self.fill(&f)
    }

    /// Open the file at the path `args` formats.
    fn open(&mut self, args: std::fmt::Arguments) -> io::Result<File> {
        self.path.clear();
        let _ = self.path.write_fmt(args);
        File::open(&self.path)
    }

    /// Read all of `f` from offset 0.
    fn fill(&mut self, f: &File) -> io::Result<&[u8]> {
        self.len = 0;
        loop {
            if self.len == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = f.read_at(&mut self.buf[self.len..], self.len as u64)?;
            self.len += n;
            if n == 0 || self.len < self.buf.len() {
                return Ok(&self.buf[..self.len]);
            }
        }
    }

    /// What the last `read` returned.
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// What a file descriptor refers to, as far as waiting on it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    Pipe,
    Socket,
    Terminal,
    CharDevice,
    BlockDevice,
    File,
    Directory,
    /// An anonymous inode: eventfd, timerfd, signalfd, epoll, inotify,
    /// io_uring, ...
    Event,
    Unknown,
}

impl FdKind {
    pub fn name(self) -> &'static str {
        match self {
            FdKind::Pipe => "pipe",
            FdKind::Socket => "socket",
            FdKind::Terminal => "terminal",
            FdKind::CharDevice => "char-device",
            FdKind::BlockDevice => "block-device",
            FdKind::File => "file",
            FdKind::Directory => "directory",
            FdKind::Event => "event",
            FdKind::Unknown => "",
        }
    }
}

/// How many files a reader keeps open: a quarter of the descriptors this
/// process may open (the rest is for perf events, BPF and output), at
/// least 256 and at most 16,384. Past it each read opens its file again,
/// which costs more than the read: under the usual limit of 1,024 that is
/// about 80 threads' worth, under a limit of 20,000 every thread of a
/// 1,000-thread process.
fn keep_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct it is given.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
            limit.rlim_cur
        } else {
            1024
        };
        (soft / 4).clamp(256, 16_384) as usize
    })
}
/// The files read at every sampling tick or scan, kept open.
const KEPT: &[&str] = &["stat", "schedstat", "syscall", "wchan"];

/// Per-process and per-thread files under one /proc root.
pub struct TaskReader {
    root: String,
    file: ProcFile,
    /// Open files by (pid, tid or 0 for the process, name).
    kept: HashMap<(i32, i32, &'static str), File>,
}

impl Default for TaskReader {
    fn default() -> Self {
        Self::with_root(super::PROC)
    }
}

impl TaskReader {
    pub fn with_root(root: &str) -> Self {
        TaskReader {
            root: root.to_string(),
            file: ProcFile::default(),
            kept: HashMap::new(),
        }
    }

    /// A file of a process (tid None) or of one of its threads; the hot
    /// ones through a kept descriptor. A kept file that reads empty or
    /// fails belongs to a task that ended: it is closed.
    fn read(&mut self, pid: i32, tid: Option<i32>, name: &'static str) -> io::Result<&[u8]> {
        self.read_keeping(pid, tid, name, KEPT.contains(&name))
    }

    fn read_keeping(
        &mut self,
        pid: i32,
        tid: Option<i32>,
        name: &'static str,
        keep: bool,
    ) -> io::Result<&[u8]> {
        let key = (pid, tid.unwrap_or(0), name);
        if keep && let Some(f) = self.kept.remove(&key) {
            match self.file.fill(&f) {
                Ok(b) if !b.is_empty() => {
                    self.kept.insert(key, f);
                    return Ok(self.file.data());
                }
                _ => return Err(io::ErrorKind::NotFound.into()),
            }
        }
        let root = &self.root;
        let f = match tid {
            None => self.file.open(format_args!("{root}/{pid}/{name}"))?,
            Some(t) => self
                .file
                .open(format_args!("{root}/{pid}/task/{t}/{name}"))?,
        };
        self.file.fill(&f)?;
        if keep && self.kept.len() < keep_max() {
            self.kept.insert(key, f);
        }
        Ok(self.file.data())
    }

    /// Close the kept files of tasks not in `live` (pid, tid) (process
    /// files are kept while any thread of theirs is).
    pub fn forget_except(&mut self, live: &std::collections::HashSet<(i32, i32)>) {
        let pids: std::collections::HashSet<i32> = live.iter().map(|k| k.0).collect();
        self.retain(|pid, tid| {
            if tid == 0 {
                pids.contains(&pid)
            } else {
                live.contains(&(pid, tid))
            }
        });
    }

    /// Close the kept files of the (pid, tid) for which `keep` is false
    /// (tid 0: a whole process's file).
    pub fn retain(&mut self, keep: impl Fn(i32, i32) -> bool) {
        self.kept.retain(|k, _| keep(k.0, k.1));
    }

    /// /proc/PID/stat (tid None: the whole process, its threads' CPU and
    /// faults summed) or one thread's.
    pub fn stat(&mut self, pid: i32, tid: Option<i32>) -> Option<Stat> {
        parse::stat(self.read(pid, tid, "stat").ok()?)
    }

    /// A process's stat read once, its file not kept open: for looking
    /// over every process on the machine.
    pub fn stat_once(&mut self, pid: i32) -> Option<Stat> {
        parse::stat(self.read_keeping(pid, None, "stat", false).ok()?)
    }

    pub fn status(&mut self, pid: i32, tid: Option<i32>) -> Option<Status> {
        Some(parse::status(self.read(pid, tid, "status").ok()?))
    }

    /// (on-CPU ns, run-queue wait ns, timeslices) of one task.
    pub fn schedstat(&mut self, pid: i32, tid: i32) -> Option<(u64, u64, u64)> {
        parse::schedstat(self.read(pid, Some(tid), "schedstat").ok()?)
    }

    /// When a thread last ran (`se.exec_start` of /proc/PID/task/TID/sched,
    /// ms of the task clock of the CPU it ran on: compare it only with
    /// `clock_ms_on` that CPU); None without the file (CONFIG_SCHED_DEBUG).
    pub fn last_ran_ms(&mut self, pid: i32, tid: i32) -> Option<f64> {
        parse::exec_start_ms(self.read_keeping(pid, Some(tid), "sched", false).ok()?)
    }

    /// The kernel function a sleeping thread waits in; empty when running.
    pub fn wchan(&mut self, pid: i32, tid: i32) -> String {
        match self.read(pid, Some(tid), "wchan") {
            Ok(b) if b != b"0" => String::from_utf8_lossy(b).trim().to_string(),
            _ => String::new(),
        }
    }

    /// The system call a thread is blocked in; None when the file cannot be
    /// read (it needs ptrace access to the thread).
    pub fn syscall(&mut self, pid: i32, tid: i32) -> Option<Syscall> {
        parse::syscall(self.read(pid, Some(tid), "syscall").ok()?)
    }

    /// Storage bytes (/proc/PID/io); None when not permitted.
    pub fn io(&mut self, pid: i32) -> Option<Io> {
        parse::io(self.read(pid, None, "io").ok()?)
    }

    pub fn smaps_rollup(&mut self, pid: i32) -> Option<SmapsRollup> {
        parse::smaps_rollup(self.read(pid, None, "smaps_rollup").ok()?)
    }

    /// The short name of a process.
    pub fn comm(&mut self, pid: i32) -> Option<String> {
        let b = self.read(pid, None, "comm").ok()?;
        Some(String::from_utf8_lossy(b).trim_end().to_string())
    }

    /// What descriptor `fd` of `pid` refers to.
    pub fn fd_kind(&self, pid: i32, fd: u64) -> FdKind {
        use std::os::unix::fs::FileTypeExt;
        let path = format!("{}/{pid}/fd/{fd}", self.root);
        let Ok(target) = std::fs::read_link(&path) else {
            return FdKind::Unknown;
        };
        let target = target.to_string_lossy();
        if target.starts_with("anon_inode:") {
            return FdKind::Event;
        }
        if target.starts_with("/dev/pts/") || target.starts_with("/dev/tty") {
            return FdKind::Terminal;
        }
        // Following the link reaches the open file itself, pipes and
        // sockets included.
        let Ok(meta) = std::fs::metadata(&path) else {
            return FdKind::Unknown;
        };
        let t = meta.file_type();
        if t.is_fifo() {
            FdKind::Pipe
        } else if t.is_socket() {
            FdKind::Socket
        } else if t.is_block_device() {
            FdKind::BlockDevice
        } else if t.is_char_device() {
            FdKind::CharDevice
        } else if t.is_dir() {
            FdKind::Directory
        } else if t.is_file() {
            FdKind::File
        } else {
            FdKind::Unknown
        }
    }

    /// The thread ids of a process, ascending; empty once it is gone.
    pub fn tids(&self, pid: i32) -> Vec<i32> {
        super::tids_in(&self.root, pid)
    }

    /// Every PID, ascending.
    pub fn pids(&self) -> io::Result<Vec<i32>> {
        super::pids_in(&self.root)
    }
}

/// The task clock of `cpu` now, in ms: what `last_ran_ms` of a thread that
/// last ran there counts in. Each CPU's task clock leaves out the time that
/// CPU spent in interrupts and stolen by the hypervisor, so on a busy VM
/// two CPUs' clocks differ by seconds and only one CPU's readings can be
/// subtracted. Read by moving the calling thread to `cpu` for a moment
/// (the kernel stamps `se.exec_start` when it starts running there, and
/// again on sched_yield) and back. None when it may not run there (a
/// cpuset) or without the file.
pub fn clock_ms_on(cpu: u32) -> Option<f64> {
    // SAFETY: cpu_set_t is plain data; the calls read or write only it.
    unsafe {
        let mut before: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(0, size, &mut before) != 0 {
            return None;
        }
        let mut only: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut only);
        if libc::sched_setaffinity(0, size, &only) != 0 {
            return None;
        }
        libc::sched_yield();
        let now = (libc::sched_getcpu() == cpu as i32)
            .then(|| std::fs::read("/proc/thread-self/sched").ok())
            .flatten()
            .and_then(|b| parse::exec_start_ms(&b));
        libc::sched_setaffinity(0, size, &before);
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_threads_files() {
        let me = std::process::id() as i32;
        let mut r = TaskReader::default();
        let st = r.stat(me, None).expect("own stat");
        assert_eq!(st.tid, me);
        let tid = unsafe { libc::gettid() };
        // This thread runs while it reads its own files.
        assert_eq!(r.stat(me, Some(tid)).unwrap().state, 'R');
        // Reading its own file, a thread is in that read (pread: the
        // file is kept open).
        assert!(
            matches!(r.syscall(me, tid), Some(Syscall::In { nr, .. }) if nr == libc::SYS_pread64),
            "{:?}",
            r.syscall(me, tid)
        );
        assert!(r.schedstat(me, tid).is_some());
        assert!(r.tids(me).contains(&tid));
        assert!(r.status(me, None).unwrap().rss_anon_kib.is_some());
        assert!(r.smaps_rollup(me).unwrap().rss_kib > 0);
        assert!(r.comm(me).is_some());
    }

    #[test]
    fn a_kept_file_reads_fresh_text_and_is_closed_when_its_task_ends() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut r = TaskReader::default();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(r.stat(pid, Some(pid)).unwrap().state, 'S');
        assert_eq!(r.kept.len(), 1);
        // SAFETY: stopping our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(
            r.stat(pid, Some(pid)).unwrap().state,
            'T',
            "read again, not cached"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(r.stat(pid, Some(pid)), None);
        assert!(r.kept.is_empty());
    }

    #[test]
    fn descriptor_kinds() {
        let me = std::process::id() as i32;
        let r = TaskReader::default();
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        assert_eq!(r.fd_kind(me, fds[0] as u64), FdKind::Pipe);
        let file = tempfile::tempfile().unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(r.fd_kind(me, file.as_raw_fd() as u64), FdKind::File);
        let ev = unsafe { libc::eventfd(0, 0) };
        assert_eq!(r.fd_kind(me, ev as u64), FdKind::Event);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(r.fd_kind(me, a.as_raw_fd() as u64), FdKind::Socket);
        assert_eq!(r.fd_kind(me, 999_999), FdKind::Unknown);
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
            libc::close(ev);
        }
    }
}
