//! Where a sampled thread is, as a thread state (TSA): from its state
//! letter, the system call it is blocked in and what that call waits on
//! (the kernel's own structure, the same on every kernel version), and only
//! as a fallback from the name of the kernel function it sleeps in (wchan),
//! which changes between versions (this kernel says `anon_pipe_read` and
//! `poll_schedule_timeout` where older ones said `pipe_read` and
//! `do_sys_poll`).

use crate::model::diagnosis::ThreadState;

/// A thread state with the reason, for the report ("timer", "input (pipe)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub state: ThreadState,
    pub why: &'static str,
}

const fn w(state: ThreadState, why: &'static str) -> Wait {
    Wait { state, why }
}

use ThreadState::*;

/// Classify one sample: state letter, wait channel, system call name
/// ("fault" outside any, "" when unknown) and what it waits on (the kind of
/// file behind the descriptor, or "mutex"/"futex").
pub fn classify(state: char, wchan: &str, syscall: &str, on: &str) -> Wait {
    match state {
        'R' => return w(OnCpu, "running or runnable"),
        'T' => return w(Stopped, "stopped by a signal"),
        't' => return w(Stopped, "stopped by its tracer"),
        'Z' | 'X' => return w(Other, "exiting"),
        'I' => return w(Sleeping, "idle kernel thread"),
        _ => {}
    }
    let d = state == 'D';
    if let Some(wait) = by_syscall(d, syscall, on) {
        return wait;
    }
    by_wchan(d, wchan)
}

/// The wait channel adds nothing for a sleeping thread whose system call
/// already says where it waits (reading it costs a kernel symbol lookup).
pub fn needs_wchan(state: char, syscall: &str, on: &str) -> bool {
    state == 'D' || by_syscall(false, syscall, on).is_none()
}

/// What a futex or semaphore wait is on once the waiters' stacks showed
/// a runtime's lock.
pub const RUNTIME_LOCK: &str = "runtime-lock";

fn by_syscall(d: bool, syscall: &str, on: &str) -> Option<Wait> {
    let stream = matches!(on, "pipe" | "socket" | "terminal" | "char-device" | "event");
    let storage = matches!(on, "file" | "block-device" | "directory");
    Some(match syscall {
        "fault" if d => w(Storage, "page fault"),
        "futex" if on == "mutex" => w(Lock, "mutex (futex)"),
        // A runtime's lock, named by the waiters' stacks (`analysis::locks`),
        // whatever call it waits in (PostgreSQL's in epoll_wait).
        _ if on == RUNTIME_LOCK => w(Lock, "runtime lock"),
        "futex" | "futex_waitv" => w(Sleeping, "condition (futex)"),
        "nanosleep" | "clock_nanosleep" => w(Sleeping, "timer"),
        "poll" | "ppoll" | "select" | "pselect6" | "epoll_wait" | "epoll_pwait"
        | "epoll_pwait2" => w(Sleeping, "events (poll)"),
        "read" | "readv" | "pread64" | "preadv" | "preadv2" | "recvfrom" | "recvmsg"
        | "recvmmsg" => match on {
            "pipe" => w(Sleeping, "input (pipe)"),
            "socket" => w(Sleeping, "input (socket)"),
            "terminal" => w(Sleeping, "input (terminal)"),
            _ if stream => w(Sleeping, "input"),
            _ if storage || d => w(Storage, "read"),
            _ => return None,
        },
        "write" | "writev" | "pwrite64" | "pwritev" | "pwritev2" | "sendto" | "sendmsg"
        | "sendmmsg" => match on {
            "pipe" => w(Sleeping, "output (pipe full)"),
            "socket" => w(Sleeping, "output (socket full)"),
            _ if stream => w(Sleeping, "output"),
            _ if storage || d => w(Storage, "write"),
            _ => return None,
        },
        "msgrcv" | "mq_timedreceive" => w(Sleeping, "input (message queue)"),
        "msgsnd" | "mq_timedsend" => w(Sleeping, "output (message queue)"),
        "accept" | "accept4" => w(Sleeping, "input (connections)"),
        "wait4" | "waitid" => w(Sleeping, "children"),
        // A parent blocks in these only for a vfork child (sh, posix_spawn),
        // until the child execs or exits: the child's time, not its own.
        "vfork" | "clone" | "clone3" => w(Sleeping, "children"),
        "rt_sigtimedwait" | "rt_sigsuspend" | "pause" => w(Sleeping, "signal"),
        "io_getevents" | "io_uring_enter" => w(Storage, "async I/O"),
        "fsync" | "fdatasync" | "sync" | "syncfs" | "sync_file_range" | "msync" => {
            w(Storage, "fsync")
        }
        "flock" | "fcntl" if !d => w(Lock, "file lock"),
        "semop" | "semtimedop" => w(Lock, "semaphore"),
        _ => return None,
    })
}

/// Kernel functions by name, for when the system call says nothing (it
/// could not be read, or it is a call like openat that blocks inside the
/// file system). Compiler suffixes (".isra.0", ".constprop.0") are cut.
fn by_wchan(d: bool, wchan: &str) -> Wait {
    let name = wchan.split('.').next().unwrap_or("");
    let any = |list: &[&str]| list.iter().any(|p| name.starts_with(p));
    if name.is_empty() {
        return w(Other, if d { "uninterruptible" } else { "sleeping" });
    }
    if any(&[
        "mutex",
        "__mutex",
        "rwsem",
        "down_read",
        "down_write",
        "rt_mutex",
        "percpu_rwsem",
    ]) {
        return w(Lock, "kernel lock");
    }
    if any(STORAGE) {
        return w(Storage, "block I/O");
    }
    if d {
        // D is not always storage (msleep, device waits): say where.
        return w(Other, "uninterruptible");
    }
    if any(&["futex"]) {
        // Without the syscall's arguments a mutex and a condition look
        // alike; a futex wait counts as a lock, as most are.
        return w(Lock, "futex");
    }
    if any(&[
        "hrtimer_nanosleep",
        "do_nanosleep",
        "schedule_hrtimeout",
        "schedule_timeout",
    ]) {
        return w(Sleeping, "timer");
    }
    if any(&[
        "ep_poll",
        "do_epoll_wait",
        "do_sys_poll",
        "poll_schedule_timeout",
        "do_select",
        "core_sys_select",
    ]) {
        return w(Sleeping, "events (poll)");
    }
    if any(&[
        "pipe_read",
        "anon_pipe_read",
        "pipe_wait_readable",
        "unix_stream",
        "unix_dgram",
        "sk_wait_data",
        "tcp_recvmsg",
        "wait_woken",
        "inet_csk_accept",
        "n_tty_read",
        "tty_read",
        "eventfd_read",
        "__skb_wait",
        "skb_wait",
    ]) {
        return w(Sleeping, "input");
    }
    if any(&[
        "pipe_write",
        "anon_pipe_write",
        "pipe_wait_writable",
        "sk_stream_wait_memory",
        "unix_wait_for_peer",
    ]) {
        return w(Sleeping, "output");
    }
    if any(&["do_wait", "kernel_wait4"]) {
        return w(Sleeping, "children");
    }
    if any(&[
        "do_sigtimedwait",
        "__do_sys_pause",
        "sys_pause",
        "sigsuspend",
        "__se_sys_rt_sigsuspend",
    ]) {
        return w(Sleeping, "signal");
    }
    if any(&[
        "worker_thread",
        "kthread_worker_fn",
        "smpboot_thread_fn",
        "rescuer_thread",
        "kthreadd",
        "rcu_gp",
        "kswapd",
        "kcompactd",
        "khugepaged",
        "watchdog",
    ]) {
        return w(Sleeping, "kernel thread waiting for work");
    }
    w(Other, "sleeping")
}

/// Kernel functions a thread sleeps in while it waits for storage.
const STORAGE: &[&str] = &[
    "io_schedule",
    "folio_wait",
    "__folio_lock",
    "wait_on_page",
    "__lock_page",
    "blk_",
    "bio_",
    "submit_bio_wait",
    "wait_on_buffer",
    "__wait_on_buffer",
    "__sync_dirty_buffer",
    "sync_dirty_buffer",
    "bit_wait_io",
    "balance_dirty_pages",
    "jbd2",
    "ext4_",
    "xfs_",
    "btrfs_",
    "nfs_",
    "filemap_",
    "file_write_and_wait",
    "wait_for_completion_io",
    "iomap_dio",
    "__blkdev_direct_IO",
    "blkdev_",
    "writeback_",
    "wb_wait",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn state(st: char, wchan: &str, sys: &str, on: &str) -> ThreadState {
        classify(st, wchan, sys, on).state
    }

    /// Every wait captured on this kernel (Linux 6.18) with a thread per
    /// kind of wait: its wchan and syscall as read from /proc.
    #[test]
    fn this_kernels_waits_by_syscall() {
        assert_eq!(state('S', "futex_do_wait", "futex", "mutex"), Lock);
        assert_eq!(state('S', "futex_do_wait", "futex", "futex"), Sleeping);
        assert_eq!(state('S', "anon_pipe_read", "read", "pipe"), Sleeping);
        assert_eq!(
            state('S', "poll_schedule_timeout.constprop.0", "poll", ""),
            Sleeping
        );
        assert_eq!(state('S', "do_epoll_wait", "epoll_wait", ""), Sleeping);
        assert_eq!(
            state('S', "hrtimer_nanosleep", "clock_nanosleep", ""),
            Sleeping
        );
        assert_eq!(
            state('S', "unix_stream_read_generic", "recvfrom", "socket"),
            Sleeping
        );
        assert_eq!(state('S', "anon_pipe_write", "write", "pipe"), Sleeping);
        assert_eq!(
            state('S', "do_sigtimedwait.isra.0", "rt_sigtimedwait", ""),
            Sleeping
        );
        assert_eq!(state('S', "do_wait", "wait4", ""), Sleeping);
        assert_eq!(state('D', "kernel_clone", "vfork", ""), Sleeping);
        assert_eq!(state('S', "__do_sys_pause", "pause", ""), Sleeping);
        assert_eq!(state('D', "folio_wait_bit_common", "fault", ""), Storage);
        assert_eq!(
            state('D', "folio_wait_bit_common", "write", "file"),
            Storage
        );
        assert_eq!(state('D', "", "fdatasync", "file"), Storage);
        assert_eq!(state('S', "", "io_getevents", ""), Storage);
        assert_eq!(state('T', "do_signal_stop", "", ""), Stopped);
        assert_eq!(state('t', "ptrace_stop", "", ""), Stopped);
        assert_eq!(state('R', "", "", ""), OnCpu);
        // A read that blocks on a regular file in the file system.
        assert_eq!(state('D', "", "read", "file"), Storage);
    }

    /// Without the syscall file (no ptrace access), the same waits by the
    /// names of this kernel's functions.
    #[test]
    fn this_kernels_waits_by_name() {
        assert_eq!(state('S', "anon_pipe_read", "", ""), Sleeping);
        assert_eq!(
            state('S', "poll_schedule_timeout.constprop.0", "", ""),
            Sleeping
        );
        assert_eq!(state('S', "do_epoll_wait", "", ""), Sleeping);
        assert_eq!(state('S', "hrtimer_nanosleep", "", ""), Sleeping);
        assert_eq!(state('S', "unix_stream_read_generic", "", ""), Sleeping);
        assert_eq!(state('S', "anon_pipe_write", "", ""), Sleeping);
        assert_eq!(state('S', "do_sigtimedwait.isra.0", "", ""), Sleeping);
        assert_eq!(state('S', "do_wait", "", ""), Sleeping);
        assert_eq!(state('S', "futex_do_wait", "", ""), Lock);
        assert_eq!(state('D', "folio_wait_bit_common", "", ""), Storage);
        assert_eq!(state('D', "__sync_dirty_buffer", "", ""), Storage);
        assert_eq!(state('D', "submit_bio_wait", "", ""), Storage);
        assert_eq!(state('D', "rwsem_down_write_slowpath", "", ""), Lock);
        assert_eq!(state('D', "msleep", "", ""), Other);
        assert_eq!(state('S', "some_driver_wait", "", ""), Other);
        // An older kernel's names still work.
        assert_eq!(state('S', "pipe_read", "", ""), Sleeping);
        assert_eq!(state('S', "do_sys_poll", "", ""), Sleeping);
    }

    #[test]
    fn a_blocking_call_on_an_unknown_descriptor_falls_back_to_the_name() {
        assert_eq!(state('S', "anon_pipe_read", "read", ""), Sleeping);
        assert_eq!(state('D', "folio_wait_bit_common", "openat", ""), Storage);
        assert_eq!(classify('S', "x", "flock", "").why, "file lock");
    }
}
