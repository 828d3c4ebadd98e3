//! `kdiag exec-trace`: trace a command's (or a running process's) exec
//! attempts, the signals that followed and how it ended, then explain.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use crate::analysis::exec_failure::{self, Finding};
use crate::error;
use crate::instruments::Ask;
use crate::instruments::exec::{Filter, Spawned};
use crate::instruments::target::{self, Interrupt};
use crate::model::exec::{Exit, ProcessEnd, TraceEvent};
use crate::render;

#[derive(Debug, clap::Args)]
#[command(arg_required_else_help = true)]
pub struct Args {
    /// Watch the execs of a running process (and its children) until it
    /// exits or Ctrl-C
    #[arg(short, long, conflicts_with = "command", value_parser = super::args::pid::<u32>)]
    pub pid: Option<u32>,
    /// Tracing tier: bpf reads exec filenames and arguments in the kernel;
    /// perf needs no BPF but sees less
    #[arg(long, default_value = "auto",
          value_parser = super::args::tier(&crate::instruments::exec::TRACE_TIERS))]
    pub tier: Ask,
    /// Print the trace and the explanation as JSON
    #[arg(long)]
    pub json: bool,
    /// The command to run and trace (after --)
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// How long an interrupted command gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(2);

#[derive(Serialize)]
struct Report {
    tier: &'static str,
    pid: u32,
    command: Vec<String>,
    events: Vec<TraceEvent>,
    findings: Vec<Finding>,
    lost: u64,
    notes: Vec<String>,
}

/// The checks on the arguments as a whole (values are checked when parsed).
pub fn validate(args: &Args) -> anyhow::Result<()> {
    if args.pid.is_none() && args.command.is_empty() {
        return Err(error::usage(
            "give a command after -- (kdiag exec-trace -- ./prog) or -p PID",
        ));
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    validate(&args)?;
    target::require_root("kdiag exec-trace")?;
    let interrupt = Interrupt::catch()?;
    let scope = super::args::scope()?;
    let filter = |pid| Filter {
        pid: Some(pid),
        follow_children: true,
        signals: true,
        scope,
    };
    let mut events = Vec::new();
    let (tier, lost, notes, pid) = if let Some(pid) = args.pid {
        target::check_pids(&[pid as i32])?;
        let (mut source, fallback) = crate::instruments::exec::open(args.tier, filter(pid), None)?;
        let mut notes: Vec<String> = fallback.iter().map(|f| f.note()).collect();
        // On stderr even with --json: scripts wait for it to know tracing is on.
        eprintln!(
            "kdiag exec-trace: watching pid {pid} and its children ({} tier); Ctrl-C to stop",
            source.tier().name()
        );
        while !interrupt.is_set() {
            source.poll(Duration::from_millis(100), &mut events)?;
            let ended = events
                .iter()
                .any(|e| matches!(e, TraceEvent::Exit(x) if x.pid == pid));
            if ended || !target::exists(pid as i32) {
                source.poll(Duration::from_millis(100), &mut events)?;
                break;
            }
        }
        notes.extend(source.notes());
        (source.tier().name(), source.lost(), notes, pid)
    } else {
        let mut child = target::spawn(&args.command)?;
        let pid = child.pid;
        let (mut source, fallback) = crate::instruments::exec::open(
            args.tier,
            filter(pid),
            Some(Spawned {
                pid,
                path: child.path.clone(),
                argv: args.command.clone(),
            }),
        )?;
        child.release().context("releasing the command")?;
        let mut status = None;
        let mut ended_at = None;
        loop {
            source.poll(Duration::from_millis(50), &mut events)?;
            if status.is_none() {
                status = child.try_wait();
                if status.is_some() {
                    ended_at = Some(Instant::now());
                }
            }
            // After the command ends, give in-flight records a moment.
            if ended_at.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
                break;
            }
            if interrupt.is_set() && status.is_none() {
                // Interrupted: stop the command and all it started; its
                // end (by our SIGTERM, or SIGKILL) is part of the trace.
                child.stop(STOP_GRACE);
                status = child.try_wait();
                source.poll(Duration::from_millis(100), &mut events)?;
                break;
            }
        }
        if let Some(status) = status {
            record_end(&mut events, pid, status);
        }
        let notes = fallback
            .iter()
            .map(|f| f.note())
            .chain(source.notes())
            .collect();
        (source.tier().name(), source.lost(), notes, pid)
    };

    let files = crate::instruments::exec::file_facts(&events);
    let findings = exec_failure::explain(&events, &files);
    let mut out = std::io::stdout().lock();
    if args.json {
        render::json(
            &mut out,
            &Report {
                tier,
                pid,
                command: args.command.clone(),
                events,
                findings: findings.clone(),
                lost,
                notes,
            },
        )?;
    } else {
        writeln!(out, "tier: {tier}")?;
        for n in &notes {
            writeln!(out, "note: {n}")?;
        }
        if lost > 0 {
            writeln!(out, "warning: the kernel dropped {lost} events")?;
        }
        render::exec::trace(&mut out, &events)?;
        render::exec::findings(&mut out, &findings)?;
    }
    out.flush()?;
    let code = if findings.iter().any(Finding::is_problem) {
        error::FAILURE
    } else {
        error::OK
    };
    // Ctrl-C is how a -p trace ends; a command's trace it interrupts.
    Ok(interrupt.exit_code(code, args.pid.is_some()))
}

/// Put the wait status (the truth) in place of what the tier saw of the
/// command's end.
fn record_end(events: &mut Vec<TraceEvent>, pid: u32, status: i32) {
    let exit = Exit::from_status(status);
    if let Some(TraceEvent::Exit(end)) = events
        .iter_mut()
        .find(|e| matches!(e, TraceEvent::Exit(x) if x.pid == pid))
    {
        end.exit = exit;
        return;
    }
    let time_ns = events.last().map_or(0, |e| e.time_ns() + 1);
    events.push(TraceEvent::Exit(ProcessEnd {
        time_ns,
        pid,
        comm: String::new(),
        exit,
    }));
}
