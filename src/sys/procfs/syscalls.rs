//! Names of system calls by this architecture's numbers, as
//! /proc/PID/task/TID/syscall and the raw_syscalls tracepoints give them.

/// The name of system call `nr`; None for a number this table has not.
#[cfg(target_arch = "x86_64")]
pub fn name(nr: i64) -> Option<&'static str> {
    static NAMES: std::sync::OnceLock<Vec<&str>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| X86_64.split_whitespace().collect());
    names
        .get(usize::try_from(nr).ok()?)
        .copied()
        .filter(|&n| n != "-")
}

/// x86_64's system calls in number order, `-` where a number is unused:
/// 0..=450 generated from linux-libc-dev's asm/unistd_64.h (Linux 6.1),
/// 451..=470 from the kernel's arch/x86/entry/syscalls/syscall_64.tbl
/// (Linux 6.18). Newer numbers are shown by number.
#[cfg(target_arch = "x86_64")]
const X86_64: &str = "\
    read write open close stat fstat lstat poll lseek mmap mprotect munmap brk rt_sigaction \
    rt_sigprocmask rt_sigreturn ioctl pread64 pwrite64 readv writev access pipe select \
    sched_yield mremap msync mincore madvise shmget shmat shmctl dup dup2 pause nanosleep \
    getitimer alarm setitimer getpid sendfile socket connect accept sendto recvfrom sendmsg \
    recvmsg shutdown bind listen getsockname getpeername socketpair setsockopt getsockopt \
    clone fork vfork execve exit wait4 kill uname semget semop semctl shmdt msgget msgsnd \
    msgrcv msgctl fcntl flock fsync fdatasync truncate ftruncate getdents getcwd chdir fchdir \
    rename mkdir rmdir creat link unlink symlink readlink chmod fchmod chown fchown lchown \
    umask gettimeofday getrlimit getrusage sysinfo times ptrace getuid syslog getgid setuid \
    setgid geteuid getegid setpgid getppid getpgrp setsid setreuid setregid getgroups \
    setgroups setresuid getresuid setresgid getresgid getpgid setfsuid setfsgid getsid capget \
    capset rt_sigpending rt_sigtimedwait rt_sigqueueinfo rt_sigsuspend sigaltstack utime mknod \
    uselib personality ustat statfs fstatfs sysfs getpriority setpriority sched_setparam \
    sched_getparam sched_setscheduler sched_getscheduler sched_get_priority_max \
    sched_get_priority_min sched_rr_get_interval mlock munlock mlockall munlockall vhangup \
    modify_ldt pivot_root _sysctl prctl arch_prctl adjtimex setrlimit chroot sync acct \
    settimeofday mount umount2 swapon swapoff reboot sethostname setdomainname iopl ioperm \
    create_module init_module delete_module get_kernel_syms query_module quotactl nfsservctl \
    getpmsg putpmsg afs_syscall tuxcall security gettid readahead setxattr lsetxattr fsetxattr \
    getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr removexattr lremovexattr \
    fremovexattr tkill time futex sched_setaffinity sched_getaffinity set_thread_area io_setup \
    io_destroy io_getevents io_submit io_cancel get_thread_area lookup_dcookie epoll_create \
    epoll_ctl_old epoll_wait_old remap_file_pages getdents64 set_tid_address restart_syscall \
    semtimedop fadvise64 timer_create timer_settime timer_gettime timer_getoverrun \
    timer_delete clock_settime clock_gettime clock_getres clock_nanosleep exit_group \
    epoll_wait epoll_ctl tgkill utimes vserver mbind set_mempolicy get_mempolicy mq_open \
    mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr kexec_load waitid add_key \
    request_key keyctl ioprio_set ioprio_get inotify_init inotify_add_watch inotify_rm_watch \
    migrate_pages openat mkdirat mknodat fchownat futimesat newfstatat unlinkat renameat \
    linkat symlinkat readlinkat fchmodat faccessat pselect6 ppoll unshare set_robust_list \
    get_robust_list splice tee sync_file_range vmsplice move_pages utimensat epoll_pwait \
    signalfd timerfd_create eventfd fallocate timerfd_settime timerfd_gettime accept4 \
    signalfd4 eventfd2 epoll_create1 dup3 pipe2 inotify_init1 preadv pwritev rt_tgsigqueueinfo \
    perf_event_open recvmmsg fanotify_init fanotify_mark prlimit64 name_to_handle_at \
    open_by_handle_at clock_adjtime syncfs sendmmsg setns getcpu process_vm_readv \
    process_vm_writev kcmp finit_module sched_setattr sched_getattr renameat2 seccomp \
    getrandom memfd_create kexec_file_load bpf execveat userfaultfd membarrier mlock2 \
    copy_file_range preadv2 pwritev2 pkey_mprotect pkey_alloc pkey_free statx io_pgetevents \
    rseq - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - \
    - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - \
    - pidfd_send_signal io_uring_setup io_uring_enter io_uring_register open_tree move_mount \
    fsopen fsconfig fsmount fspick pidfd_open clone3 close_range openat2 pidfd_getfd \
    faccessat2 process_madvise epoll_pwait2 mount_setattr quotactl_fd landlock_create_ruleset \
    landlock_add_rule landlock_restrict_self memfd_secret process_mrelease futex_waitv \
    set_mempolicy_home_node cachestat fchmodat2 map_shadow_stack futex_wake futex_wait \
    futex_requeue statmount listmount lsm_get_self_attr lsm_set_self_attr lsm_list_modules \
    mseal setxattrat getxattrat listxattrat removexattrat open_tree_attr file_getattr \
    file_setattr listns";

/// Elsewhere, the calls a thread can sleep in, by libc's numbers.
#[cfg(not(target_arch = "x86_64"))]
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
        _ => return None,
    })
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
            // Every number in its place: the table's ends, its gap, and
            // libc's numbers of the calls it has.
            assert_eq!(super::name(0), Some("read"));
            assert_eq!(super::name(110), Some("getppid"));
            assert_eq!(super::name(334), Some("rseq"));
            assert_eq!(super::name(335), None);
            assert_eq!(super::name(424), Some("pidfd_send_signal"));
            assert_eq!(super::name(libc::SYS_mseal as i64), Some("mseal"));
            assert_eq!(super::name(470), Some("listns"));
            assert_eq!(super::name(471), None);
        }
    }
}
