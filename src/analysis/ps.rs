//! ps's columns computed from raw process data, with procps's meanings:
//! STAT letters and modifiers, %CPU over the process's lifetime, %MEM of
//! physical memory, START and TIME formats, sorting and the forest order.

use serde::Serialize;

use crate::model::process::Process;

/// One line of `kdiag ps`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub user: String,
    pub pid: i32,
    /// Thread id (equals pid unless listing threads).
    pub tid: i32,
    pub ppid: i32,
    pub cpu_percent: f64,
    pub mem_percent: f64,
    pub vsz_kib: u64,
    pub rss_kib: u64,
    pub tty: String,
    /// procps's STAT: the main thread's state and the modifiers.
    pub stat: String,
    /// The state that matters among the threads (D when any waits
    /// uninterruptibly), how many of them are in it (0 when that is only the
    /// main thread's), and how many threads there are.
    pub state: char,
    pub threads_in_state: u32,
    pub threads: u32,
    /// Start time, seconds since the epoch, and as ps prints it.
    pub start_epoch: u64,
    pub start: String,
    /// Cumulative CPU time in seconds, and as ps prints it (M:SS).
    pub cpu_secs: f64,
    pub time: String,
    pub comm: String,
    pub command: String,
    /// Depth in the process tree with --forest (0 otherwise).
    #[serde(skip)]
    pub depth: usize,
}

/// What the columns are computed against: the machine at snapshot time.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    pub uptime_secs: f64,
    pub hz: u64,
    pub mem_total_kib: u64,
    pub boot_time: u64,
    /// Now, seconds since the epoch, and the local time zone's offset.
    pub now: i64,
    pub utc_offset: i64,
}

/// `state`: the state that matters among its threads and how many are in
/// it (`top::process_state`).
pub fn row(p: &Process, cx: &Context, state: (char, u32)) -> Row {
    let hz = cx.hz.max(1);
    let start_epoch = cx.boot_time + p.start_ticks / hz;
    let ticks = p.utime + p.stime;
    let (state, threads_in_state) = state;
    Row {
        user: p.user.clone(),
        pid: p.pid,
        tid: p.tid,
        ppid: p.ppid,
        cpu_percent: cpu_percent(ticks, p.start_ticks, cx.uptime_secs, hz),
        mem_percent: mem_percent(p.rss_kib, cx.mem_total_kib),
        vsz_kib: p.vsz_kib,
        rss_kib: p.rss_kib,
        tty: p.tty.clone(),
        stat: stat(p),
        state,
        threads_in_state,
        threads: p.num_threads.max(1),
        start_epoch,
        start: start(start_epoch as i64, cx.now, cx.utc_offset),
        cpu_secs: ticks as f64 / hz as f64,
        time: bsd_time(ticks / hz),
        comm: p.comm.clone(),
        command: command(p),
        depth: 0,
    }
}

/// STAT: the state letter, then procps's modifiers in procps's order:
/// `<` high priority, `N` low priority, `L` locked pages, `s` session
/// leader, `l` multi-threaded, `+` in the terminal's foreground group.
pub fn stat(p: &Process) -> String {
    let mut s = String::with_capacity(6);
    s.push(p.state);
    if p.nice < 0 {
        s.push('<');
    }
    if p.nice > 0 {
        s.push('N');
    }
    if p.locked_kib > 0 {
        s.push('L');
    }
    if p.session == p.pid {
        s.push('s');
    }
    if p.num_threads > 1 {
        s.push('l');
    }
    if p.pgrp == p.tpgid {
        s.push('+');
    }
    s
}

/// The S column: the state that matters, with how many threads are in it
/// when there are several ("D 20/22", as top shows it).
pub fn state_cell(r: &Row) -> String {
    state_text(r.state, r.threads_in_state, r.threads)
}

/// A process's telling state as ps's S and top's S columns show it: "D 20/22"
/// when `in_state` of its `threads` are in it, the bare state otherwise.
pub fn state_text(state: char, in_state: u32, threads: u32) -> String {
    if threads > 1 && in_state > 0 {
        format!("{state} {in_state}/{threads}")
    } else {
        state.to_string()
    }
}

/// procps's %CPU: CPU time over elapsed time since start, in tenths, so a
/// busy single-threaded process approaches 100.0.
pub fn cpu_percent(ticks: u64, start_ticks: u64, uptime_secs: f64, hz: u64) -> f64 {
    let elapsed = (uptime_secs - start_ticks as f64 / hz as f64).max(0.0) as u64;
    if elapsed == 0 {
        return 0.0;
    }
    let tenths = ticks * 1000 / hz / elapsed;
    tenths as f64 / 10.0
}

/// procps's %MEM: resident set over physical memory, in tenths, at most 99.9.
pub fn mem_percent(rss_kib: u64, total_kib: u64) -> f64 {
    if total_kib == 0 {
        return 0.0;
    }
    (rss_kib * 1000 / total_kib).min(999) as f64 / 10.0
}

/// COMMAND: the arguments, or `[name]` when there are none (kernel threads,
/// zombies), with ` <defunct>` for zombies; control characters become `?`.
pub fn command(p: &Process) -> String {
    let mut s = if p.cmdline.is_empty() {
        format!("[{}]", p.comm)
    } else {
        p.cmdline.join(" ")
    };
    if p.state == 'Z' {
        s.push_str(" <defunct>");
    }
    printable(&s)
}

/// `s` safe to print on a terminal: every control character (escape
/// sequences, carriage returns, newlines: anything another user's argv, a
/// process name, a path or an ELF string may hold) becomes `?`, as procps
/// prints them. The one such function: every text output uses it.
pub fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// `printable` for text of several lines: line breaks and tabs kept.
pub fn printable_lines(s: &str) -> String {
    s.split('\n')
        .map(|l| l.split('\t').map(printable).collect::<Vec<_>>().join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// TIME as `ps aux` prints it: minutes and seconds.
pub fn bsd_time(secs: u64) -> String {
    format!("{}:{:02}", secs / 60, secs % 60)
}

/// START: HH:MM within a day, MonDD within a year, else the year.
pub fn start(t: i64, now: i64, utc_offset: i64) -> String {
    let (y, m, d, hh, mm) = crate::analysis::calendar::civil(t + utc_offset);
    let age = now - t;
    if age > 365 * 86400 {
        format!("{y}")
    } else if age > 86400 {
        const MON: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        format!("{}{d:02}", MON[m as usize - 1])
    } else {
        format!("{hh:02}:{mm:02}")
    }
}

/// A --sort key: a column name, `-` in front for descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    pub field: Field,
    pub descending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Pid,
    User,
    Cpu,
    Mem,
    Vsz,
    Rss,
    Tty,
    Stat,
    Start,
    Time,
    Command,
    Comm,
}

/// The names --sort accepts (procps's and the column headers).
pub const SORT_FIELDS: &str = "pid, user, %cpu (pcpu), %mem (pmem), vsz, rss, tty, stat, \
                               start, time, command (args), comm";

impl std::str::FromStr for SortKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (descending, name) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let field = match name.to_ascii_lowercase().as_str() {
            "pid" => Field::Pid,
            "user" | "uid" => Field::User,
            "%cpu" | "pcpu" | "cpu" => Field::Cpu,
            "%mem" | "pmem" | "mem" => Field::Mem,
            "vsz" => Field::Vsz,
            "rss" => Field::Rss,
            "tty" => Field::Tty,
            "stat" => Field::Stat,
            "start" => Field::Start,
            "time" => Field::Time,
            "command" | "args" | "cmd" => Field::Command,
            "comm" => Field::Comm,
            _ => {
                return Err(format!(
                    "unknown sort field {name:?}; use one of {SORT_FIELDS}"
                ));
            }
        };
        Ok(SortKey { field, descending })
    }
}

/// Sort rows by `key`, ties by PID then thread id.
pub fn sort(rows: &mut [Row], key: SortKey) {
    rows.sort_by(|a, b| {
        let o = match key.field {
            Field::Pid => a.pid.cmp(&b.pid),
            Field::User => a.user.cmp(&b.user),
            Field::Cpu => a.cpu_percent.total_cmp(&b.cpu_percent),
            Field::Mem => a.rss_kib.cmp(&b.rss_kib),
            Field::Vsz => a.vsz_kib.cmp(&b.vsz_kib),
            Field::Rss => a.rss_kib.cmp(&b.rss_kib),
            Field::Tty => a.tty.cmp(&b.tty),
            Field::Stat => a.stat.cmp(&b.stat),
            Field::Start => a.start_epoch.cmp(&b.start_epoch),
            Field::Time => a.cpu_secs.total_cmp(&b.cpu_secs),
            Field::Command => a.command.cmp(&b.command),
            Field::Comm => a.comm.cmp(&b.comm),
        };
        let o = if key.descending { o.reverse() } else { o };
        o.then(a.pid.cmp(&b.pid)).then(a.tid.cmp(&b.tid))
    });
}

/// Reorder rows into process trees (children after their parent, siblings
/// in the current order) and prefix commands with procps's ` \_ ` art.
pub fn forest(rows: Vec<Row>) -> Vec<Row> {
    use std::collections::{HashMap, HashSet};
    // Leaders only: threads follow their process.
    let mut order: Vec<i32> = Vec::new();
    let mut seen = HashSet::new();
    let mut ppid = HashMap::new();
    for r in &rows {
        if seen.insert(r.pid) {
            order.push(r.pid);
            ppid.insert(r.pid, r.ppid);
        }
    }
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut roots = Vec::new();
    for &pid in &order {
        let parent = ppid[&pid];
        if parent != pid && seen.contains(&parent) {
            children.entry(parent).or_default().push(pid);
        } else {
            roots.push(pid);
        }
    }
    // Depth-first, remembering per level whether siblings follow (for `|`).
    let mut tree: Vec<(i32, String, usize)> = Vec::new();
    fn walk(
        pid: i32,
        depth: usize,
        open: &mut Vec<bool>,
        children: &std::collections::HashMap<i32, Vec<i32>>,
        out: &mut Vec<(i32, String, usize)>,
    ) {
        let mut art = String::new();
        if depth > 0 {
            for &more in &open[1..depth] {
                art.push_str(if more { " |  " } else { "    " });
            }
            art.push_str(" \\_ ");
        }
        out.push((pid, art, depth));
        let kids = children.get(&pid).map(Vec::as_slice).unwrap_or(&[]);
        for (i, &k) in kids.iter().enumerate() {
            open.truncate(depth + 1);
            open.resize(depth + 1, false);
            open.push(i + 1 < kids.len());
            walk(k, depth + 1, open, children, out);
        }
    }
    for &r in &roots {
        walk(r, 0, &mut vec![false], &children, &mut tree);
    }
    let mut by_pid: HashMap<i32, Vec<Row>> = HashMap::new();
    for r in rows {
        by_pid.entry(r.pid).or_default().push(r);
    }
    let mut out = Vec::new();
    for (pid, art, depth) in tree {
        for mut r in by_pid.remove(&pid).unwrap_or_default() {
            r.command = format!("{art}{}", r.command);
            r.depth = depth;
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: i32, state: char) -> Process {
        Process {
            pid,
            tid: pid,
            pgrp: pid,
            session: 1,
            tpgid: -1,
            state,
            num_threads: 1,
            comm: format!("p{pid}"),
            ..Default::default()
        }
    }

    #[test]
    fn stat_modifiers_in_procps_order() {
        let mut p = proc(10, 'S');
        assert_eq!(stat(&p), "S");
        p.session = 10;
        p.tpgid = 10;
        p.num_threads = 4;
        p.nice = -5;
        p.locked_kib = 8;
        assert_eq!(stat(&p), "S<Lsl+");
        p.nice = 19;
        p.state = 'R';
        assert_eq!(stat(&p), "RNLsl+");
        // A thread of a session leader: the leader's pid decides `s`.
        let mut t = proc(10, 'S');
        t.tid = 11;
        t.session = 10;
        assert_eq!(stat(&t), "Ss");
    }

    #[test]
    fn command_brackets_and_defunct() {
        let mut p = proc(2, 'S');
        p.comm = "kthreadd".into();
        assert_eq!(command(&p), "[kthreadd]");
        p.state = 'Z';
        assert_eq!(command(&p), "[kthreadd] <defunct>");
        p.cmdline = vec!["sleep".into(), "1\n0".into()];
        p.state = 'S';
        assert_eq!(command(&p), "sleep 1?0");
    }

    #[test]
    fn the_s_column_counts_threads_in_the_state_that_matters() {
        let mut r = row_of(1, 0, 0.0);
        assert_eq!(state_cell(&r), "S");
        (r.state, r.threads_in_state, r.threads) = ('D', 20, 22);
        assert_eq!(state_cell(&r), "D 20/22");
        // One thread, or a thread's own row (-T): the letter alone.
        (r.threads_in_state, r.threads) = (1, 1);
        assert_eq!(state_cell(&r), "D");
    }

    #[test]
    fn percentages_like_procps() {
        // 50 s of CPU over 100 s of life at 100 Hz.
        assert_eq!(cpu_percent(5000, 10_000, 200.0, 100), 50.0);
        assert_eq!(cpu_percent(5000, 20_000, 200.0, 100), 0.0);
        // Two busy threads for their whole life.
        assert_eq!(cpu_percent(2000, 0, 10.0, 100), 200.0);
        assert_eq!(mem_percent(1024, 8192), 12.5);
        assert_eq!(mem_percent(9000, 8192), 99.9);
        assert_eq!(mem_percent(1, 0), 0.0);
    }

    #[test]
    fn times_like_ps_aux() {
        assert_eq!(bsd_time(0), "0:00");
        assert_eq!(bsd_time(3725), "62:05");
        // 2026-11-22 07:05 UTC.
        let now = 1_795_331_100;
        assert_eq!(start(now - 60, now, 0), "07:04");
        assert_eq!(start(now - 3 * 86400, now, 0), "Nov19");
        assert_eq!(start(now - 3 * 86400, now, 3600), "Nov19");
        assert_eq!(start(now - 400 * 86400, now, 0), "2025");
        assert_eq!(start(now - 60, now, 2 * 3600), "09:04");
    }

    fn row_of(pid: i32, ppid: i32, cpu: f64) -> Row {
        Row {
            user: "root".into(),
            pid,
            tid: pid,
            ppid,
            cpu_percent: cpu,
            mem_percent: 0.0,
            vsz_kib: 0,
            rss_kib: pid as u64,
            tty: "?".into(),
            stat: "S".into(),
            state: 'S',
            threads_in_state: 0,
            threads: 1,
            start_epoch: 0,
            start: String::new(),
            cpu_secs: 0.0,
            time: String::new(),
            comm: format!("c{pid}"),
            command: format!("c{pid}"),
            depth: 0,
        }
    }

    #[test]
    fn sort_keys() {
        let k: SortKey = "-%cpu".parse().unwrap();
        assert_eq!(
            k,
            SortKey {
                field: Field::Cpu,
                descending: true
            }
        );
        assert!(
            "bogus"
                .parse::<SortKey>()
                .unwrap_err()
                .contains("unknown sort field")
        );
        let mut rows = vec![row_of(1, 0, 0.5), row_of(2, 0, 9.0), row_of(3, 0, 0.5)];
        sort(&mut rows, k);
        let pids: Vec<i32> = rows.iter().map(|r| r.pid).collect();
        assert_eq!(pids, [2, 1, 3]);
        sort(&mut rows, "rss".parse().unwrap());
        assert_eq!(rows[0].pid, 1);
    }

    #[test]
    fn forest_art() {
        let rows = vec![
            row_of(1, 0, 0.0),
            row_of(2, 1, 0.0),
            row_of(3, 2, 0.0),
            row_of(4, 1, 0.0),
            row_of(5, 0, 0.0),
            row_of(6, 4, 0.0),
        ];
        let f = forest(rows);
        let lines: Vec<&str> = f.iter().map(|r| r.command.as_str()).collect();
        assert_eq!(
            lines,
            [
                "c1",
                " \\_ c2",
                " |   \\_ c3",
                " \\_ c4",
                "     \\_ c6",
                "c5"
            ]
        );
    }
}
