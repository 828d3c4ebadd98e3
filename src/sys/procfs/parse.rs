//! Byte parsers for /proc files. They take the file's content and no I/O, so
//! they are unit-tested on captured text; hand-rolled because ps reads
//! thousands of these per run and generic parsers cost more than the kernel.

use crate::model::process::{Io, Process, SmapsRollup};
use crate::model::system::{CpuTimes, Memory};

/// Fields of /proc/PID/stat that ps and top use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stat {
    pub tid: i32,
    pub comm: String,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    pub tty_nr: u32,
    pub tpgid: i32,
    pub flags: u32,
    /// Page faults: minor (no I/O) and major (the page had to be read),
    /// the task's own and those of its children it waited for.
    pub minflt: u64,
    pub cminflt: u64,
    pub majflt: u64,
    pub cmajflt: u64,
    pub utime: u64,
    pub stime: u64,
    /// CPU time of children it waited for, in clock ticks.
    pub cutime: u64,
    pub cstime: u64,
    pub nice: i32,
    pub num_threads: u32,
    pub start_ticks: u64,
    pub vsize: u64,
    pub rss_pages: u64,
    /// The CPU it last ran on (field 39).
    pub processor: Option<u32>,
    /// Time blocked on block I/O in clock ticks (field 42); counted only
    /// while delay accounting is on (kernel.task_delayacct), and per task:
    /// a process's file has its main thread's only. None on old kernels.
    pub blkio_ticks: Option<u64>,
}

/// Parse /proc/PID/stat. The name sits between the first '(' and the last
/// ')' because it may itself contain spaces and parentheses.
pub fn stat(b: &[u8]) -> Option<Stat> {
    let b = b.trim_ascii_end();
    let open = b.iter().position(|&c| c == b'(')?;
    let close = b.iter().rposition(|&c| c == b')')?;
    let tid = int(b[..open].trim_ascii())? as i32;
    let comm = String::from_utf8_lossy(b.get(open + 1..close)?).into_owned();
    let mut f = b.get(close + 2..)?.split(|&c| c == b' ');
    let state = *f.next()?.first()? as char;
    // Fields after the state, numbered from 0 = ppid (field 4 in proc(5)).
    let mut v = [0i64; 21];
    for slot in v.iter_mut() {
        *slot = int(f.next()?)?;
    }
    // Fields 25 to 42 (rsslim is a u64 that `int` wraps, which does not
    // matter since it is not used): field 39 is the 15th, field 42 the 18th.
    let rest: Vec<Option<i64>> = f.take(18).map(int).collect();
    let late = |i: usize| rest.get(i).copied().flatten().map(|v| v.max(0) as u64);
    let (processor, blkio_ticks) = (late(14).map(|c| c as u32), late(17));
    let n = |i: usize| v[i].max(0) as u64;
    Some(Stat {
        tid,
        comm,
        state,
        ppid: v[0] as i32,
        pgrp: v[1] as i32,
        session: v[2] as i32,
        tty_nr: v[3] as u32,
        tpgid: v[4] as i32,
        flags: v[5] as u32,
        minflt: n(6),
        cminflt: n(7),
        majflt: n(8),
        cmajflt: n(9),
        utime: n(10),
        stime: n(11),
        cutime: n(12),
        cstime: n(13),
        nice: v[15] as i32,
        num_threads: v[16] as u32,
        start_ticks: v[18] as u64,
        vsize: v[19] as u64,
        rss_pages: v[20].max(0) as u64,
        processor,
        blkio_ticks,
    })
}

/// Fields of /proc/PID/status that /proc/PID/stat lacks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// The task's state letter (the "State:" line), '?' when absent.
    pub state: char,
    /// The real uid (whose process it is) and the effective one (ps's).
    pub uid: u32,
    pub euid: u32,
    pub locked_kib: u64,
    /// VmRSS, which procps prints; absent for kernel threads and zombies.
    pub rss_kib: Option<u64>,
    pub voluntary_ctxt: u64,
    pub nonvoluntary_ctxt: u64,
    /// The thread tracing this one (ptrace), 0 for none.
    pub tracer_pid: i32,
    /// The process (thread group) this task belongs to; 0 while the task
    /// is being released (its pids are detached before /proc forgets it).
    pub tgid: i32,
    /// The parent process; 0 likewise.
    pub ppid: i32,
    /// VmRSS split by kind: anonymous, file-backed and shared memory (shmem,
    /// tmpfs, shared anonymous mappings), and anonymous memory swapped out;
    /// None for kernel threads and zombies.
    pub rss_anon_kib: Option<u64>,
    pub rss_file_kib: Option<u64>,
    pub rss_shmem_kib: Option<u64>,
    pub swap_kib: Option<u64>,
}

pub fn status(b: &[u8]) -> Status {
    let mut s = Status {
        state: '?',
        ..Status::default()
    };
    for line in b.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        match key {
            // Real, effective, saved, filesystem: ps shows the effective one.
            b"State" => s.state = rest.trim_ascii_start().first().map_or('?', |&c| c as char),
            b"Uid" => {
                s.uid = nth_int(rest, 0).unwrap_or(0) as u32;
                s.euid = nth_int(rest, 1).unwrap_or(0) as u32;
            }
            b"VmRSS" => s.rss_kib = nth_int(rest, 0).map(|v| v as u64),
            b"VmLck" => s.locked_kib = nth_int(rest, 0).unwrap_or(0) as u64,
            b"voluntary_ctxt_switches" => s.voluntary_ctxt = nth_int(rest, 0).unwrap_or(0) as u64,
            b"nonvoluntary_ctxt_switches" => {
                s.nonvoluntary_ctxt = nth_int(rest, 0).unwrap_or(0) as u64
            }
            b"TracerPid" => s.tracer_pid = nth_int(rest, 0).unwrap_or(0) as i32,
            b"Tgid" => s.tgid = nth_int(rest, 0).unwrap_or(0) as i32,
            b"PPid" => s.ppid = nth_int(rest, 0).unwrap_or(0) as i32,
            b"RssAnon" => s.rss_anon_kib = nth_int(rest, 0).map(|v| v as u64),
            b"RssFile" => s.rss_file_kib = nth_int(rest, 0).map(|v| v as u64),
            b"RssShmem" => s.rss_shmem_kib = nth_int(rest, 0).map(|v| v as u64),
            b"VmSwap" => s.swap_kib = nth_int(rest, 0).map(|v| v as u64),
            _ => {}
        }
    }
    s
}

/// /proc/PID/cmdline: NUL-separated arguments.
pub fn cmdline(b: &[u8]) -> Vec<String> {
    let b = b.strip_suffix(b"\0").unwrap_or(b);
    if b.is_empty() {
        return Vec::new();
    }
    b.split(|&c| c == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// /proc/PID/io: bytes really read from and written to storage.
pub fn io(b: &[u8]) -> Option<Io> {
    let (mut read, mut write) = (None, None);
    for line in b.split(|&c| c == b'\n') {
        if let Some(v) = line.strip_prefix(b"read_bytes:") {
            read = int(v.trim_ascii()).map(|v| v as u64);
        } else if let Some(v) = line.strip_prefix(b"write_bytes:") {
            write = int(v.trim_ascii()).map(|v| v as u64);
        }
    }
    Some(Io {
        read_bytes: read?,
        write_bytes: write?,
    })
}

/// /proc/PID/schedstat: on-CPU ns, run-queue wait ns, timeslices.
pub fn schedstat(b: &[u8]) -> Option<(u64, u64, u64)> {
    Some((
        nth_int(b, 0)? as u64,
        nth_int(b, 1)? as u64,
        nth_int(b, 2)? as u64,
    ))
}

/// /proc/PID/task/TID/sched's `se.exec_start` (ms).
pub fn exec_start_ms(b: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(b).ok()?;
    let line = text.lines().find(|l| l.starts_with("se.exec_start"))?;
    line.rsplit(':').next()?.trim().parse().ok()
}

/// What /proc/PID/task/TID/syscall says a task is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syscall {
    /// On a CPU (the file cannot say more).
    Running,
    /// Blocked outside any system call: in a page fault or another exception.
    NotInSyscall,
    /// Blocked in system call `nr` with these arguments.
    In { nr: i64, args: [u64; 6] },
}

/// Parse /proc/PID/task/TID/syscall: "running", "-1 SP PC", or
/// "NR ARG1 .. ARG6 SP PC" (the arguments in hex).
pub fn syscall(b: &[u8]) -> Option<Syscall> {
    let mut w = words(b);
    let first = w.next()?;
    if first == b"running" {
        return Some(Syscall::Running);
    }
    let nr = int(first)?;
    if nr < 0 {
        return Some(Syscall::NotInSyscall);
    }
    let mut args = [0u64; 6];
    for a in args.iter_mut() {
        *a = hex(w.next()?)?;
    }
    Some(Syscall::In { nr, args })
}

/// /proc/PID/smaps_rollup: the process's memory summed over its mappings.
pub fn smaps_rollup(b: &[u8]) -> Option<SmapsRollup> {
    let mut m = SmapsRollup::default();
    let mut seen = false;
    for line in b.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let Some(v) = nth_int(&line[colon + 1..], 0).map(|v| v as u64) else {
            continue;
        };
        match &line[..colon] {
            b"Rss" => {
                m.rss_kib = v;
                seen = true;
            }
            b"Pss" => m.pss_kib = v,
            b"Pss_Anon" => m.pss_anon_kib = v,
            b"Pss_File" => m.pss_file_kib = v,
            b"Pss_Shmem" => m.pss_shmem_kib = v,
            b"Shared_Clean" | b"Shared_Dirty" => m.shared_kib += v,
            b"Private_Clean" | b"Private_Dirty" => m.private_kib += v,
            b"Anonymous" => m.anonymous_kib = v,
            b"Swap" => m.swap_kib = v,
            _ => {}
        }
    }
    seen.then_some(m)
}

/// /proc/stat: the aggregate "cpu" line and btime.
pub fn proc_stat(b: &[u8]) -> (CpuTimes, u64) {
    let (mut cpu, mut btime) = (CpuTimes::default(), 0);
    for line in b.split(|&c| c == b'\n') {
        if let Some(rest) = line.strip_prefix(b"cpu ") {
            let n = |i| nth_int(rest, i).unwrap_or(0) as u64;
            cpu = CpuTimes {
                user: n(0),
                nice: n(1),
                system: n(2),
                idle: n(3),
                iowait: n(4),
                irq: n(5),
                softirq: n(6),
                steal: n(7),
            };
        } else if let Some(rest) = line.strip_prefix(b"btime ") {
            btime = int(rest.trim_ascii()).unwrap_or(0) as u64;
        }
    }
    (cpu, btime)
}

/// /proc/loadavg: the three load averages.
pub fn loadavg(b: &[u8]) -> [f64; 3] {
    let mut l = [0.0; 3];
    for (slot, word) in l.iter_mut().zip(words(b)) {
        *slot = std::str::from_utf8(word)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
    }
    l
}

/// /proc/uptime: seconds since boot.
pub fn uptime(b: &[u8]) -> f64 {
    words(b)
        .next()
        .and_then(|w| std::str::from_utf8(w).ok()?.parse().ok())
        .unwrap_or(0.0)
}

/// /proc/meminfo, values in KiB.
pub fn meminfo(b: &[u8]) -> Memory {
    let mut m = Memory::default();
    for line in b.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let v = nth_int(&line[colon + 1..], 0).unwrap_or(0) as u64;
        match &line[..colon] {
            b"MemTotal" => m.total_kib = v,
            b"MemFree" => m.free_kib = v,
            b"MemAvailable" => m.available_kib = v,
            b"Buffers" => m.buffers_kib = v,
            b"Cached" => m.cached_kib = v,
            b"SwapTotal" => m.swap_total_kib = v,
            b"SwapFree" => m.swap_free_kib = v,
            _ => {}
        }
    }
    m
}

/// Build a process from its parsed files.
pub fn process(st: Stat, status: Status, page_kib: u64) -> Process {
    Process {
        pid: st.tid,
        tid: st.tid,
        ppid: st.ppid,
        pgrp: st.pgrp,
        session: st.session,
        tpgid: st.tpgid,
        tty_nr: st.tty_nr,
        tty: String::new(),
        uid: status.euid,
        real_uid: status.uid,
        user: String::new(),
        comm: st.comm,
        cmdline: Vec::new(),
        state: st.state,
        flags: st.flags,
        nice: st.nice,
        num_threads: st.num_threads,
        utime: st.utime,
        stime: st.stime,
        start_ticks: st.start_ticks,
        vsz_kib: st.vsize / 1024,
        rss_kib: status.rss_kib.unwrap_or(st.rss_pages * page_kib),
        locked_kib: status.locked_kib,
        voluntary_ctxt: status.voluntary_ctxt,
        nonvoluntary_ctxt: status.nonvoluntary_ctxt,
        threads_d: 0,
        threads_r: 0,
        io: None,
    }
}

fn words(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    b.split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
}

fn nth_int(b: &[u8], n: usize) -> Option<i64> {
    int(words(b).nth(n)?)
}

/// "0x7f3a..": a hexadecimal number with its prefix.
fn hex(b: &[u8]) -> Option<u64> {
    let digits = b.strip_prefix(b"0x")?;
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// A decimal integer, optionally negative.
fn int(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.wrapping_mul(10).wrapping_add((c - b'0') as i64);
    }
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exec_start() {
        let b = b"cat (30111, #threads: 1)\n----\nse.exec_start                                :      10813641.110027\nse.vruntime : 1.0\n";
        assert_eq!(exec_start_ms(b), Some(10813641.110027));
        assert_eq!(exec_start_ms(b"policy : 0\n"), None);
    }

    // Captured on the development machine: a shell, and a name with ") (".
    const STAT: &[u8] = b"4242 (we ird) (x) S 1 4242 4242 34816 4250 4194560 1123 0 0 0 \
        12 7 0 0 20 -5 3 0 98765 10678272 1024 18446744073709551615 1 1 0 0 0 0 \
        65536 3670020 1266777851 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn stat_fields_by_position() {
        let s = stat(STAT).unwrap();
        assert_eq!(s.tid, 4242);
        assert_eq!(s.comm, "we ird) (x");
        assert_eq!(s.state, 'S');
        assert_eq!((s.ppid, s.pgrp, s.session), (1, 4242, 4242));
        assert_eq!(s.tty_nr, 34816);
        assert_eq!(s.tpgid, 4250);
        assert_eq!(s.flags, 4194560);
        assert_eq!((s.utime, s.stime), (12, 7));
        assert_eq!(s.nice, -5);
        assert_eq!(s.num_threads, 3);
        assert_eq!(s.start_ticks, 98765);
        assert_eq!(s.vsize, 10678272);
        assert_eq!(s.rss_pages, 1024);
    }

    #[test]
    fn stat_faults_and_block_io_delay() {
        let s = stat(STAT).unwrap();
        assert_eq!((s.minflt, s.cminflt, s.majflt, s.cmajflt), (1123, 0, 0, 0));
        assert_eq!((s.cutime, s.cstime), (0, 0));
        assert_eq!(s.blkio_ticks, Some(0));
        // Captured from a thread of a reader with delay accounting on.
        let t = stat(
            b"777 (fio) D 700 700 1 0 -1 4194368 90 0 12 3 250 40 5 6 20 0 5 0 \
            5000 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 -1 1 0 0 319 0 0\n",
        )
        .unwrap();
        assert_eq!((t.minflt, t.majflt, t.cmajflt), (90, 12, 3));
        assert_eq!((t.utime, t.stime, t.cutime, t.cstime), (250, 40, 5, 6));
        assert_eq!(t.blkio_ticks, Some(319));
        assert_eq!((s.processor, t.processor), (Some(1), Some(1)));
        // An old kernel that stops before field 42.
        let old = stat(b"1 (x) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 10 100 1\n").unwrap();
        assert_eq!((old.blkio_ticks, old.processor), (None, None));
    }

    #[test]
    fn syscall_states() {
        assert_eq!(syscall(b"running\n"), Some(Syscall::Running));
        assert_eq!(
            syscall(b"-1 0x7ffc79780730 0x56196b34e248\n"),
            Some(Syscall::NotInSyscall)
        );
        // A glibc mutex waiter, captured: futex(addr, FUTEX_WAIT_PRIVATE, 2).
        let s = syscall(b"202 0x55bc3a781160 0x80 0x2 0x0 0x0 0x0 0x7fd454de2ea8 0x7fd454e6d12b\n");
        assert_eq!(
            s,
            Some(Syscall::In {
                nr: 202,
                args: [0x55bc3a781160, 0x80, 2, 0, 0, 0]
            })
        );
        assert_eq!(syscall(b""), None);
        assert_eq!(syscall(b"0 0x3"), None);
    }

    #[test]
    fn smaps_rollup_sums() {
        let m = smaps_rollup(
            b"556e47ba2000-7fff12422000 ---p 00000000 00:00 0    [rollup]\n\
              Rss:                1720 kB\nPss:                 228 kB\n\
              Pss_Dirty:           112 kB\nPss_Anon:            112 kB\n\
              Pss_File:            116 kB\nPss_Shmem:             0 kB\n\
              Shared_Clean:       1568 kB\nShared_Dirty:          0 kB\n\
              Private_Clean:        40 kB\nPrivate_Dirty:       112 kB\n\
              Anonymous:           112 kB\nSwap:                  7 kB\n",
        )
        .unwrap();
        assert_eq!((m.rss_kib, m.pss_kib), (1720, 228));
        assert_eq!((m.pss_anon_kib, m.pss_file_kib), (112, 116));
        assert_eq!((m.shared_kib, m.private_kib), (1568, 152));
        assert_eq!((m.anonymous_kib, m.swap_kib), (112, 7));
        assert_eq!(smaps_rollup(b""), None);
    }

    #[test]
    fn stat_rejects_truncated() {
        assert_eq!(stat(b"1 (init) S 0 1"), None);
        assert_eq!(stat(b""), None);
    }

    #[test]
    fn status_effective_uid_and_counters() {
        let s = status(
            b"Name:\tbash\nUid:\t1000\t1001\t1000\t1000\nVmRSS:\t 2048 kB\nVmLck:\t      16 kB\n\
              voluntary_ctxt_switches:\t57\nnonvoluntary_ctxt_switches:\t3\n",
        );
        assert_eq!((s.uid, s.euid), (1000, 1001));
        assert_eq!(s.locked_kib, 16);
        assert_eq!(s.rss_kib, Some(2048));
        assert_eq!((s.voluntary_ctxt, s.nonvoluntary_ctxt), (57, 3));
        assert_eq!(s.tracer_pid, 0);
        let s = status(
            b"Tgid:\t4700\nPPid:\t1\nTracerPid:\t4711\nVmRSS:\t 2048 kB\nRssAnon:\t 1500 kB\nRssFile:\t 500 kB\n\
              RssShmem:\t 48 kB\nVmSwap:\t 12 kB\n",
        );
        assert_eq!((s.tracer_pid, s.tgid, s.ppid), (4711, 4700, 1));
        assert_eq!(
            (s.rss_anon_kib, s.rss_file_kib, s.rss_shmem_kib, s.swap_kib),
            (Some(1500), Some(500), Some(48), Some(12))
        );
    }

    #[test]
    fn cmdline_splits_on_nul() {
        assert_eq!(cmdline(b"sleep\x00100\x00"), vec!["sleep", "100"]);
        assert_eq!(cmdline(b"a b\x00\x00c"), vec!["a b", "", "c"]);
        assert!(cmdline(b"").is_empty());
    }

    #[test]
    fn io_needs_both_counters() {
        let text = b"rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\n\
                     write_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(
            io(text),
            Some(Io {
                read_bytes: 4096,
                write_bytes: 8192
            })
        );
        assert_eq!(io(b"rchar: 1\n"), None);
    }

    #[test]
    fn system_files() {
        let (cpu, btime) = proc_stat(
            b"cpu  10 2 30 400 5 6 7 8 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\nbtime 1700000000\n",
        );
        assert_eq!(cpu.user, 10);
        assert_eq!(cpu.steal, 8);
        assert_eq!(btime, 1_700_000_000);
        assert_eq!(loadavg(b"0.50 1.25 2.00 1/123 4567\n"), [0.5, 1.25, 2.0]);
        assert_eq!(uptime(b"1800.25 3500.00\n"), 1800.25);
        let m =
            meminfo(b"MemTotal:       8000000 kB\nMemAvailable:   6000000 kB\nSwapTotal: 0 kB\n");
        assert_eq!((m.total_kib, m.available_kib), (8_000_000, 6_000_000));
        assert_eq!(schedstat(b"123 456 7\n"), Some((123, 456, 7)));
    }
}
