//! Text output of `kdiag time`: a short summary, or every counter in the
//! layout of GNU `time -v` plus kdiag's storage bytes and ending.

use std::io::{self, Write};

use crate::model::rusage::{CommandRun, Ending};

/// Bytes in binary units: "0 B", "512 B", "20.0 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Wall-clock time as GNU time prints it: h:mm:ss, or m:ss.cc under an hour.
pub fn elapsed(secs: f64) -> String {
    let total = secs.max(0.0);
    let h = (total / 3600.0) as u64;
    let m = ((total % 3600.0) / 60.0) as u64;
    let s = total % 60.0;
    if h > 0 {
        format!("{h}:{m:02}:{:02}", s as u64)
    } else {
        format!("{m}:{s:05.2}")
    }
}

/// How the command ended, in one line. `origin_note` explains a missing
/// signal origin.
pub fn ending(run: &CommandRun, origin_note: Option<&str>) -> String {
    match &run.ending {
        Ending::Exited { code } => format!("exited with status {code}"),
        Ending::Signaled {
            signal,
            name,
            core_dumped,
            origin,
            ..
        } => {
            let mut s = format!("killed by {name} ({signal})");
            if *core_dumped {
                s.push_str(", core dumped");
            }
            match origin {
                Some(o) => s.push_str(&format!("; sent by {}", o.describe(run.pid))),
                None => {
                    s.push_str("; sender unknown");
                    if let Some(note) = origin_note {
                        s.push_str(&format!(" ({note})"));
                    }
                }
            }
            s
        }
    }
}

/// The default short report.
pub fn write_summary(
    out: &mut impl Write,
    run: &CommandRun,
    origin_note: Option<&str>,
) -> io::Result<()> {
    let r = &run.rusage;
    writeln!(
        out,
        "real {:.3}s  user {:.3}s  sys {:.3}s  cpu {:.0}%  max rss {}",
        run.real_secs,
        r.user_secs,
        r.sys_secs,
        run.cpu_percent(),
        bytes(r.max_rss_kb * 1024)
    )?;
    match &run.io {
        Some(io) => writeln!(
            out,
            "storage read {}  written {}",
            bytes(io.read_bytes),
            bytes(io.write_bytes)
        )?,
        None => writeln!(
            out,
            "storage bytes unknown: {}",
            run.io_error.as_deref().unwrap_or("?")
        )?,
    }
    writeln!(out, "{}", ending(run, origin_note))
}

/// The `-v` report: GNU time's labels first, then what GNU time lacks.
pub fn write_verbose(
    out: &mut impl Write,
    run: &CommandRun,
    origin_note: Option<&str>,
) -> io::Result<()> {
    let r = &run.rusage;
    let mut line = |label: &str, value: String| writeln!(out, "\t{label}: {value}");
    line(
        "Command being timed",
        format!("\"{}\"", run.command.join(" ")),
    )?;
    line("User time (seconds)", format!("{:.2}", r.user_secs))?;
    line("System time (seconds)", format!("{:.2}", r.sys_secs))?;
    line(
        "Percent of CPU this job got",
        format!("{:.0}%", run.cpu_percent()),
    )?;
    line(
        "Elapsed (wall clock) time (h:mm:ss or m:ss)",
        elapsed(run.real_secs),
    )?;
    line(
        "Maximum resident set size (kbytes)",
        r.max_rss_kb.to_string(),
    )?;
    line(
        "Major (requiring I/O) page faults",
        r.major_faults.to_string(),
    )?;
    line(
        "Minor (reclaiming a frame) page faults",
        r.minor_faults.to_string(),
    )?;
    line(
        "Voluntary context switches",
        r.voluntary_switches.to_string(),
    )?;
    line(
        "Involuntary context switches",
        r.involuntary_switches.to_string(),
    )?;
    line("File system inputs", r.fs_inputs.to_string())?;
    line("File system outputs", r.fs_outputs.to_string())?;
    match &run.io {
        Some(io) => {
            let both = |n: u64| format!("{n} ({})", bytes(n));
            line("Storage bytes read (read_bytes)", both(io.read_bytes))?;
            line("Storage bytes written (write_bytes)", both(io.write_bytes))?;
            line(
                "Written bytes cancelled before writeback",
                both(io.cancelled_write_bytes),
            )?;
            line("Bytes read by syscalls (rchar)", both(io.rchar))?;
            line("Bytes written by syscalls (wchar)", both(io.wchar))?;
            line("Read system calls (syscr)", io.syscr.to_string())?;
            line("Write system calls (syscw)", io.syscw.to_string())?;
        }
        None => line(
            "Storage bytes",
            format!("unknown ({})", run.io_error.as_deref().unwrap_or("?")),
        )?,
    }
    match &run.ending {
        Ending::Exited { code } => line("Exit status", code.to_string())?,
        Ending::Signaled { .. } => line("Ended", ending(run, origin_note))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(20 * 1024 * 1024), "20.0 MiB");
        assert_eq!(elapsed(0.02), "0:00.02");
        assert_eq!(elapsed(75.5), "1:15.50");
        assert_eq!(elapsed(3725.0), "1:02:05");
    }
}
