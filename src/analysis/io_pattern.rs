//! What a set of block requests says about the I/O: sequential or random,
//! request sizes, ranges rewritten again and again, sync and FUA shares,
//! per-process totals and log2 latency histograms. Pure; `diagnose` and the
//! labs reuse these results.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::block::{BlockIo, DevId, LatencyCount, Op, Rwbs};

/// Requests and bytes, in all and by direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub requests: u64,
    pub bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl Totals {
    pub fn of<'a>(ios: impl IntoIterator<Item = &'a BlockIo>) -> Totals {
        let mut t = Totals::default();
        for io in ios {
            t.requests += 1;
            t.bytes += io.bytes;
            if io.is_read() {
                t.reads += 1;
                t.read_bytes += io.bytes;
            } else if io.is_write() {
                t.writes += 1;
                t.write_bytes += io.bytes;
            }
        }
        t
    }
}

/// The shape of the I/O in a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoPattern {
    #[serde(flatten)]
    pub totals: Totals,
    /// Requests starting where the previous request of the same process,
    /// device and direction ended; the first of each such stream is neither.
    pub sequential: u64,
    pub random: u64,
    /// sequential / (sequential + random), 0 when there is nothing to judge.
    pub sequential_share: f64,
    /// The most common request sizes, most frequent first (at most 5).
    pub common_sizes: Vec<SizeCount>,
    /// Request sizes in log2 buckets of bytes.
    pub size_histogram: Vec<SizeBucket>,
    /// Ranges covered by the same run of requests more than once.
    pub repeated_ranges: Vec<RepeatedRange>,
    /// Shares of requests (0..1) with these rwbs flags.
    pub sync_share: f64,
    pub fua_share: f64,
    pub preflush_share: f64,
    pub meta_share: f64,
    pub readahead_share: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeCount {
    pub bytes: u64,
    pub count: u64,
}

/// Requests of `min_bytes..=max_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeBucket {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub count: u64,
}

/// A range of a device that one process read or wrote several times over,
/// each time as the same run of back-to-back requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepeatedRange {
    pub dev: DevId,
    pub disk: String,
    pub op: Op,
    pub sector: u64,
    pub bytes: u64,
    pub times: u64,
    pub pid: u32,
    pub comm: String,
}

impl RepeatedRange {
    /// "the same 10 MiB range starting at sector 4800512 was written 37 times"
    pub fn describe(&self) -> String {
        let verb = match self.op {
            Op::Read => "read",
            Op::Write => "written",
            _ => "accessed",
        };
        format!(
            "the same {} range starting at sector {} of {} was {verb} {} times by {} ({})",
            human_bytes(self.bytes),
            self.sector,
            if self.disk.is_empty() {
                self.dev.to_string()
            } else {
                self.disk.clone()
            },
            self.times,
            self.comm,
            self.pid
        )
    }
}

/// Bytes as B, KiB, MiB or GiB, without decimals when exact.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Requests of one process to one device in one direction, in issue order.
fn streams(ios: &[BlockIo]) -> BTreeMap<(DevId, u32, bool), Vec<&BlockIo>> {
    let mut s: BTreeMap<_, Vec<&BlockIo>> = BTreeMap::new();
    for io in ios.iter().filter(|io| io.bytes > 0) {
        let op = Rwbs::parse(&io.rwbs).op;
        if matches!(op, Op::Read | Op::Write) {
            s.entry((io.dev, io.pid, op == Op::Write))
                .or_default()
                .push(io);
        }
    }
    for v in s.values_mut() {
        v.sort_by_key(|io| io.issue_ns);
    }
    s
}

pub fn pattern(ios: &[BlockIo]) -> IoPattern {
    let n = ios.len() as u64;
    let share = |f: &dyn Fn(&Rwbs) -> bool| {
        let hits = ios.iter().filter(|io| f(&Rwbs::parse(&io.rwbs))).count();
        if n == 0 { 0.0 } else { hits as f64 / n as f64 }
    };
    let (mut sequential, mut random) = (0, 0);
    // (dev, op, start sector, bytes) -> (times, first pid, its comm, disk)
    type RunKey = (DevId, Op, u64, u64);
    let mut runs: HashMap<RunKey, (u64, u32, String, String)> = HashMap::new();
    for ((_, _, write), stream) in streams(ios) {
        let op = if write { Op::Write } else { Op::Read };
        let mut run: Option<(u64, u64)> = None; // (start, end) sectors
        let mut close = |run: Option<(u64, u64)>, io: &BlockIo| {
            if let Some((start, end)) = run {
                let e = runs
                    .entry((io.dev, op, start, (end - start) * 512))
                    .or_insert((0, io.pid, io.comm.clone(), io.disk.clone()));
                e.0 += 1;
            }
        };
        for (i, io) in stream.iter().enumerate() {
            match run {
                Some((start, end)) if io.sector == end => {
                    sequential += 1;
                    run = Some((start, io.end_sector()));
                }
                _ => {
                    if i > 0 {
                        random += 1;
                    }
                    close(run, io);
                    run = Some((io.sector, io.end_sector()));
                }
            }
        }
        if let Some(last) = stream.last() {
            close(run, last);
        }
    }
    let mut repeated_ranges: Vec<RepeatedRange> = runs
        .into_iter()
        .filter(|(_, (times, ..))| *times > 1)
        .map(
            |((dev, op, sector, bytes), (times, pid, comm, disk))| RepeatedRange {
                dev,
                disk,
                op,
                sector,
                bytes,
                times,
                pid,
                comm,
            },
        )
        .collect();
    repeated_ranges.sort_by_key(|r| (std::cmp::Reverse(r.bytes * r.times), r.sector));
    repeated_ranges.truncate(10);

    let mut sizes: HashMap<u64, u64> = HashMap::new();
    let mut buckets: BTreeMap<u32, u64> = BTreeMap::new();
    for io in ios {
        *sizes.entry(io.bytes).or_default() += 1;
        *buckets.entry(log2_slot(io.bytes)).or_default() += 1;
    }
    let mut common_sizes: Vec<SizeCount> = sizes
        .into_iter()
        .map(|(bytes, count)| SizeCount { bytes, count })
        .collect();
    common_sizes.sort_by_key(|s| (std::cmp::Reverse(s.count), s.bytes));
    common_sizes.truncate(5);
    let size_histogram = buckets
        .into_iter()
        .map(|(slot, count)| {
            let (min_bytes, max_bytes) = slot_range(slot);
            SizeBucket {
                min_bytes,
                max_bytes,
                count,
            }
        })
        .collect();

    IoPattern {
        totals: Totals::of(ios),
        sequential,
        random,
        sequential_share: if sequential + random == 0 {
            0.0
        } else {
            sequential as f64 / (sequential + random) as f64
        },
        common_sizes,
        size_histogram,
        repeated_ranges,
        sync_share: share(&|r| r.sync),
        fua_share: share(&|r| r.fua),
        preflush_share: share(&|r| r.preflush),
        meta_share: share(&|r| r.meta),
        readahead_share: share(&|r| r.readahead),
    }
}

/// Totals for one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessIo {
    pub pid: u32,
    pub comm: String,
    #[serde(flatten)]
    pub totals: Totals,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Per-process totals, the most bytes first.
pub fn per_process(ios: &[BlockIo]) -> Vec<ProcessIo> {
    let mut by: HashMap<(u32, &str), Vec<&BlockIo>> = HashMap::new();
    for io in ios {
        by.entry((io.pid, io.comm.as_str())).or_default().push(io);
    }
    let mut out: Vec<ProcessIo> = by
        .into_iter()
        .map(|((pid, comm), v)| {
            let mut lat: Vec<u64> = v.iter().map(|io| io.latency_ns).collect();
            lat.sort_unstable();
            let ms = |ns: u64| ns as f64 / 1e6;
            ProcessIo {
                pid,
                comm: comm.to_string(),
                totals: Totals::of(v.iter().copied()),
                avg_ms: ms(lat.iter().sum::<u64>() / lat.len() as u64),
                p50_ms: ms(percentile(&lat, 50.0)),
                p99_ms: ms(percentile(&lat, 99.0)),
            }
        })
        .collect();
    out.sort_by_key(|p| {
        (
            std::cmp::Reverse(p.totals.bytes),
            std::cmp::Reverse(p.totals.requests),
            p.pid,
        )
    });
    out
}

/// Nearest-rank percentile of sorted values (0 for none).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// floor(log2(v)), with 0 and 1 both in slot 0 (the BPF program's rule).
pub fn log2_slot(v: u64) -> u32 {
    if v <= 1 { 0 } else { 63 - v.leading_zeros() }
}

/// The values a slot holds: 0..=1, then 2^k..=2^(k+1)-1.
pub fn slot_range(slot: u32) -> (u64, u64) {
    if slot == 0 {
        (0, 1)
    } else {
        (1 << slot, (1u64 << (slot + 1)) - 1)
    }
}

/// A log2 latency histogram in microseconds, like biolatency's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Log2Hist {
    pub dev: DevId,
    pub disk: String,
    /// The request type, when histograms are split by type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rwbs: Option<String>,
    /// counts[k]: requests with latency in slot_range(k) microseconds.
    pub counts: Vec<u64>,
}

impl Log2Hist {
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Histogram buckets computed in user space from completed requests (the
/// perf tier's path to the same data the BPF program aggregates).
pub fn latency_counts(ios: &[BlockIo]) -> Vec<LatencyCount> {
    // (dev, rwbs, pid, comm, slot) -> (disk, count)
    type Key = (DevId, String, u32, String, u32);
    let mut m: BTreeMap<Key, (String, u64)> = BTreeMap::new();
    for io in ios {
        let key = (
            io.dev,
            io.rwbs.clone(),
            io.pid,
            io.comm.clone(),
            log2_slot(io.latency_ns / 1000),
        );
        m.entry(key).or_insert((io.disk.clone(), 0)).1 += 1;
    }
    m.into_iter()
        .map(
            |((dev, rwbs, pid, comm, slot), (disk, count))| LatencyCount {
                dev,
                disk,
                rwbs,
                pid,
                comm,
                slot,
                count,
            },
        )
        .collect()
}

/// One histogram per device, or per device and type with `by_type`.
pub fn histograms(counts: &[LatencyCount], by_type: bool) -> Vec<Log2Hist> {
    let mut m: BTreeMap<(DevId, Option<String>), Log2Hist> = BTreeMap::new();
    for c in counts {
        let rwbs = by_type.then(|| c.rwbs.clone());
        let h = m.entry((c.dev, rwbs.clone())).or_insert_with(|| Log2Hist {
            dev: c.dev,
            disk: c.disk.clone(),
            rwbs,
            counts: Vec::new(),
        });
        let slot = c.slot as usize;
        if h.counts.len() <= slot {
            h.counts.resize(slot + 1, 0);
        }
        h.counts[slot] += c.count;
    }
    m.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(
        pid: u32,
        comm: &str,
        rwbs: &str,
        sector: u64,
        bytes: u64,
        t: u64,
        lat_us: u64,
    ) -> BlockIo {
        BlockIo {
            comm: comm.into(),
            pid,
            tid: pid,
            issuer: None,
            rwbs: rwbs.into(),
            dev: DevId::new(254, 0),
            disk: "vda".into(),
            sector,
            bytes,
            start_ns: t,
            issue_ns: t,
            end_ns: t + lat_us * 1000,
            queue_ns: None,
            latency_ns: lat_us * 1000,
            error: 0,
        }
    }

    /// io-app of lab 0: 10 MiB O_SYNC writes of the same region, issued as
    /// 1.25 MiB requests, 37 times over; jbd2 writes its journal in between.
    fn io_app() -> Vec<BlockIo> {
        let mut v = Vec::new();
        let mut t = 0;
        for pass in 0..37 {
            let mut sector = 4800512;
            for _ in 0..8 {
                v.push(io(889, "io-app", "WS", sector, 1310720, t, 2000));
                sector += 1310720 / 512;
                t += 10;
            }
            v.push(io(
                310,
                "jbd2/vda-8",
                "WS",
                9000000 + pass * 8,
                4096,
                t,
                500,
            ));
            v.push(io(
                310,
                "jbd2/vda-8",
                "FWFS",
                9000000 + pass * 8 + 8,
                4096,
                t + 1,
                500,
            ));
            t += 10;
        }
        v
    }

    #[test]
    fn finds_the_repeated_10_mib_range() {
        let p = pattern(&io_app());
        let r = &p.repeated_ranges[0];
        assert_eq!(
            (r.sector, r.bytes, r.times, r.pid),
            (4800512, 10 << 20, 37, 889)
        );
        assert_eq!(
            r.describe(),
            "the same 10 MiB range starting at sector 4800512 of vda was written 37 times by io-app (889)"
        );
        // jbd2's journal moves on each time: it repeats nothing.
        assert_eq!(p.repeated_ranges.len(), 1);
    }

    #[test]
    fn shares_and_sizes() {
        let p = pattern(&io_app());
        assert_eq!(p.totals.requests, 37 * 10);
        assert_eq!(p.totals.writes, 37 * 10);
        assert_eq!(p.totals.reads, 0);
        assert_eq!(p.sync_share, 1.0);
        assert!((p.fua_share - 37.0 / 370.0).abs() < 1e-9);
        assert!((p.preflush_share - 37.0 / 370.0).abs() < 1e-9);
        assert_eq!(
            p.common_sizes[0],
            SizeCount {
                bytes: 1310720,
                count: 8 * 37
            }
        );
        // 1310720 is in the 1 MiB .. 2 MiB - 1 bucket.
        assert!(p.size_histogram.contains(&SizeBucket {
            min_bytes: 1 << 20,
            max_bytes: (2 << 20) - 1,
            count: 8 * 37
        }));
        // io-app: 7 of 8 requests per pass continue the previous one, the
        // first jumps back; jbd2 (WS and FWFS back to back) is sequential too.
        assert!(p.sequential_share > 0.8, "{}", p.sequential_share);
    }

    #[test]
    fn random_reads_are_random() {
        let ios: Vec<BlockIo> = (0..100u64)
            .map(|i| io(7, "fio", "R", (i * 7919 % 1000) * 8 * 97, 4096, i, 100))
            .collect();
        let p = pattern(&ios);
        assert_eq!((p.sequential, p.random), (0, 99));
        assert_eq!(p.sequential_share, 0.0);
        assert!(p.repeated_ranges.is_empty());
    }

    #[test]
    fn per_process_totals_and_percentiles() {
        let mut ios: Vec<BlockIo> = (1..=100)
            .map(|i| io(7, "fio", "R", i * 8, 4096, i, i))
            .collect();
        ios.push(io(8, "dd", "W", 0, 1 << 20, 0, 5000));
        let s = per_process(&ios);
        assert_eq!(s[0].comm, "dd");
        assert_eq!((s[0].totals.writes, s[0].totals.write_bytes), (1, 1 << 20));
        let fio = &s[1];
        assert_eq!(
            (fio.totals.requests, fio.totals.reads, fio.totals.bytes),
            (100, 100, 409600)
        );
        assert_eq!(fio.p50_ms, 0.05);
        assert_eq!(fio.p99_ms, 0.099);
        assert!((fio.avg_ms - 0.0505).abs() < 1e-3);
    }

    #[test]
    fn log2_histograms() {
        assert_eq!(
            (
                log2_slot(0),
                log2_slot(1),
                log2_slot(2),
                log2_slot(3),
                log2_slot(1024)
            ),
            (0, 0, 1, 1, 10)
        );
        assert_eq!(slot_range(3), (8, 15));
        let ios = vec![
            io(1, "a", "R", 0, 4096, 0, 100),
            io(1, "a", "R", 8, 4096, 0, 120),
            io(1, "a", "W", 16, 4096, 0, 3000),
        ];
        let counts = latency_counts(&ios);
        let all = histograms(&counts, false);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].total(), 3);
        assert_eq!(all[0].counts[6], 2); // 100, 120 µs: 64..127
        assert_eq!(all[0].counts[11], 1); // 3000 µs: 2048..4095
        let by_type = histograms(&counts, true);
        assert_eq!(by_type.len(), 2);
        assert_eq!(by_type[0].rwbs.as_deref(), Some("R"));
    }
}
