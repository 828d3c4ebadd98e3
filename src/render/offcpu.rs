//! The `kdiag offcpu` report: blocked time by state and wait point, the top
//! blocking paths, and a footer with what was lost, the tier and the probe
//! effect; or, without BPF, the coarse table of wait channels and syscalls.

use std::io::Write;

use serde::Serialize;

use crate::model::offcpu::{Collection, Offcpu, StateFilter, Summary, WaitSamples};
use crate::render::table::{Align, Table};

/// How many blocking paths the text report prints in full.
const PATHS: usize = 5;
/// Rows of the coarse view.
const WAIT_ROWS: usize = 20;

/// The JSON document: the run (stacks, counters, coarse samples) and its summary.
#[derive(Serialize)]
pub struct Report<'a> {
    pub offcpu: &'a Offcpu,
    pub summary: &'a Summary,
}

pub fn json(out: &mut impl Write, offcpu: &Offcpu, summary: &Summary) -> anyhow::Result<()> {
    crate::render::json(out, &Report { offcpu, summary })
}

/// `12.3 s`, `45.6 ms`, `789 us`.
pub fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.0} us", ns / 1e3)
    }
}

/// A stack on one line, outermost first, without the thread start-up of
/// the C and Rust runtimes above the program's own frames nor the
/// scheduler's frames below the wait point.
pub fn one_line(frames: &[String]) -> String {
    let runtime = |f: &str| {
        [
            "start_thread",
            "clone",
            "__libc_start",
            "std::",
            "<std::",
            "core::",
            "main",
        ]
        .iter()
        .any(|p| f.starts_with(p))
    };
    let scheduler = |f: &str| f.trim_start_matches('_').starts_with("schedule");
    let start = frames.iter().position(|f| !runtime(f)).unwrap_or(0);
    let mut end = frames.len();
    while end > start + 1 && scheduler(&frames[end - 1]) {
        end -= 1;
    }
    let shown: Vec<String> = frames[start..end]
        .iter()
        .map(|f| f.replace("_[k]", " [k]"))
        .collect();
    shown.join(" → ")
}

fn what_states(o: &Offcpu) -> String {
    match o.states {
        StateFilter::All => String::new(),
        StateFilter::D => " (D state only)".into(),
        StateFilter::S => " (S state only)".into(),
    }
}

/// The text report.
pub fn text(out: &mut impl Write, o: &Offcpu, s: &Summary) -> anyhow::Result<()> {
    let p = &o.profile;
    if let Some(waits) = &o.waits {
        return coarse(out, o, waits);
    }
    writeln!(
        out,
        "Off-CPU time of {}, {:.2} s, started {}: {} blocked{} in {} blocks (summed over threads)",
        p.target,
        p.cost.wall_secs,
        p.started,
        duration(s.total_ns),
        what_states(o),
        s.blocks
    )?;
    if let Some(why) = &p.ended_early {
        writeln!(
            out,
            "Note: {why}; the report covers what was collected until then."
        )?;
    }
    writeln!(out)?;
    writeln!(out, "Blocked time by state")?;
    let mut t = Table::new([
        ("STATE", Align::Left),
        ("BLOCKED", Align::Right),
        ("SHARE", Align::Right),
        ("BLOCKS", Align::Right),
        ("MEANING", Align::Left),
    ]);
    for st in &s.by_state {
        t.push(vec![
            st.state.letter().to_string(),
            duration(st.ns),
            format!("{:.1}%", st.percent),
            st.blocks.to_string(),
            st.state.meaning().into(),
        ]);
    }
    t.write(out)?;
    writeln!(out)?;
    writeln!(
        out,
        "Where threads waited (the kernel function below the scheduler's own)"
    )?;
    let mut t = Table::new([
        ("BLOCKED", Align::Right),
        ("SHARE", Align::Right),
        ("BLOCKS", Align::Right),
        ("S", Align::Left),
        ("WAIT POINT", Align::Left),
    ]);
    for w in &s.wait_points {
        t.push(vec![
            duration(w.ns),
            format!("{:.1}%", w.percent),
            w.blocks.to_string(),
            w.state.letter().to_string(),
            w.function.clone(),
        ]);
    }
    t.write(out)?;
    writeln!(out)?;
    writeln!(
        out,
        "Top blocking paths (outermost first, where it blocked last; [k] = kernel)"
    )?;
    for path in s.paths.iter().take(PATHS) {
        writeln!(
            out,
            "  {:.1}% {} in {} blocks (avg {}), state {}, {}",
            path.percent,
            duration(path.ns),
            path.blocks,
            duration(path.ns / path.blocks.max(1)),
            path.state.letter(),
            threads(&path.comms)
        )?;
        for f in &path.frames {
            writeln!(out, "      {}", f.replace("_[k]", " [k]"))?;
        }
    }
    writeln!(out)?;
    if !p.unknown_frames.is_empty() {
        writeln!(
            out,
            "Frames without a name (module+offset or [unknown]), by reason:"
        )?;
        for (why, n) in &p.unknown_frames {
            writeln!(out, "  {n:>7}  {why}")?;
        }
    }
    footer(out, o)
}

/// `locker` or `lock-worker-3, lock-worker-1 and 2 more threads`.
fn threads(comms: &[String]) -> String {
    match comms {
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [a, b, rest @ ..] => format!("{a}, {b} and {} more threads", rest.len()),
        [] => "?".into(),
    }
}

/// Blocks kept and lost, the tier, and the probe effect.
fn footer(out: &mut impl Write, o: &Offcpu) -> anyhow::Result<()> {
    let c = &o.counts;
    let mut line = format!(
        "Blocks: {} recorded (at least {} us), {} shorter left out, {} still blocked at the end \
         (counted to the end); {} stacks lost",
        c.blocks,
        o.min_block_us,
        c.short,
        c.in_progress,
        c.stacks_lost()
    );
    if c.stacks_lost() > 0 {
        line += " (stack map full or hash collisions: their time shows under [kernel stack lost] \
                 or [user stack lost])";
    }
    if c.user_stacks_unreadable > 0 {
        line += &format!("; {} user stacks unreadable", c.user_stacks_unreadable);
    }
    if c.starts_dropped + c.table_full > 0 {
        line += &format!(
            "; {} blocks not timed and {} dropped (tables full)",
            c.starts_dropped, c.table_full
        );
    }
    writeln!(out, "{line}")?;
    if let Collection::Bpf { attach } = &o.collection {
        writeln!(
            out,
            "Tier: BPF, {attach}/sched_switch, blocked time summed in the kernel by (thread, \
             kernel stack, user stack, state) and read once at the end"
        )?;
    }
    let cost = &o.profile.cost;
    let traced = c.blocks + c.short + c.in_progress;
    writeln!(
        out,
        "Probe effect: kdiag used {:.1} ms of CPU while recording {:.2} s ({:.2}% of one CPU); \
         the kernel walked two stacks at each of {traced} switches of watched threads; \
         report built in {:.0} ms",
        cost.kdiag_cpu_secs * 1e3,
        cost.wall_secs,
        if cost.wall_secs > 0.0 {
            100.0 * cost.kdiag_cpu_secs / cost.wall_secs
        } else {
            0.0
        },
        cost.post_secs * 1e3
    )?;
    Ok(())
}

/// The /proc tier's report: no stacks, and it says so.
fn coarse(out: &mut impl Write, o: &Offcpu, w: &WaitSamples) -> anyhow::Result<()> {
    let p = &o.profile;
    let interval = match o.collection {
        Collection::Proc { interval_ms } => interval_ms,
        Collection::Bpf { .. } => 0,
    };
    writeln!(
        out,
        "Coarse off-CPU view of {}, {:.2} s, started {}{}",
        p.target,
        p.cost.wall_secs,
        p.started,
        what_states(o)
    )?;
    if let Some(why) = &o.fallback_reason {
        writeln!(out, "No BPF: {why}")?;
    }
    writeln!(
        out,
        "Thread states, wait channels and system calls sampled from /proc every {interval} ms \
         ({} sweeps): no stacks, and preempted threads are not seen (/proc shows them as R).",
        w.sweeps
    )?;
    if let Some(why) = &p.ended_early {
        writeln!(
            out,
            "Note: {why}; the report covers what was collected until then."
        )?;
    }
    writeln!(out)?;
    let total: u64 = w.rows.iter().map(|r| r.est_ns).sum();
    let mut t = Table::new([
        ("EST.TIME", Align::Right),
        ("SHARE", Align::Right),
        ("SAMPLES", Align::Right),
        ("S", Align::Left),
        ("COMM", Align::Left),
        ("SYSCALL", Align::Left),
        ("WCHAN", Align::Left),
    ]);
    for r in w.rows.iter().take(WAIT_ROWS) {
        t.push(vec![
            duration(r.est_ns),
            format!(
                "{:.1}%",
                if total > 0 {
                    100.0 * r.est_ns as f64 / total as f64
                } else {
                    0.0
                }
            ),
            r.samples.to_string(),
            r.state.letter().to_string(),
            r.comm.clone(),
            if r.syscall.is_empty() {
                "?".into()
            } else {
                r.syscall.clone()
            },
            if r.wchan.is_empty() {
                "?".into()
            } else {
                r.wchan.clone()
            },
        ]);
    }
    t.write(out)?;
    if w.rows.len() > WAIT_ROWS {
        writeln!(
            out,
            "  ... {} more rows (--json has them all)",
            w.rows.len() - WAIT_ROWS
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "EST.TIME is samples times the sweep interval, summed over threads: an estimate. \
         For the code paths that block, run where BPF works (see `kdiag doctor`)."
    )?;
    let cost = &p.cost;
    writeln!(
        out,
        "Probe effect: kdiag used {:.1} ms of CPU while sampling {:.2} s ({:.2}% of one CPU)",
        cost.kdiag_cpu_secs * 1e3,
        cost.wall_secs,
        if cost.wall_secs > 0.0 {
            100.0 * cost.kdiag_cpu_secs / cost.wall_secs
        } else {
            0.0
        }
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::offcpu::summarize;
    use crate::model::offcpu::{BlockCounts, WaitRow};
    use crate::model::profile::{Frame, OffState, ProbeCost, Profile, Stack, WeightUnit};

    fn run() -> Offcpu {
        Offcpu {
            profile: Profile {
                target: "PID 7 (locker)".into(),
                started: "2026-11-22T07:00:00Z".into(),
                unit: WeightUnit::Nanoseconds,
                samples: 40,
                stacks: vec![Stack {
                    comm: "locker".into(),
                    frames: vec![
                        Frame::user("take_lock"),
                        Frame::kernel("futex_wait_queue"),
                        Frame::kernel("schedule"),
                    ],
                    samples: 40,
                    weight: 800_000_000,
                    user_depth: 1,
                    state: Some(OffState::S),
                    waker: None,
                    ongoing: false,
                }],
                cost: ProbeCost {
                    kdiag_cpu_secs: 0.004,
                    wall_secs: 2.0,
                    profiled_cpu_secs: None,
                    post_secs: 0.1,
                },
                ..Default::default()
            },
            collection: Collection::Bpf {
                attach: "tp_btf".into(),
            },
            fallback_reason: None,
            states: StateFilter::All,
            min_block_us: 1,
            counts: BlockCounts {
                blocks: 40,
                short: 3,
                kernel_stacks_lost: 2,
                ..Default::default()
            },
            waits: None,
        }
    }

    #[test]
    fn report_shows_states_wait_points_paths_and_losses() {
        let o = run();
        let s = summarize(&o.profile, 10);
        let mut out = Vec::new();
        text(&mut out, &o, &s).unwrap();
        let out = String::from_utf8(out).unwrap();
        for want in [
            "Off-CPU time of PID 7 (locker), 2.00 s",
            "800.0 ms blocked in 40 blocks",
            "S     800.0 ms 100.0%     40 sleeping",
            "futex_wait_queue",
            "100.0% 800.0 ms in 40 blocks (avg 20.0 ms), state S, locker",
            "      take_lock\n      futex_wait_queue [k]\n      schedule [k]\n",
            "Blocks: 40 recorded (at least 1 us), 3 shorter left out",
            "2 stacks lost (stack map full",
            "Tier: BPF, tp_btf/sched_switch",
            "kdiag used 4.0 ms of CPU while recording 2.00 s (0.20% of one CPU)",
            "each of 43 switches",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        let mut js = Vec::new();
        json(&mut js, &o, &s).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&js).unwrap();
        assert_eq!(v["offcpu"]["profile"]["unit"], "nanoseconds");
        assert_eq!(v["offcpu"]["profile"]["stacks"][0]["state"], "S");
        assert_eq!(v["summary"]["paths"][0]["ns"], 800_000_000);
        assert_eq!(v["offcpu"]["collection"]["kind"], "bpf");
    }

    #[test]
    fn coarse_view_says_it_has_no_stacks() {
        let mut o = run();
        o.profile.stacks.clear();
        o.collection = Collection::Proc { interval_ms: 10 };
        o.fallback_reason = Some("BPF_PROG_LOAD: Operation not permitted".into());
        o.waits = Some(WaitSamples {
            sweeps: 200,
            samples: 150,
            rows: vec![WaitRow {
                times: Vec::new(),
                comm: "dd".into(),
                state: OffState::D,
                wchan: "folio_wait_bit".into(),
                syscall: "write".into(),
                samples: 150,
                est_ns: 1_500_000_000,
            }],
        });
        let mut out = Vec::new();
        text(&mut out, &o, &Summary::default()).unwrap();
        let out = String::from_utf8(out).unwrap();
        for want in [
            "Coarse off-CPU view of PID 7 (locker)",
            "No BPF: BPF_PROG_LOAD: Operation not permitted",
            "every 10 ms (200 sweeps): no stacks",
            "1.50 s 100.0%     150 D dd   write   folio_wait_bit",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        assert!(!out.contains("Top blocking paths"));
    }
}
