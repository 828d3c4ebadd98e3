//! diagnose's drill-downs beyond the profiles, summarised: the target's
//! block I/O (by iosnoop's analysis, `io_pattern`), the processes it
//! competed with for the CPUs (by top's rates), and its failed execs (by
//! exec-trace's explanation). Pure.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::exec_failure::Finding;
use crate::analysis::io_pattern::{self, percentile};
use crate::analysis::kthread::{self, DrivenBy};
use crate::analysis::top;
use crate::model::block::{BlockIo, Op};
use crate::model::drill::{
    Competition, Competitor, ExecDrill, ExecFailure, RepeatedRange, SizeCount, StorageDrill,
    Submitter, TypeCount,
};
use crate::model::exec::TraceEvent;
use crate::model::process::Process;

/// Competitors kept.
const COMPETITORS: usize = 10;

/// The requests `target`'s processes caused, summarised as iosnoop's
/// --summary does, with the kernel threads that write for every process
/// (the journal, writeback flushers) on the disks the target used.
pub fn storage(ios: &[BlockIo], target: &[i32], tier: &str, lost: u64) -> StorageDrill {
    let target: HashSet<u32> = target.iter().map(|&p| p as u32).collect();
    let mine: Vec<BlockIo> = ios
        .iter()
        .filter(|io| target.contains(&io.pid))
        .cloned()
        .collect();
    let disks: HashSet<_> = mine.iter().map(|io| io.dev).collect();
    let for_everyone: Vec<BlockIo> = ios
        .iter()
        .filter(|io| !target.contains(&io.pid) && (disks.is_empty() || disks.contains(&io.dev)))
        .filter(|io| kthread::describe(&io.comm).2 == DrivenBy::Writers)
        .cloned()
        .collect();
    let pattern = io_pattern::pattern(&mine);
    let t = pattern.totals;

    let mut submitters: Vec<Submitter> = io_pattern::per_process(&mine)
        .into_iter()
        .map(|p| Submitter {
            issued_by: counts(
                mine.iter()
                    .filter(|io| io.pid == p.pid && io.comm == p.comm)
                    .filter_map(|io| io.issuer.as_ref().map(|t| t.comm.as_str())),
            ),
            pid: p.pid,
            comm: p.comm,
            requests: p.totals.requests,
            bytes: p.totals.bytes,
            kernel: None,
        })
        .collect();
    submitters.extend(
        io_pattern::per_process(&for_everyone)
            .into_iter()
            .map(|p| Submitter {
                kernel: Some(kthread::describe(&p.comm).0),
                pid: p.pid,
                comm: p.comm,
                requests: p.totals.requests,
                bytes: p.totals.bytes,
                issued_by: Vec::new(),
            }),
    );

    let mut latency_us: Vec<u64> = Vec::new();
    for h in io_pattern::histograms(&io_pattern::latency_counts(&mine), false) {
        if latency_us.len() < h.counts.len() {
            latency_us.resize(h.counts.len(), 0);
        }
        for (slot, c) in h.counts.iter().enumerate() {
            latency_us[slot] += c;
        }
    }
    let mut lat: Vec<u64> = mine.iter().map(|io| io.latency_ns).collect();
    lat.sort_unstable();
    StorageDrill {
        tier: tier.to_string(),
        lost,
        requests: t.requests,
        bytes: t.bytes,
        reads: t.reads,
        read_bytes: t.read_bytes,
        writes: t.writes,
        write_bytes: t.write_bytes,
        submitters,
        types: counts(mine.iter().map(|io| io.rwbs.as_str())),
        sizes: pattern
            .common_sizes
            .iter()
            .map(|s| SizeCount {
                bytes: s.bytes,
                count: s.count,
            })
            .collect(),
        latency_us,
        p50_ms: percentile(&lat, 50.0) as f64 / 1e6,
        p99_ms: percentile(&lat, 99.0) as f64 / 1e6,
        sequential_share: pattern.sequential_share,
        sync_share: pattern.sync_share,
        repeated: pattern
            .repeated_ranges
            .iter()
            .map(|r| RepeatedRange {
                op: match r.op {
                    Op::Read => "read",
                    Op::Write => "write",
                    _ => "other",
                }
                .to_string(),
                disk: r.disk.clone(),
                sector: r.sector,
                bytes: r.bytes,
                times: r.times,
                pid: r.pid,
                comm: r.comm.clone(),
                text: r.describe(),
            })
            .collect(),
    }
}

/// Names by count, most first (then by name).
fn counts<'a>(names: impl Iterator<Item = &'a str>) -> Vec<TypeCount> {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for n in names {
        *by.entry(n).or_default() += 1;
    }
    let mut v: Vec<TypeCount> = by
        .into_iter()
        .map(|(name, count)| TypeCount {
            name: name.to_string(),
            count,
        })
        .collect();
    v.sort_by_key(|c| std::cmp::Reverse(c.count));
    v
}

/// Every process's CPU between two snapshots `secs` apart (top's rates):
/// the target's processes together, and the others with the most CPU.
/// Affinities are the caller's to fill in.
pub fn competition(
    prev: &[Process],
    cur: &[Process],
    secs: f64,
    hz: u64,
    target: &[i32],
    cpus: usize,
) -> Competition {
    let rows = top::rows(prev, cur, secs, hz, 0);
    let (mine, mut others): (Vec<_>, Vec<_>) =
        rows.into_iter().partition(|r| target.contains(&r.pid));
    others.sort_by(|a, b| b.cpu_percent.total_cmp(&a.cpu_percent));
    let total = |rows: &[top::TopRow]| rows.iter().map(|r| r.cpu_percent).sum::<f64>();
    Competition {
        cpus,
        target_cpus: String::new(),
        target_percent: total(&mine),
        total_percent: total(&mine) + total(&others),
        others: others
            .into_iter()
            .take(COMPETITORS)
            .filter(|r| r.cpu_percent > 0.0)
            .map(|r| Competitor {
                pid: r.pid,
                comm: r.comm,
                cpu_percent: r.cpu_percent,
                cpus: None,
            })
            .collect(),
    }
}

/// The execs seen and the failures among them, as exec-trace explains
/// them (`findings`, from `exec_failure::explain` on `events`); the same
/// failure repeated is one entry with its count.
pub fn execs(events: &[TraceEvent], findings: &[Finding], tier: &str, lost: u64) -> ExecDrill {
    let mut failures: Vec<ExecFailure> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for f in findings.iter().filter(|f| f.is_problem()) {
        match seen.get(&f.text) {
            Some(&i) => {
                failures[i].times += 1;
                failures[i].pid = f.pid;
            }
            None => {
                seen.insert(f.text.clone(), failures.len());
                failures.push(ExecFailure {
                    times: 1,
                    pid: f.pid,
                    filename: f.filename.clone(),
                    family: serde_json::to_value(f.family)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    errno: f.errno.map(str::to_string),
                    signal: f.signal.clone(),
                    cause: f.cause.clone(),
                    text: f.text.clone(),
                });
            }
        }
    }
    failures.sort_by_key(|f| std::cmp::Reverse(f.times));
    ExecDrill {
        tier: tier.to_string(),
        lost,
        execs: events
            .iter()
            .filter(|e| matches!(e, TraceEvent::Exec(_)))
            .count() as u64,
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::block::{DevId, Task};

    fn io(pid: u32, comm: &str, rwbs: &str, sector: u64, lat_us: u64) -> BlockIo {
        BlockIo {
            comm: comm.into(),
            pid,
            tid: pid,
            issuer: None,
            rwbs: rwbs.into(),
            dev: DevId::new(254, 0),
            disk: "vda".into(),
            sector,
            bytes: 4096,
            start_ns: sector,
            issue_ns: sector,
            end_ns: sector + lat_us * 1000,
            queue_ns: None,
            latency_ns: lat_us * 1000,
            error: 0,
        }
    }

    #[test]
    fn storage_keeps_the_target_and_the_kernel_writers_for_it() {
        let mut ios = Vec::new();
        for pass in 0..3 {
            for i in 0..4 {
                let mut w = io(7, "io-app", "WS", 800 + i * 8, 100);
                w.issue_ns += pass * 100;
                if i == 0 {
                    w.issuer = Some(Task {
                        pid: 44,
                        tid: 44,
                        comm: "kworker/1:1H".into(),
                    });
                }
                ios.push(w);
            }
        }
        ios.push(io(310, "jbd2/vda1-8", "WS", 9000, 300));
        ios.push(io(99, "cargo", "RA", 5000, 50));
        // Another thread of the target's: its issuers are its own.
        let mut other = io(7, "io-app-2", "WS", 700, 100);
        other.issuer = ios[0].issuer.clone();
        ios.push(other);
        let s = storage(&ios, &[7], "bpf", 0);
        assert_eq!(s.submitters[1].issued_by[0].count, 1);
        ios.pop();
        let s = storage(&ios, &[7], "bpf", 0);
        assert_eq!((s.requests, s.writes, s.reads), (12, 12, 0));
        assert_eq!(
            s.types,
            [TypeCount {
                name: "WS".into(),
                count: 12
            }]
        );
        assert_eq!(s.submitters.len(), 2, "{:?}", s.submitters);
        assert_eq!(s.submitters[0].issued_by[0].count, 3);
        assert_eq!(s.submitters[1].kernel.as_deref(), Some("journal"));
        assert_eq!(s.repeated[0].times, 3);
        assert_eq!(s.repeated[0].op, "write");
        assert_eq!(s.latency_us.iter().sum::<u64>(), 12);
        assert_eq!(s.latency_us[6], 12); // 100 µs: 64..127
        assert_eq!(s.sync_share, 1.0);
    }

    #[test]
    fn competition_splits_the_target_from_the_others() {
        let p = |pid, comm: &str, ticks| Process {
            pid,
            tid: pid,
            comm: comm.into(),
            utime: ticks,
            ..Default::default()
        };
        let prev = [p(1, "target", 0), p(2, "rival", 0), p(3, "idle", 0)];
        let cur = [p(1, "target", 33), p(2, "rival", 66), p(3, "idle", 0)];
        let c = competition(&prev, &cur, 1.0, 100, &[1], 2);
        assert_eq!(c.target_percent, 33.0);
        assert_eq!(c.total_percent, 99.0);
        assert_eq!(c.others.len(), 1);
        assert_eq!((c.others[0].pid, c.others[0].cpu_percent), (2, 66.0));
    }
}
