//! The flight recorder (`--flight-dir DIR`): when a group's verdict turns to
//! one worth a record (its class's `ClassSpec::record`) and stays so for
//! `--record-after`, diagnose's own engine runs on the process that carries
//! it, on a thread while watch goes on scanning, with the drill-downs the
//! verdict calls for; its record (for `kdiag diagnose --replay`), its
//! HTML report and its profile as pprof are kept in DIR as the user who ran sudo, each written to a
//! temporary file and renamed, oldest records removed first past
//! `--flight-keep` records or `--flight-max-size` bytes. One capture runs
//! at a time; a group due meanwhile waits for the next scan.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context as _;

use crate::analysis::watch::{Spell, due_records};
use crate::diagnose::{self, Request, WhyMode};
use crate::instruments::watch::Watcher;
use crate::model::diagnosis::Class;
use crate::model::watch::{Event, FlightCount, Snapshot};
use crate::sys::process::interrupt::Interrupt;
use crate::user_files;

/// Seconds diagnose watches the carrier before its drill-downs (which
/// take up to 3 s more).
const WINDOW_S: f64 = 5.0;
/// Every file the recorder keeps starts so; its temporaries start with a dot.
const PREFIX: &str = "flight-";

pub struct Limits {
    /// Seconds a verdict lasts before it is recorded.
    pub after_s: f64,
    /// Records kept at most (a record is its .jsonl, its .html and its
    /// .pprof).
    pub keep: usize,
    /// Bytes kept at most, all records together.
    pub max_bytes: u64,
}

/// A record kept: its files in DIR.
struct Taken {
    group: String,
    verdict: Class,
    record: PathBuf,
    report: PathBuf,
    /// The drill-down's profile as pprof, when one ran.
    profile: Option<PathBuf>,
    found: Class,
    pid: i32,
}

pub struct FlightRecorder {
    dir: PathBuf,
    limits: Limits,
    started: Instant,
    spells: HashMap<String, Spell>,
    counts: Vec<FlightCount>,
    running: Option<JoinHandle<anyhow::Result<Option<Taken>>>>,
    interrupt: Interrupt,
    /// Records kept since `take_events` last took them.
    events: Vec<Event>,
}

impl FlightRecorder {
    /// Make `dir` (as the user) and remove the temporaries a killed kdiag
    /// left there.
    pub fn new(
        dir: &Path,
        limits: Limits,
        interrupt: &Interrupt,
    ) -> anyhow::Result<FlightRecorder> {
        user_files::create_dir_all(dir)?;
        // A directory the user cannot write fails now, not at the first
        // record, maybe hours later.
        let probe = dir.join(format!(".{PREFIX}probe"));
        user_files::write(&probe, b"")?;
        user_files::remove_file(&probe)?;
        for p in user_files::read_dir(dir)? {
            if name_of(&p).starts_with(&format!(".{PREFIX}")) {
                user_files::remove_file(&p)?;
            }
        }
        Ok(FlightRecorder {
            dir: dir.to_path_buf(),
            limits,
            started: Instant::now(),
            spells: HashMap::new(),
            counts: Vec::new(),
            running: None,
            interrupt: interrupt.clone(),
            events: Vec::new(),
        })
    }

    /// After each scan: collect a capture that ended, start one for a
    /// group whose bad verdict has lasted, and put the counts in `snap`.
    pub fn after_scan(&mut self, snap: &mut Snapshot, watcher: &Watcher) -> anyhow::Result<()> {
        if self.running.as_ref().is_some_and(JoinHandle::is_finished) {
            self.collect()?;
        }
        let verdicts: Vec<(&str, Class)> = snap
            .groups
            .iter()
            .filter_map(|g| Some((g.name.as_str(), g.verdict?)))
            .collect();
        let now = self.started.elapsed().as_secs_f64();
        let mut due =
            due_records(&mut self.spells, &verdicts, now, self.limits.after_s).into_iter();
        if self.running.is_none()
            && let Some((group, verdict)) = due.next()
            && let Some(pid) = watcher.carrier(&group, verdict)
        {
            let dir = self.dir.clone();
            let interrupt = self.interrupt.clone();
            let after = self.limits.after_s;
            eprintln!(
                "kdiag watch: {group} has been {} for {after} s: diagnosing PID {pid} for the flight record ...",
                verdict.name()
            );
            self.running = Some(
                std::thread::Builder::new()
                    .name("watch-flight".into())
                    .spawn(move || capture(&dir, group, verdict, pid, &interrupt))?,
            );
        }
        // Not taken now (one capture at a time): due again next scan.
        for (group, _) in due {
            if let Some(s) = self.spells.get_mut(&group) {
                s.recorded = false;
            }
        }
        self.counts.retain(|c| watcher.knows(&c.group));
        snap.flight = self.counts.clone();
        Ok(())
    }

    /// Wait for the capture under way (at the end of watch).
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.collect()
    }

    fn collect(&mut self) -> anyhow::Result<()> {
        let Some(t) = self.running.take() else {
            return Ok(());
        };
        let taken = t
            .join()
            .map_err(|_| anyhow::anyhow!("the flight recorder panicked"))?;
        let t = match taken {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(()),
            // The process ended, or could not be diagnosed: watch goes on.
            Err(e) => {
                eprintln!("kdiag watch: no flight record: {e:#}");
                return Ok(());
            }
        };
        let removed = self.prune()?;
        if removed.contains(&t.record) {
            eprintln!(
                "kdiag watch: the flight record of {} is over --flight-max-size alone: not kept",
                t.group
            );
            return Ok(());
        }
        match self
            .counts
            .iter_mut()
            .find(|c| c.group == t.group && c.verdict == t.verdict)
        {
            Some(c) => c.records += 1,
            None => self.counts.push(FlightCount {
                group: t.group.clone(),
                verdict: t.verdict,
                records: 1,
            }),
        }
        let profile = t
            .profile
            .as_ref()
            .map(|p| format!(", its profile {}", p.display()))
            .unwrap_or_default();
        eprintln!(
            "kdiag watch: flight record of {} ({}; diagnose of PID {} says {}): {} and {}{profile}",
            t.group,
            t.verdict.name(),
            t.pid,
            t.found.name(),
            t.record.display(),
            t.report.display()
        );
        self.events.push(Event::Flight {
            group: t.group,
            verdict: t.verdict,
            pid: t.pid,
            found: t.found,
            record: t.record,
            report: t.report,
            profile: t.profile,
        });
        Ok(())
    }

    /// The records kept since the last call, as events (for OTLP's logs).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Remove the oldest records past the count and size limits; the
    /// paths removed.
    fn prune(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut files: Vec<(PathBuf, u64)> = Vec::new();
        for p in user_files::read_dir(&self.dir)? {
            if name_of(&p).starts_with(PREFIX) {
                let len = std::fs::symlink_metadata(&p).map_or(0, |m| m.len());
                files.push((p, len));
            }
        }
        let doomed = oldest_past(&files, self.limits.keep, self.limits.max_bytes);
        for p in &doomed {
            user_files::remove_file(p)?;
        }
        Ok(doomed)
    }
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Of the recorder's files (sorted by name: the time leads, so oldest
/// first), those of the oldest records to remove so at most `keep` records
/// and `max_bytes` stay. A record is every file of one stem.
fn oldest_past(files: &[(PathBuf, u64)], keep: usize, max_bytes: u64) -> Vec<PathBuf> {
    let mut stems: Vec<(PathBuf, Vec<&PathBuf>, u64)> = Vec::new();
    for (p, len) in files {
        let stem = p.with_extension("");
        match stems.last_mut() {
            Some(s) if s.0 == stem => {
                s.1.push(p);
                s.2 += len;
            }
            _ => stems.push((stem, vec![p], *len)),
        }
    }
    let mut total: u64 = stems.iter().map(|s| s.2).sum();
    let mut left = stems.len();
    let mut doomed = Vec::new();
    for (_, paths, bytes) in &stems {
        if left <= keep && total <= max_bytes {
            break;
        }
        doomed.extend(paths.iter().map(|p| (*p).clone()));
        total -= bytes;
        left -= 1;
    }
    doomed
}

/// Diagnose `pid` as `kdiag diagnose -p PID --why auto` would, and keep
/// its record and HTML report in `dir`; None when watch was interrupted
/// meanwhile (nothing is kept of a run cut short).
fn capture(
    dir: &Path,
    group: String,
    verdict: Class,
    pid: i32,
    interrupt: &Interrupt,
) -> anyhow::Result<Option<Taken>> {
    let req = Request {
        pid: Some(pid),
        tree: false,
        cgroup: None,
        command: &[],
        duration: WINDOW_S,
        interval: diagnose::interval(WINDOW_S, None),
        why: WhyMode::Auto,
        // A flight record is kept quietly: watch's log says it was.
        report: &|_| {},
        live: None,
        heat_map: false,
        ask_jvms: false,
        // watch is the administrator's: everyone's processes.
        scope: Default::default(),
    };
    let run = diagnose::run(&req, interrupt)?;
    if interrupt.is_set() {
        return Ok(None);
    }
    let (stamp, _) = crate::instruments::target::utc_now();
    let stamp: String = stamp.chars().filter(|c| *c != '-' && *c != ':').collect();
    let stem = format!("{PREFIX}{stamp}-{}-{}", safe(&group), verdict.name());
    let (record, report) = (
        dir.join(format!("{stem}.jsonl")),
        dir.join(format!("{stem}.html")),
    );
    let mut html = Vec::new();
    crate::render::html::diagnose(&mut html, &run)?;
    let mut files = vec![
        (record.clone(), run.to_record().into_bytes()),
        (report.clone(), html),
    ];
    // The profile the verdict called for, as pprof: the CPU profile's, else
    // the off-CPU one's.
    let why = run.why.as_ref();
    let flame = why.and_then(|w| w.cpu_flame.as_ref().or(w.offcpu_flame.as_ref()));
    let profile = flame.map(|_| dir.join(format!("{stem}.pprof")));
    if let (Some(flame), Some(path)) = (flame, &profile) {
        files.push((path.clone(), crate::render::pprof::flame_gzipped(flame)?));
    }
    for (path, data) in &files {
        let temp = dir.join(format!(".{}", name_of(path)));
        let written = user_files::write(&temp, data).and_then(|()| user_files::rename(&temp, path));
        if written.is_err() {
            let _ = user_files::remove_file(&temp);
        }
        written.with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(Some(Taken {
        group,
        verdict,
        record,
        report,
        profile,
        found: run.diagnosis.verdict,
        pid,
    }))
}

/// A group's name as part of a file name: letters, digits, `.`, `_` and
/// `-` kept, anything else `_`, at most 64 characters.
fn safe(group: &str) -> String {
    let s: String = group
        .trim_start_matches('/')
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "root".into() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, u64)]) -> Vec<(PathBuf, u64)> {
        list.iter().map(|(p, n)| (PathBuf::from(p), *n)).collect()
    }

    #[test]
    fn the_oldest_records_go_first_whole() {
        let f = files(&[
            ("d/flight-1-a-io.html", 10),
            ("d/flight-1-a-io.jsonl", 10),
            ("d/flight-2-a-io.html", 10),
            ("d/flight-2-a-io.jsonl", 10),
            ("d/flight-3-b-lock.html", 10),
            ("d/flight-3-b-lock.jsonl", 10),
        ]);
        assert!(oldest_past(&f, 3, 60).is_empty());
        assert_eq!(
            oldest_past(&f, 2, 60),
            [
                PathBuf::from("d/flight-1-a-io.html"),
                PathBuf::from("d/flight-1-a-io.jsonl")
            ]
        );
        assert_eq!(oldest_past(&f, 3, 39).len(), 4, "by size: two records go");
        assert_eq!(oldest_past(&f, 3, 19).len(), 6, "one record alone too big");
    }

    #[test]
    fn group_names_make_safe_file_names() {
        assert_eq!(safe("/system.slice/db.service"), "system.slice_db.service");
        assert_eq!(safe("/"), "root");
        assert_eq!(safe("a b/../c"), "a_b_.._c");
    }
}
