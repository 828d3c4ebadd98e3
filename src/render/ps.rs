//! `kdiag ps` as text: the columns of `ps aux`, and after STAT (the main
//! thread's, as procps shows it) S: the state that matters among the
//! threads, as `kdiag top` shows it ("D 20/22").

use std::io::{self, Write};

use crate::analysis::ps::Row;
use crate::render::table::{Align, Table};

/// Write rows as `ps aux` does; `threads` adds an LWP column after PID.
pub fn write(out: &mut impl Write, rows: &[Row], threads: bool) -> io::Result<()> {
    use Align::{Left, Right};
    let mut cols = vec![("USER", Left), ("PID", Right)];
    if threads {
        cols.push(("LWP", Right));
    }
    cols.extend([
        ("%CPU", Right),
        ("%MEM", Right),
        ("VSZ", Right),
        ("RSS", Right),
        ("TTY", Left),
        ("STAT", Left),
        ("S", Left),
        ("START", Left),
        ("TIME", Right),
        ("COMMAND", Left),
    ]);
    let mut t = Table::new(cols);
    for r in rows {
        let mut cells = vec![r.user.clone(), r.pid.to_string()];
        if threads {
            cells.push(r.tid.to_string());
        }
        cells.extend([
            format!("{:.1}", r.cpu_percent),
            format!("{:.1}", r.mem_percent),
            r.vsz_kib.to_string(),
            r.rss_kib.to_string(),
            r.tty.clone(),
            r.stat.clone(),
            crate::analysis::ps::state_cell(r),
            r.start.clone(),
            r.time.clone(),
            r.command.clone(),
        ]);
        t.push(cells);
    }
    t.write(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aux_columns() {
        let row = Row {
            user: "root".into(),
            pid: 1,
            tid: 1,
            ppid: 0,
            cpu_percent: 0.0,
            mem_percent: 0.3,
            vsz_kib: 168_000,
            rss_kib: 12_000,
            tty: "?".into(),
            stat: "Ss".into(),
            state: 'S',
            threads_in_state: 0,
            threads: 1,
            start_epoch: 0,
            start: "06:35".into(),
            cpu_secs: 1.0,
            time: "0:01".into(),
            comm: "systemd".into(),
            command: "/sbin/init".into(),
            depth: 0,
        };
        let mut out = Vec::new();
        write(&mut out, &[row], false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "USER PID %CPU %MEM    VSZ   RSS TTY STAT S START TIME COMMAND\n\
             root   1  0.0  0.3 168000 12000 ?   Ss   S 06:35 0:01 /sbin/init\n"
        );
    }
}
