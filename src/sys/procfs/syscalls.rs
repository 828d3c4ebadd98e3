//! Names of the system calls a blocked thread can wait in, from this
//! architecture's numbers (libc's `SYS_*`), so /proc/PID/task/TID/syscall
//! can be read by name. Only calls that block matter here; any other gets
//! `None` and is reported by number.

/// The name of system call `nr` on this architecture, for the calls a
/// thread can sleep in.
// libc names the numbers in lower case; they are constants all the same.
#[allow(non_upper_case_globals)]
pub fn name(nr: i64) -> Option<&'static str> {
    use libc::*;
    Some(match nr as c_long {
        SYS_futex => "futex",
        SYS_futex_waitv => "futex_waitv",
        SYS_read => "read",
        SYS_readv => "readv",
        SYS_pread64 => "pread64",
        SYS_preadv => "preadv",
        SYS_preadv2 => "preadv2",
        SYS_write => "write",
        SYS_writev => "writev",
        SYS_pwrite64 => "pwrite64",
        SYS_pwritev => "pwritev",
        SYS_pwritev2 => "pwritev2",
        SYS_recvfrom => "recvfrom",
        SYS_recvmsg => "recvmsg",
        SYS_recvmmsg => "recvmmsg",
        SYS_sendto => "sendto",
        SYS_sendmsg => "sendmsg",
        SYS_sendmmsg => "sendmmsg",
        SYS_accept4 => "accept4",
        SYS_connect => "connect",
        SYS_ppoll => "ppoll",
        SYS_pselect6 => "pselect6",
        SYS_epoll_pwait => "epoll_pwait",
        SYS_epoll_pwait2 => "epoll_pwait2",
        SYS_nanosleep => "nanosleep",
        SYS_clock_nanosleep => "clock_nanosleep",
        SYS_rt_sigtimedwait => "rt_sigtimedwait",
        SYS_rt_sigsuspend => "rt_sigsuspend",
        SYS_wait4 => "wait4",
        SYS_waitid => "waitid",
        SYS_clone => "clone",
        SYS_clone3 => "clone3",
        SYS_io_getevents => "io_getevents",
        SYS_io_uring_enter => "io_uring_enter",
        SYS_fsync => "fsync",
        SYS_fdatasync => "fdatasync",
        SYS_sync => "sync",
        SYS_syncfs => "syncfs",
        SYS_sync_file_range => "sync_file_range",
        SYS_msync => "msync",
        SYS_flock => "flock",
        SYS_fcntl => "fcntl",
        SYS_semop => "semop",
        SYS_semtimedop => "semtimedop",
        SYS_msgrcv => "msgrcv",
        SYS_msgsnd => "msgsnd",
        SYS_mq_timedreceive => "mq_timedreceive",
        SYS_mq_timedsend => "mq_timedsend",
        SYS_openat => "openat",
        SYS_close => "close",
        SYS_fallocate => "fallocate",
        SYS_ftruncate => "ftruncate",
        SYS_unlinkat => "unlinkat",
        SYS_renameat => "renameat",
        SYS_getdents64 => "getdents64",
        SYS_newfstatat => "newfstatat",
        SYS_statx => "statx",
        SYS_mmap => "mmap",
        SYS_munmap => "munmap",
        SYS_mprotect => "mprotect",
        SYS_madvise => "madvise",
        SYS_exit_group => "exit_group",
        SYS_ptrace => "ptrace",
        _ => return legacy(nr),
    })
}

/// Calls older architectures have and newer ones (aarch64) replaced by the
/// *at / p* variants above.
#[cfg(target_arch = "x86_64")]
#[allow(non_upper_case_globals)]
fn legacy(nr: i64) -> Option<&'static str> {
    use libc::*;
    Some(match nr as c_long {
        SYS_poll => "poll",
        SYS_select => "select",
        SYS_epoll_wait => "epoll_wait",
        SYS_pause => "pause",
        SYS_accept => "accept",
        SYS_open => "open",
        SYS_stat => "stat",
        SYS_lstat => "lstat",
        SYS_unlink => "unlink",
        SYS_rename => "rename",
        SYS_vfork => "vfork",
        _ => return None,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn legacy(_nr: i64) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    #[test]
    // c_long is i32 on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    fn names_by_this_architectures_numbers() {
        assert_eq!(super::name(libc::SYS_futex as i64), Some("futex"));
        assert_eq!(super::name(libc::SYS_read as i64), Some("read"));
        assert_eq!(super::name(-1), None);
        #[cfg(target_arch = "x86_64")]
        {
            // Numbers seen in /proc/PID/task/TID/syscall on this machine.
            assert_eq!(super::name(202), Some("futex"));
            assert_eq!(super::name(7), Some("poll"));
            assert_eq!(super::name(270), Some("pselect6"));
            assert_eq!(super::name(232), Some("epoll_wait"));
            assert_eq!(super::name(230), Some("clock_nanosleep"));
            assert_eq!(super::name(61), Some("wait4"));
            assert_eq!(super::name(58), Some("vfork"));
        }
    }
}
