//! top's numbers: rates between two snapshots, the CPU split, task counts,
//! and the table's sorting and filtering.

use std::collections::HashMap;

use serde::Serialize;

use crate::model::process::Process;
use crate::model::system::CpuTimes;

/// One line of top's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopRow {
    /// The process, or in the thread view the thread (its TID).
    pub pid: i32,
    pub user: String,
    /// CPU over the last interval; 100 = one whole CPU.
    pub cpu_percent: f64,
    pub mem_percent: f64,
    pub res_kib: u64,
    /// The state that matters among the row's threads (`process_state`), with
    /// how many of its `threads` are in it (0 when only the main thread was read).
    pub state: char,
    pub in_state: u32,
    pub threads: u32,
    /// Storage bytes per second; `None` when /proc/PID/io is not readable.
    pub read_rate: Option<f64>,
    pub write_rate: Option<f64>,
    /// Voluntary (blocked, slept) and involuntary (preempted) switches per second.
    pub vcsw_rate: f64,
    pub ivcsw_rate: f64,
    pub comm: String,
    pub command: String,
}

/// The state that matters among a process's threads, and how many are in
/// it: D when any thread waits uninterruptibly (what the load average counts
/// and what a process stuck on a device shows), else R when any runs, else
/// the main thread's (with no count).
pub fn process_state(p: &Process) -> (char, u32) {
    if p.threads_d > 0 {
        ('D', p.threads_d)
    } else if p.threads_r > 0 {
        ('R', p.threads_r)
    } else {
        (p.state, 0)
    }
}

/// Rows for `cur`, with rates against `prev` taken `secs` earlier. A process
/// new since `prev` (matched by pid and start time, so reused pids do not
/// borrow a stranger's counters) is measured from zero: it started within
/// the interval.
pub fn rows(
    prev: &[Process],
    cur: &[Process],
    secs: f64,
    hz: u64,
    mem_total_kib: u64,
) -> Vec<TopRow> {
    rows_of(prev, cur, secs, hz, mem_total_kib, false)
}

/// The same for threads (`procfs::Reader::all(true)`): one row per thread,
/// keyed by its TID, each with its own state.
pub fn thread_rows(
    prev: &[Process],
    cur: &[Process],
    secs: f64,
    hz: u64,
    mem_total_kib: u64,
) -> Vec<TopRow> {
    rows_of(prev, cur, secs, hz, mem_total_kib, true)
}

fn rows_of(
    prev: &[Process],
    cur: &[Process],
    secs: f64,
    hz: u64,
    mem_total_kib: u64,
    threads: bool,
) -> Vec<TopRow> {
    let before: HashMap<(i32, u64), &Process> =
        prev.iter().map(|p| ((p.tid, p.start_ticks), p)).collect();
    let secs = if secs > 0.0 { secs } else { 1.0 };
    let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs;
    cur.iter()
        .map(|p| {
            let zero = Process::default();
            let b = before
                .get(&(p.tid, p.start_ticks))
                .copied()
                .unwrap_or(&zero);
            let ticks = (p.utime + p.stime).saturating_sub(b.utime + b.stime);
            let io = |f: fn(&crate::model::process::Io) -> u64| {
                let now = p.io.as_ref().map(f)?;
                Some(rate(now, b.io.as_ref().map(f).unwrap_or(0)))
            };
            let (state, in_state) = if threads {
                (p.state, 1)
            } else {
                process_state(p)
            };
            TopRow {
                pid: if threads { p.tid } else { p.pid },
                user: p.user.clone(),
                cpu_percent: ticks as f64 * 100.0 / (secs * hz.max(1) as f64),
                mem_percent: crate::analysis::ps::mem_percent(p.rss_kib, mem_total_kib),
                res_kib: p.rss_kib,
                state,
                in_state,
                threads: if threads { 1 } else { p.num_threads.max(1) },
                read_rate: io(|i| i.read_bytes),
                write_rate: io(|i| i.write_bytes),
                vcsw_rate: rate(p.voluntary_ctxt, b.voluntary_ctxt),
                ivcsw_rate: rate(p.nonvoluntary_ctxt, b.nonvoluntary_ctxt),
                comm: p.comm.clone(),
                command: crate::analysis::ps::command(p),
            }
        })
        .collect()
}

/// Percent of all CPU time per category over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuSplit {
    pub us: f64,
    pub sy: f64,
    pub ni: f64,
    pub id: f64,
    pub wa: f64,
    pub hi: f64,
    pub si: f64,
    pub st: f64,
}

pub fn cpu_split(prev: &CpuTimes, cur: &CpuTimes) -> CpuSplit {
    let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
    let parts = [
        d(cur.user, prev.user),
        d(cur.system, prev.system),
        d(cur.nice, prev.nice),
        d(cur.idle, prev.idle),
        d(cur.iowait, prev.iowait),
        d(cur.irq, prev.irq),
        d(cur.softirq, prev.softirq),
        d(cur.steal, prev.steal),
    ];
    let total: f64 = parts.iter().sum();
    if total == 0.0 {
        return CpuSplit::default();
    }
    let p = |v: f64| v * 100.0 / total;
    CpuSplit {
        us: p(parts[0]),
        sy: p(parts[1]),
        ni: p(parts[2]),
        id: p(parts[3]),
        wa: p(parts[4]),
        hi: p(parts[5]),
        si: p(parts[6]),
        st: p(parts[7]),
    }
}

/// Processes by the state that matters among their threads, as top's
/// "Tasks:" line counts them, and the threads the load average counts:
/// runnable (R) and uninterruptible (D), every thread of every process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounts {
    pub total: usize,
    pub running: usize,
    pub sleeping: usize,
    pub disk: usize,
    pub stopped: usize,
    pub zombie: usize,
    pub threads_r: usize,
    pub threads_d: usize,
}

pub fn task_counts(procs: &[Process]) -> TaskCounts {
    let mut c = TaskCounts {
        total: procs.len(),
        ..Default::default()
    };
    for p in procs {
        c.threads_r += p.threads_r as usize;
        c.threads_d += p.threads_d as usize;
        match process_state(p).0 {
            'R' => c.running += 1,
            // Idle kernel threads sleep too (top counts I as sleeping).
            'S' | 'I' => c.sleeping += 1,
            'D' => c.disk += 1,
            'T' | 't' => c.stopped += 1,
            'Z' => c.zombie += 1,
            _ => {}
        }
    }
    c
}

/// The columns of top's table, each sortable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Pid,
    User,
    Cpu,
    Mem,
    Res,
    State,
    Read,
    Write,
    Vcsw,
    Ivcsw,
    Command,
}

impl Column {
    pub const ALL: [Column; 11] = [
        Column::Pid,
        Column::User,
        Column::Cpu,
        Column::Mem,
        Column::Res,
        Column::State,
        Column::Read,
        Column::Write,
        Column::Vcsw,
        Column::Ivcsw,
        Column::Command,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Column::Pid => "PID",
            Column::User => "USER",
            Column::Cpu => "%CPU",
            Column::Mem => "%MEM",
            Column::Res => "RES",
            Column::State => "S",
            Column::Read => "READ/s",
            Column::Write => "WRITE/s",
            Column::Vcsw => "VCSW/s",
            Column::Ivcsw => "IVCSW/s",
            Column::Command => "COMMAND",
        }
    }

    /// The key that sorts by this column (shown on screen).
    pub fn key(self) -> char {
        match self {
            Column::Pid => 'p',
            Column::User => 'u',
            Column::Cpu => 'c',
            Column::Mem => 'm',
            Column::Res => 'r',
            Column::State => 's',
            Column::Read => 'i',
            Column::Write => 'w',
            Column::Vcsw => 'v',
            Column::Ivcsw => 'n',
            Column::Command => 'o',
        }
    }

    pub fn from_key(c: char) -> Option<Column> {
        Column::ALL.into_iter().find(|col| col.key() == c)
    }

    /// Numbers read best largest first; names alphabetically.
    pub fn descending_by_default(self) -> bool {
        !matches!(self, Column::Pid | Column::User | Column::Command)
    }
}

/// Sort by a column; unreadable I/O sorts below any number. Ties by PID.
pub fn sort(rows: &mut [TopRow], col: Column, descending: bool) {
    let opt = |v: Option<f64>| v.unwrap_or(-1.0);
    rows.sort_by(|a, b| {
        let o = match col {
            Column::Pid => a.pid.cmp(&b.pid),
            Column::User => a.user.cmp(&b.user),
            Column::Cpu => a.cpu_percent.total_cmp(&b.cpu_percent),
            Column::Mem | Column::Res => a.res_kib.cmp(&b.res_kib),
            Column::State => a.state.cmp(&b.state),
            Column::Read => opt(a.read_rate).total_cmp(&opt(b.read_rate)),
            Column::Write => opt(a.write_rate).total_cmp(&opt(b.write_rate)),
            Column::Vcsw => a.vcsw_rate.total_cmp(&b.vcsw_rate),
            Column::Ivcsw => a.ivcsw_rate.total_cmp(&b.ivcsw_rate),
            Column::Command => a.command.cmp(&b.command),
        };
        let o = if descending { o.reverse() } else { o };
        o.then(a.pid.cmp(&b.pid))
    });
}

/// Keep rows whose name or command line contains `needle` (case-insensitive).
pub fn filter(rows: &mut Vec<TopRow>, needle: &str) {
    if needle.is_empty() {
        return;
    }
    let n = needle.to_lowercase();
    rows.retain(|r| r.comm.to_lowercase().contains(&n) || r.command.to_lowercase().contains(&n));
}

/// Bytes as top-like short units: 512, 4.0K, 12.5M, 3.1G.
pub fn human_bytes(v: f64) -> String {
    const UNITS: [&str; 4] = ["K", "M", "G", "T"];
    if v < 1024.0 {
        return format!("{}", v.round() as u64);
    }
    let mut v = v / 1024.0;
    for u in UNITS {
        if v < 1024.0 || u == "T" {
            return if v < 100.0 {
                format!("{v:.1}{u}")
            } else {
                format!("{v:.0}{u}")
            };
        }
        v /= 1024.0;
    }
    unreachable!()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::process::Io;

    fn p(pid: i32, start: u64, ticks: u64, io: Option<(u64, u64)>, csw: (u64, u64)) -> Process {
        Process {
            pid,
            tid: pid,
            start_ticks: start,
            utime: ticks,
            state: 'S',
            comm: format!("p{pid}"),
            io: io.map(|(r, w)| Io {
                read_bytes: r,
                write_bytes: w,
            }),
            voluntary_ctxt: csw.0,
            nonvoluntary_ctxt: csw.1,
            rss_kib: 100,
            ..Default::default()
        }
    }

    #[test]
    fn rates_between_snapshots() {
        let prev = [
            p(1, 5, 100, Some((0, 4096)), (10, 1)),
            p(2, 7, 0, None, (0, 0)),
        ];
        let cur = [
            p(1, 5, 150, Some((8192, 4096)), (30, 5)),
            // Same pid, new start time: a different process, measured from zero.
            p(2, 9, 20, None, (4, 0)),
        ];
        let rows = rows(&prev, &cur, 2.0, 100, 1000);
        assert_eq!(rows[0].cpu_percent, 25.0);
        assert_eq!(rows[0].read_rate, Some(4096.0));
        assert_eq!(rows[0].write_rate, Some(0.0));
        assert_eq!((rows[0].vcsw_rate, rows[0].ivcsw_rate), (10.0, 2.0));
        assert_eq!(rows[0].mem_percent, 10.0);
        assert_eq!(rows[1].cpu_percent, 10.0);
        // Unreadable I/O stays unknown, never 0.
        assert_eq!(rows[1].read_rate, None);
        assert_eq!(rows[1].vcsw_rate, 2.0);
    }

    #[test]
    fn cpu_split_sums_to_100() {
        let a = CpuTimes::default();
        let b = CpuTimes {
            user: 30,
            system: 10,
            idle: 50,
            iowait: 10,
            ..a
        };
        let s = cpu_split(&a, &b);
        assert_eq!((s.us, s.sy, s.id, s.wa), (30.0, 10.0, 50.0, 10.0));
        assert_eq!(cpu_split(&b, &b), CpuSplit::default());
    }

    #[test]
    fn counts_states() {
        let mut v: Vec<Process> = "RSSDZTtI"
            .chars()
            .map(|c| Process {
                state: c,
                threads_d: u32::from(c == 'D'),
                threads_r: u32::from(c == 'R'),
                ..Default::default()
            })
            .collect();
        // The main thread sleeps, 12 of 20 threads wait on the disk, 1 runs:
        // the process counts as D, its threads in the load.
        v.push(Process {
            state: 'S',
            num_threads: 20,
            threads_d: 12,
            threads_r: 1,
            ..Default::default()
        });
        let c = task_counts(&v);
        assert_eq!(
            (c.total, c.running, c.sleeping, c.disk, c.stopped, c.zombie),
            (9, 1, 3, 2, 2, 1)
        );
        assert_eq!((c.threads_r, c.threads_d), (2, 13));
        let r = rows(&[], &v[8..], 1.0, 100, 1000);
        assert_eq!((r[0].state, r[0].in_state, r[0].threads), ('D', 12, 20));
        let t = thread_rows(&[], &v[..1], 1.0, 100, 1000);
        assert_eq!((t[0].state, t[0].in_state, t[0].threads), ('R', 1, 1));
    }

    #[test]
    fn sort_and_filter() {
        let cur = [
            p(1, 0, 10, None, (0, 0)),
            p(2, 0, 30, Some((1, 1)), (0, 0)),
            p(3, 0, 20, Some((0, 0)), (0, 0)),
        ];
        let mut r = rows(&[], &cur, 1.0, 100, 1000);
        sort(&mut r, Column::Cpu, true);
        assert_eq!(r.iter().map(|r| r.pid).collect::<Vec<_>>(), [2, 3, 1]);
        sort(&mut r, Column::Read, true);
        // The unreadable one sorts last, not as a zero among zeros.
        assert_eq!(r.iter().map(|r| r.pid).collect::<Vec<_>>(), [2, 3, 1]);
        filter(&mut r, "P3");
        assert_eq!(r.len(), 1);
        assert_eq!(Column::from_key('c'), Some(Column::Cpu));
        assert_eq!(human_bytes(512.0), "512");
        assert_eq!(human_bytes(1536.0), "1.5K");
        assert_eq!(human_bytes(300.0 * 1024.0 * 1024.0), "300M");
    }
}
