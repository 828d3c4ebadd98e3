//! Byte parsers for /proc files. They take the file's content and no I/O, so
//! they are unit-tested on captured text; hand-rolled because ps reads
//! thousands of these per run and generic parsers cost more than the kernel.

use crate::model::process::{Io, Process};
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
    /// Page faults served without and with a disk read.
    pub minflt: u64,
    pub majflt: u64,
    pub utime: u64,
    pub stime: u64,
    pub nice: i32,
    pub num_threads: u32,
    pub start_ticks: u64,
    pub vsize: u64,
    pub rss_pages: u64,
}

/// Parse /proc/PID/stat. The name sits between the first '(' and the last
/// ')' because it may itself contain spaces and parentheses.
pub fn stat(b: &[u8]) -> Option<Stat> {
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
        minflt: v[6] as u64,
        majflt: v[8] as u64,
        utime: v[10] as u64,
        stime: v[11] as u64,
        nice: v[15] as i32,
        num_threads: v[16] as u32,
        start_ticks: v[18] as u64,
        vsize: v[19] as u64,
        rss_pages: v[20].max(0) as u64,
    })
}

/// Fields of /proc/PID/status that /proc/PID/stat lacks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    pub euid: u32,
    pub locked_kib: u64,
    /// VmRSS, which procps prints; absent for kernel threads and zombies.
    pub rss_kib: Option<u64>,
    pub voluntary_ctxt: u64,
    pub nonvoluntary_ctxt: u64,
}

pub fn status(b: &[u8]) -> Status {
    let mut s = Status::default();
    for line in b.split(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        match key {
            // Real, effective, saved, filesystem: ps shows the effective one.
            b"Uid" => s.euid = nth_int(rest, 1).unwrap_or(0) as u32,
            b"VmRSS" => s.rss_kib = nth_int(rest, 0).map(|v| v as u64),
            b"VmLck" => s.locked_kib = nth_int(rest, 0).unwrap_or(0) as u64,
            b"voluntary_ctxt_switches" => s.voluntary_ctxt = nth_int(rest, 0).unwrap_or(0) as u64,
            b"nonvoluntary_ctxt_switches" => {
                s.nonvoluntary_ctxt = nth_int(rest, 0).unwrap_or(0) as u64
            }
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
        assert_eq!(s.euid, 1001);
        assert_eq!(s.locked_kib, 16);
        assert_eq!(s.rss_kib, Some(2048));
        assert_eq!((s.voluntary_ctxt, s.nonvoluntary_ctxt), (57, 3));
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
