//! diagnose's drill-downs beyond the profiles, compactly for the report's
//! why section: the block I/O (iosnoop's summary), the competition for
//! the CPUs, the failed execs (exec-trace's explanation), and how to name
//! the frames the profiles could not.

use std::io::{self, Write};

use crate::analysis::io_pattern::{human_bytes, slot_range};
use crate::model::drill::{
    Competition, ExecDrill, PerfMapAsk, PythonStacks, Runtime, StorageDrill, UnnamedFrames,
};

/// Storage: who submits, the pattern, sizes, the latency histogram.
pub fn storage(out: &mut impl Write, s: &StorageDrill) -> io::Result<()> {
    writeln!(
        out,
        "  Storage ({} tier): {} requests, {}: {} reads ({}), {} writes ({}); {:.0}% sequential, sync {:.0}%{}",
        s.tier,
        s.requests,
        human_bytes(s.bytes),
        s.reads,
        human_bytes(s.read_bytes),
        s.writes,
        human_bytes(s.write_bytes),
        s.sequential_share * 100.0,
        s.sync_share * 100.0,
        if s.lost > 0 {
            format!(" ({} events lost)", s.lost)
        } else {
            String::new()
        }
    )?;
    if s.requests > 0 {
        let types: Vec<String> = s
            .types
            .iter()
            .take(5)
            .map(|t| format!("{} x{}", t.name, t.count))
            .collect();
        let sizes: Vec<String> = s
            .sizes
            .iter()
            .map(|c| format!("{} x{}", human_bytes(c.bytes), c.count))
            .collect();
        writeln!(
            out,
            "    types {}; sizes {}",
            types.join(", "),
            sizes.join(", ")
        )?;
    }
    for p in s.submitters.iter().take(5) {
        let who = match &p.kernel {
            Some(kind) => format!(
                "{} ({}, {kind}: writes for every process on the disk)",
                p.comm, p.pid
            ),
            None => format!("{} ({})", p.comm, p.pid),
        };
        let issued: Vec<String> = p
            .issued_by
            .iter()
            .take(2)
            .map(|t| format!("{} by {}", t.count, t.name))
            .collect();
        writeln!(
            out,
            "    submits: {who}: {} requests, {}{}",
            p.requests,
            human_bytes(p.bytes),
            if issued.is_empty() {
                String::new()
            } else {
                format!(" (issued to the device {})", issued.join(", "))
            }
        )?;
    }
    if s.requests > 0 {
        let buckets: Vec<String> = s
            .latency_us
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(slot, c)| {
                let (lo, hi) = slot_range(slot as u32);
                format!("{lo}-{hi} µs: {c}")
            })
            .collect();
        writeln!(
            out,
            "    latency p50 {:.2} ms, p99 {:.2} ms; {}",
            s.p50_ms,
            s.p99_ms,
            buckets.join(", ")
        )?;
    }
    for r in s.repeated.iter().take(3) {
        writeln!(out, "    repeated: {}", r.text)?;
    }
    Ok(())
}

/// Waiting for a CPU: the target's share and the processes that had the
/// CPUs.
pub fn competition(out: &mut impl Write, c: &Competition) -> io::Result<()> {
    writeln!(
        out,
        "  CPU competition: it had {:.0}% of a CPU (may run on CPUs {}); all processes {:.0}% of {} CPU{}",
        c.target_percent,
        c.target_cpus,
        c.total_percent,
        c.cpus,
        if c.cpus == 1 { "" } else { "s" }
    )?;
    for o in c.others.iter().take(5) {
        writeln!(
            out,
            "    {:5.1}% {}{}{}",
            o.cpu_percent,
            o.comm,
            match o.pid {
                0 => String::new(),
                pid => format!(" ({pid})"),
            },
            o.cpus
                .as_ref()
                .map_or(String::new(), |l| format!(", on CPUs {l}"))
        )?;
    }
    Ok(())
}

/// Failed execs, each as exec-trace explains it; with none, the count.
pub fn exec(out: &mut impl Write, e: &ExecDrill) -> io::Result<()> {
    if e.failures.is_empty() {
        return writeln!(
            out,
            "  Execs ({} tier): {} seen, none failed",
            e.tier, e.execs
        );
    }
    let failed: u64 = e.failures.iter().map(|f| f.times).sum();
    writeln!(
        out,
        "  Exec failures ({} tier, as kdiag exec-trace explains them): {failed} of {} execs failed",
        e.tier, e.execs
    )?;
    for f in &e.failures {
        let times = if f.times > 1 {
            format!("{} times, last ", f.times)
        } else {
            String::new()
        };
        writeln!(out, "    {times}PID {}: {}", f.pid, f.text)?;
    }
    Ok(())
}

/// Whether kdiag asked a JVM for its perf map, as whom, and what came of it.
pub fn perf_map(out: &mut impl Write, a: &PerfMapAsk) -> io::Result<()> {
    let pid = a.pid;
    let jcmd = format!("`jcmd {pid} Compiler.perfmap`");
    match (a.uid, &a.why_not) {
        (Some(uid), None) => writeln!(
            out,
            "  Java names: kdiag asked PID {pid} for its perf map ({jcmd} as uid {uid}): {} \
             entries, read to name the drill-down's Java frames; the map it made was removed after",
            a.entries
        ),
        (Some(uid), Some(why)) => writeln!(
            out,
            "  Java names: kdiag asked PID {pid} for its perf map ({jcmd} as uid {uid}); it failed: {why}"
        ),
        (None, why) => writeln!(
            out,
            "  Java names: kdiag did not ask PID {pid} for its perf map: {}",
            why.as_deref().unwrap_or("not asked")
        ),
    }
}

/// The Python functions kdiag read from a CPython process's memory, or why
/// it did not.
pub fn python(out: &mut impl Write, p: &PythonStacks) -> io::Result<()> {
    let pid = p.pid;
    if let Some(why) = &p.why_not {
        return writeln!(out, "  Python names: PID {pid}'s stacks not read: {why}");
    }
    let share = |n: u64| n as f64 * 100.0 / p.samples.max(1) as f64;
    let functions: Vec<String> = (p.functions.iter())
        .map(|f| format!("{} {:.0}%", f.label(), share(f.samples)))
        .collect();
    writeln!(
        out,
        "  Python names: PID {pid}'s stacks read from its memory {} times ({} a second, never \
         stopped): {} of {} thread samples in Python; innermost: {}",
        p.rounds,
        p.hz,
        p.samples,
        p.threads_sampled,
        if functions.is_empty() {
            "none".into()
        } else {
            functions.join(", ")
        }
    )
}

/// Frames without names: which runtime or binary made them, and how to get
/// their names (kdiag reads /tmp/perf-PID.map and jitdumps by itself, and
/// has asked a JVM for its map when it could: `asked`).
pub fn unnamed(out: &mut impl Write, u: &UnnamedFrames, asked: &[PerfMapAsk]) -> io::Result<()> {
    let pid = u
        .pids
        .first()
        .map_or_else(|| "PID".to_string(), |p| p.to_string());
    // Whether kdiag asked this JVM for its map (then no jcmd advice: it was
    // run, or kdiag said why it must not be), and whether it got one.
    let ask = asked.iter().find(|a| u.pids.contains(&a.pid));
    let (what, how) = match u.runtime {
        Runtime::Jvm if ask.is_some() => (
            "Java frames without names (the JIT's code, in anonymous memory)".to_string(),
            format!(
                "{}; start the JVM with -XX:+PreserveFramePointer for whole stacks",
                match ask.is_some_and(|a| a.uid.is_some() && a.why_not.is_none()) {
                    true =>
                        "the perf map kdiag asked for names the code compiled by then, not code compiled after it",
                    false => "kdiag got no perf map from it (the Java names line says why)",
                }
            ),
        ),
        Runtime::Jvm => (
            "Java frames without names (the JIT's code, in anonymous memory)".to_string(),
            format!(
                "run `jcmd {pid} Compiler.perfmap` while it runs (it writes /tmp/perf-{pid}.map, \
                 which kdiag reads), and start the JVM with -XX:+PreserveFramePointer for whole stacks"
            ),
        ),
        Runtime::Node => (
            "JavaScript frames without names (V8's code, in anonymous memory)".to_string(),
            "start node with --perf-basic-prof (it writes /tmp/perf-PID.map, which kdiag reads), \
             or --perf-prof for a jitdump"
                .to_string(),
        ),
        Runtime::Python => (
            "Python functions hidden in the interpreter's loop (_PyEval_EvalFrameDefault)"
                .to_string(),
            "with Python 3.12 or later, start it with `python3 -X perf` (or PYTHONPERFSUPPORT=1): \
             each Python function gets a frame kdiag names; before 3.12 Python has no perf support"
                .to_string(),
        ),
        Runtime::Jit => (
            "frames without names in anonymous executable memory (a JIT's code)".to_string(),
            format!(
                "the runtime that made them can write /tmp/perf-{pid}.map or a jitdump, \
                 which kdiag reads"
            ),
        ),
        Runtime::Stripped => (
            format!(
                "frames of {} without names (a binary without symbols)",
                u.module.as_deref().unwrap_or("a binary")
            ),
            "install its debug symbols (Debian/Ubuntu: its -dbgsym package; Fedora: \
             dnf debuginfo-install), which kdiag finds under /usr/lib/debug; where no package has \
             them, debuginfod serves them by build id"
                .to_string(),
        ),
    };
    writeln!(
        out,
        "  Unnamed: {what}, {:.0}% of a profile; for names, {how}",
        u.percent
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(runtime: Runtime, module: Option<&str>) -> String {
        let mut out = Vec::new();
        let u = UnnamedFrames {
            runtime,
            module: module.map(str::to_string),
            pids: vec![42],
            percent: 61.4,
        };
        unnamed(&mut out, &u, &[]).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn each_runtime_gets_its_own_advice() {
        let jvm = said(Runtime::Jvm, None);
        assert!(jvm.contains("61% of a profile"), "{jvm}");
        assert!(jvm.contains("`jcmd 42 Compiler.perfmap`"), "{jvm}");
        // Once kdiag had the JVM write its map, it does not send the user
        // to jcmd.
        let mut out = Vec::new();
        let u = UnnamedFrames {
            runtime: Runtime::Jvm,
            module: None,
            pids: vec![42],
            percent: 20.0,
        };
        let asked = PerfMapAsk {
            pid: 42,
            uid: Some(1001),
            entries: 1519,
            why_not: None,
        };
        unnamed(&mut out, &u, std::slice::from_ref(&asked)).unwrap();
        perf_map(&mut out, &asked).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("run `jcmd"), "{text}");
        assert!(text.contains("as uid 1001): 1519 entries"), "{text}");
        assert!(jvm.contains("-XX:+PreserveFramePointer"), "{jvm}");
        assert!(said(Runtime::Node, None).contains("--perf-basic-prof"));
        assert!(said(Runtime::Python, None).contains("-X perf"));
        assert!(said(Runtime::Jit, None).contains("/tmp/perf-42.map"));
        let s = said(Runtime::Stripped, Some("/usr/bin/redis-server"));
        assert!(
            s.contains("/usr/bin/redis-server") && s.contains("debuginfod"),
            "{s}"
        );
    }
}
