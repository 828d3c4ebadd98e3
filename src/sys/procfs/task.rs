//! Reading single files of processes and threads fast and often, for
//! diagnose's sampling: one reused path and buffer, no allocation per read
//! beyond what the caller keeps. Also what a blocked thread waits on: its
//! system call, and the kind of file behind a descriptor.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};

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
        self.path.clear();
        let _ = self.path.write_fmt(args);
        let mut f = File::open(&self.path)?;
        self.len = 0;
        loop {
            if self.len == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = f.read(&mut self.buf[self.len..])?;
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

/// Per-process and per-thread files under one /proc root.
pub struct TaskReader {
    root: String,
    file: ProcFile,
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
        }
    }

    /// The directory of a process (tid None) or of one of its threads.
    fn read(&mut self, pid: i32, tid: Option<i32>, name: &str) -> io::Result<&[u8]> {
        let root = &self.root;
        match tid {
            None => self.file.read(format_args!("{root}/{pid}/{name}")),
            Some(t) => self.file.read(format_args!("{root}/{pid}/task/{t}/{name}")),
        }
    }

    /// /proc/PID/stat (tid None: the whole process, its threads' CPU and
    /// faults summed) or one thread's.
    pub fn stat(&mut self, pid: i32, tid: Option<i32>) -> Option<Stat> {
        parse::stat(self.read(pid, tid, "stat").ok()?)
    }

    pub fn status(&mut self, pid: i32, tid: Option<i32>) -> Option<Status> {
        Some(parse::status(self.read(pid, tid, "status").ok()?))
    }

    /// (on-CPU ns, run-queue wait ns, timeslices) of one task.
    pub fn schedstat(&mut self, pid: i32, tid: i32) -> Option<(u64, u64, u64)> {
        parse::schedstat(self.read(pid, Some(tid), "schedstat").ok()?)
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
        // Reading its own file, a thread is in that read.
        assert!(
            matches!(r.syscall(me, tid), Some(Syscall::In { nr, .. }) if nr == libc::SYS_read),
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
