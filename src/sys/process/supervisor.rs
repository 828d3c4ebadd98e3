//! The supervisor: a small process between kdiag and every command it runs
//! (`-- CMD`, workloads), so nothing CMD starts outlives kdiag, even when
//! kdiag is killed with SIGKILL, which it cannot catch.
//!
//! ```text
//! kdiag ──fork──> supervisor S ──fork──> CMD (own process group, PDEATHSIG)
//!   │  control pipe (T, K, EOF) ─> │  ── events pipe: Started, Ended ──> kdiag
//! ```
//!
//! S is a child subreaper: whatever CMD forks (a pipeline, a setsid'd
//! daemon) is re-parented to S when its parent dies, never to init. S
//! watches CMD (a pidfd) and the control pipe from kdiag. The write end of
//! that pipe is held by kdiag alone, so EOF means kdiag has gone, however
//! it went. Then, or on `K`, S kills CMD's process group, the cgroup if it
//! has one (cgroup v2 `cgroup.kill`), and every child it has, round after
//! round until none is left, reaps them all and exits. CMD has
//! PR_SET_PDEATHSIG(SIGKILL) as a second line, for when S itself is killed.
//!
//! When CMD exits, S reads its /proc/PID/io (an fd opened while CMD lived),
//! reaps it with wait4 and sends kdiag the wait status, the rusage and those
//! counters: kdiag reports them as if CMD were its own child.
//!
//! S runs in a forked copy of kdiag, which may have threads: between fork
//! and exit it makes only async-signal-safe calls (raw system calls on
//! buffers prepared before the fork, no allocation, no locks).

use std::ffi::CStr;
use std::os::fd::RawFd;

/// How long the command has to end after SIGTERM when kdiag has gone
/// before everything is killed: a workload removing its scratch files may
/// wait behind its own throttled reads (bio) for a second or more.
const GONE_GRACE_NS: u64 = 3_000_000_000;

/// Of `TERMINAL_SIGNALS`, those kdiag was started with ignored (`nohup`
/// ignores SIGHUP, a shell's background job SIGINT and SIGQUIT): bit N for
/// signal N. The command gets them ignored too, as it would have without
/// kdiag in between (an ignored signal stays ignored across exec).
static INHERITED_IGNORED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Note which terminal signals kdiag was started with ignored. Call first
/// thing in main, before anything installs a handler (SIGPIPE is not
/// noted: Rust's start-up ignores it for every program, so the default is
/// what a shell would have given).
pub fn note_inherited_dispositions() {
    let mut ignored = 0u64;
    for sig in TERMINAL_SIGNALS {
        if sig == libc::SIGPIPE {
            continue;
        }
        // SAFETY: a zeroed sigaction is a valid out-parameter; a null new
        // action only reads the current one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } == 0
            && old.sa_sigaction == libc::SIG_IGN
        {
            ignored |= 1 << sig;
        }
    }
    INHERITED_IGNORED.store(ignored, std::sync::atomic::Ordering::Relaxed);
}

/// The disposition the command starts with for `sig` (one of
/// `TERMINAL_SIGNALS`): ignored if kdiag was started so, else the default.
/// Async-signal-safe (one atomic load).
pub(super) fn command_disposition(sig: i32) -> libc::sighandler_t {
    if INHERITED_IGNORED.load(std::sync::atomic::Ordering::Relaxed) & (1 << sig) != 0 {
        libc::SIG_IGN
    } else {
        libc::SIG_DFL
    }
}

/// The signals a terminal sends to its foreground group (and SIGPIPE):
/// the supervisor ignores them, the command gets them back as kdiag was
/// started with them (`command_disposition`) before it execs.
pub(super) const TERMINAL_SIGNALS: [i32; 8] = [
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGPIPE,
];

/// Bytes of /proc/PID/io kept (the file is about 100 bytes).
pub const IO_MAX: usize = 512;

/// Control bytes from kdiag to S.
pub const TERMINATE: u8 = b'T';
pub const KILL: u8 = b'K';

/// What S tells kdiag.
pub const STARTED: u32 = 1;
pub const FORK_FAILED: u32 = 2;
pub const ENDED: u32 = 3;

/// One message from S, written with one write(2): smaller than PIPE_BUF,
/// so it arrives whole. No implicit padding (every byte is initialised).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Report {
    pub kind: u32,
    /// STARTED: CMD's pid.
    pub pid: i32,
    /// FORK_FAILED: the errno.
    pub errno: i32,
    /// ENDED: the wait status.
    pub status: i32,
    /// ENDED: CLOCK_MONOTONIC (ns) when S saw CMD end.
    pub ended_ns: u64,
    /// ENDED: CMD's resource usage, its waited-for children included.
    pub rusage: libc::rusage,
    /// ENDED: how many bytes of `io` hold /proc/PID/io (0: unreadable).
    pub io_len: u32,
    pub _pad: u32,
    pub io: [u8; IO_MAX],
}

const _: () = assert!(size_of::<Report>() < libc::PIPE_BUF);
const _: () = assert!(size_of::<Report>() == 4 * 4 + 8 + size_of::<libc::rusage>() + 8 + IO_MAX);

impl Report {
    pub fn empty(kind: u32) -> Report {
        // SAFETY: every field is plain data for which zero is valid.
        let mut r: Report = unsafe { std::mem::zeroed() };
        r.kind = kind;
        r
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: repr(C) without padding: every byte is initialised.
        unsafe { std::slice::from_raw_parts((self as *const Report).cast(), size_of::<Report>()) }
    }

    pub fn from_bytes(b: &[u8; size_of::<Report>()]) -> Report {
        // SAFETY: any bit pattern is a valid Report; read_unaligned copes
        // with the buffer's alignment.
        unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) }
    }

    /// The /proc/PID/io text sent with ENDED, if any.
    pub fn io_text(&self) -> Option<String> {
        let n = (self.io_len as usize).min(IO_MAX);
        (n > 0).then(|| String::from_utf8_lossy(&self.io[..n]).into_owned())
    }
}

/// rmdir, retried briefly: a cgroup is busy until its last task is gone.
fn remove_dir(dir: &CStr) {
    for _ in 0..200 {
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::rmdir(dir.as_ptr()) } == 0 || errno() == libc::ENOENT {
            return;
        }
        sleep_ms(1);
    }
}

fn errno() -> i32 {
    // SAFETY: errno is thread-local; reading it is always safe.
    unsafe { *libc::__errno_location() }
}

fn sleep_ms(ms: i64) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: ms * 1_000_000,
    };
    // SAFETY: a valid timespec; async-signal-safe.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

fn write_all(fd: RawFd, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        // SAFETY: writing from a live buffer of the given length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            return false;
        }
        buf = &buf[n as usize..];
    }
    true
}

/// `n` in decimal into `buf`, returning the digits (async-signal-safe:
/// for a forked child, which may not allocate).
pub(crate) fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// The descriptors S works with (its ends of the pipes, the cgroup's).
pub struct Fds {
    pub events: RawFd,
    pub control: RawFd,
    /// Descriptors CMD needs until it execs (the gate, the exec report, its
    /// output or -1): kept across the first clean-up, closed in S once CMD
    /// is forked.
    pub for_child: [RawFd; 3],
    pub cgroup: Option<(RawFd, RawFd, *const libc::c_char)>,
}

/// Close kdiag's own descriptors (those marked close-on-exec: every one
/// kdiag opens, perf and BPF ones included) except those in `keep`. The
/// ones kdiag inherited without that mark stay, for CMD to inherit in turn
/// (`kdiag time -- cmd 3<file`).
fn close_own_but(keep: &[RawFd]) {
    let dir = c"/proc/self/fd";
    // SAFETY: raw system calls on a local buffer (async-signal-safe).
    unsafe {
        let dfd = libc::open(
            dir.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dfd < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        // Collect first, close after: closing while listing skips entries.
        let mut doomed = [0 as RawFd; 1024];
        let mut count = 0;
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dfd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                let name = &buf[off + 19..off + reclen];
                let mut fd: RawFd = 0;
                let mut digits = false;
                for &b in name.iter().take_while(|&&b| b != 0) {
                    digits = b.is_ascii_digit();
                    if !digits {
                        break;
                    }
                    fd = fd.saturating_mul(10).saturating_add(RawFd::from(b - b'0'));
                }
                let cloexec = digits
                    && fd > 2
                    && fd != dfd
                    && libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0;
                if cloexec && !keep.contains(&fd) && count < doomed.len() {
                    doomed[count] = fd;
                    count += 1;
                }
                off += reclen.max(1);
            }
        }
        libc::close(dfd);
        for &fd in &doomed[..count] {
            libc::close(fd);
        }
    }
}

fn send(fd: RawFd, r: &Report) {
    write_all(fd, r.as_bytes());
}

/// S's state while it runs.
struct Watch {
    fds: Fds,
    cmd: i32,
    /// A pidfd for CMD (readable when it exits), or -1.
    pidfd: RawFd,
    /// /proc/CMD/io, opened while CMD lived, or -1.
    io: RawFd,
    cmd_done: bool,
}

impl Watch {
    /// CMD has exited (it is a zombie): read its counters, reap it, tell
    /// kdiag. `status`/`ru` are given when CMD was already reaped.
    fn cmd_ended(&mut self, reaped: Option<(i32, libc::rusage)>) {
        let mut r = Report::empty(ENDED);
        r.ended_ns = crate::sys::monotonic_ns();
        if self.io >= 0 {
            // SAFETY: reading into our buffer from a descriptor we own.
            let n = unsafe { libc::pread(self.io, r.io.as_mut_ptr().cast(), IO_MAX, 0) };
            r.io_len = n.max(0) as u32;
        }
        let (status, ru) = match reaped {
            Some(x) => x,
            None => {
                let mut status = 0;
                // SAFETY: plain data for wait4 to fill.
                let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                loop {
                    // SAFETY: waiting for our own child.
                    let rc = unsafe { libc::wait4(self.cmd, &mut status, 0, &mut ru) };
                    if rc == self.cmd || errno() != libc::EINTR {
                        break;
                    }
                }
                (status, ru)
            }
        };
        r.status = status;
        r.rusage = ru;
        send(self.fds.events, &r);
        self.cmd_done = true;
        for fd in [&mut self.pidfd, &mut self.io] {
            if *fd >= 0 {
                // SAFETY: our own descriptor, closed once.
                unsafe { libc::close(*fd) };
                *fd = -1;
            }
        }
    }

    /// Whether CMD has exited (not reaped yet).
    fn cmd_exited(&self) -> bool {
        // SAFETY: siginfo_t is plain data; WNOWAIT leaves CMD unreaped.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                self.cmd as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: waitid filled si_pid when it found a child.
        rc == 0 && unsafe { info.si_pid() } == self.cmd
    }

    /// Signal CMD's process group and every child of S.
    fn signal_all(&self, sig: i32) {
        // SAFETY: signalling the group CMD leads; harmless if it is gone.
        unsafe { libc::kill(-self.cmd, sig) };
        for_each_child(|pid| {
            // SAFETY: our own child (not reaped: it is still listed).
            unsafe { libc::kill(pid, sig) };
        });
    }

    /// Reap children that ended, CMD aside until its counters are read.
    fn reap_others(&mut self) {
        if self.cmd_done {
            loop {
                let mut status = 0;
                // SAFETY: reaping any child of ours, without blocking.
                let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if rc <= 0 {
                    return;
                }
            }
        }
        let cmd = self.cmd;
        for_each_child(|pid| {
            if pid != cmd {
                let mut status = 0;
                // SAFETY: reaping one child of ours, without blocking.
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            }
        });
    }

    /// SIGTERM to everything below S; wait up to `grace_ns` for CMD to end.
    fn terminate_within(&mut self, grace_ns: u64) {
        self.signal_all(libc::SIGTERM);
        let end = crate::sys::monotonic_ns() + grace_ns;
        while !self.cmd_done && crate::sys::monotonic_ns() < end {
            let mut p = libc::pollfd {
                fd: self.pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd on our stack (fd -1 just sleeps).
            unsafe { libc::poll(&mut p, 1, 10) };
            if p.revents != 0 || (self.pidfd < 0 && self.cmd_exited()) {
                self.cmd_ended(None);
            }
        }
    }

    /// Kill everything below S and reap it all, CMD's end reported.
    fn kill_all(&mut self) {
        if let Some((_, kill, _)) = self.fds.cgroup {
            write_all(kill, b"1");
        }
        loop {
            self.signal_all(libc::SIGKILL);
            if !self.cmd_done && self.cmd_exited() {
                self.cmd_ended(None);
            }
            let mut status = 0;
            // SAFETY: plain data for wait4 to fill.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let rc = loop {
                // SAFETY: reaping any child of ours, without blocking.
                let rc = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, &mut ru) };
                if rc > 0 && rc == self.cmd && !self.cmd_done {
                    self.cmd_ended(Some((status, ru)));
                    continue;
                }
                if rc <= 0 {
                    break rc;
                }
            };
            if rc < 0 && errno() == libc::ECHILD {
                break;
            }
            sleep_ms(1);
        }
        if let Some((_, _, dir)) = self.fds.cgroup {
            // SAFETY: the path is a CString made before the fork, alive in
            // this copy of kdiag's memory.
            remove_dir(unsafe { CStr::from_ptr(dir) });
        }
    }
}

/// Call `f` with each pid in /proc/thread-self/children (S's children).
fn for_each_child(mut f: impl FnMut(i32)) {
    let path = c"/proc/thread-self/children";
    // SAFETY: a static path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    // SAFETY: reading into our buffer.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    let mut pid: i32 = 0;
    let mut digits = false;
    for &b in &buf[..n.max(0) as usize] {
        if b.is_ascii_digit() {
            pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
            digits = true;
        } else {
            if digits {
                f(pid);
            }
            pid = 0;
            digits = false;
        }
    }
    if digits {
        f(pid);
    }
}

/// S's whole life, in the forked supervisor: start CMD with `child` (given
/// S's pid; it execs and does not return), report it, watch it, clean up, exit.
///
/// # Safety
/// Call only in a freshly forked child; `fds` are its descriptors.
pub unsafe fn supervise(kdiag: i32, fds: Fds, child: impl FnOnce(i32)) -> ! {
    // SAFETY (whole function): raw system calls on data prepared before
    // the fork and on stack buffers; see the module comment.
    unsafe {
        // Only what S and CMD need stays open: not kdiag's perf, BPF or
        // tracing descriptors, which must not outlive kdiag in S.
        let keep = [
            fds.events,
            fds.control,
            fds.for_child[0],
            fds.for_child[1],
            fds.for_child[2],
            fds.cgroup.map_or(-1, |c| c.0),
            fds.cgroup.map_or(-1, |c| c.1),
        ];
        close_own_but(&keep);
        // The terminal's signals reach kdiag's process group, S's too: S
        // must survive them to clean up. CMD restores the defaults.
        for sig in TERMINAL_SIGNALS {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // kdiag died before we got here: start nothing.
        if libc::getppid() != kdiag {
            libc::_exit(0);
        }
        let me = libc::getpid();
        let cmd = libc::fork();
        if cmd == 0 {
            libc::close(fds.events);
            libc::close(fds.control);
            if let Some((procs, kill, _)) = fds.cgroup {
                libc::close(procs);
                libc::close(kill);
            }
            // Killed when S dies (S itself SIGKILLed); S may have died
            // before the prctl: then do not run at all.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != me {
                libc::_exit(127);
            }
            libc::setpgid(0, 0);
            child(me);
            libc::_exit(127);
        }
        if cmd < 0 {
            let mut r = Report::empty(FORK_FAILED);
            r.errno = errno();
            send(fds.events, &r);
            libc::_exit(1);
        }
        // Both sides set the group, so it exists whoever runs first.
        libc::setpgid(cmd, cmd);
        let mut digits = [0u8; 10];
        let pid_text = decimal(cmd as u32, &mut digits);
        if let Some((procs, _, _)) = fds.cgroup {
            write_all(procs, pid_text);
            libc::close(procs);
        }
        for fd in fds.for_child {
            libc::close(fd);
        }
        // stdin/out/err are CMD's: S holding them would keep a pipe open.
        // (Other inherited descriptors stay: S lives no longer than kdiag.)
        for fd in 0..3 {
            libc::close(fd);
        }
        let mut path = [0u8; 32];
        let mut len = 0;
        for part in [b"/proc/".as_slice(), pid_text, b"/io\0"] {
            path[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        let io = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        let pidfd = libc::syscall(libc::SYS_pidfd_open, cmd, 0) as RawFd;
        let mut w = Watch {
            fds,
            cmd,
            pidfd,
            io,
            cmd_done: false,
        };
        let mut r = Report::empty(STARTED);
        r.pid = cmd;
        send(w.fds.events, &r);
        loop {
            let mut polls = [
                libc::pollfd {
                    fd: w.fds.control,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: w.pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // Without a pidfd (kernel < 5.3), look every 10 ms.
            let timeout = if !w.cmd_done && w.pidfd < 0 { 10 } else { 200 };
            let n = libc::poll(polls.as_mut_ptr(), 2, timeout);
            if n < 0 && errno() != libc::EINTR {
                break;
            }
            if !w.cmd_done && (polls[1].revents != 0 || (w.pidfd < 0 && w.cmd_exited())) {
                w.cmd_ended(None);
            }
            if polls[0].revents != 0 {
                let mut byte = 0u8;
                let got = libc::read(w.fds.control, (&raw mut byte).cast(), 1);
                match (got, byte) {
                    (1, TERMINATE) => w.signal_all(libc::SIGTERM),
                    (1, _) => break,
                    (n, _) if n < 0 && errno() == libc::EINTR => {}
                    // EOF: kdiag has gone, however it went (SIGKILL
                    // too): SIGTERM first, so a workload can remove its
                    // scratch files, then SIGKILL below.
                    _ => {
                        w.terminate_within(GONE_GRACE_NS);
                        break;
                    }
                }
            }
            w.reap_others();
        }
        w.kill_all();
        libc::_exit(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_digits_without_allocating() {
        let mut buf = [0u8; 10];
        assert_eq!(super::decimal(0, &mut buf), b"0");
        assert_eq!(super::decimal(4194304, &mut buf), b"4194304");
        assert_eq!(super::decimal(u32::MAX, &mut buf), b"4294967295");
    }
}
