//! From an observation of one process to a verdict: which state dominates
//! (CPU, waiting for a CPU, storage, a lock, memory growth, or idle), the
//! numbers that show it, and the instrument to run next. The thresholds
//! follow docs/diagnose.md; they are starting points, not laws.

use std::collections::BTreeMap;

use crate::analysis::io_pattern::human_bytes;
use crate::model::diagnosis::{Class, Diagnosis, Observation};

/// Kernel functions a thread sleeps in while it waits for work (a signal,
/// an event, input). Such samples say nothing about the problem: a signal
/// thread asleep beside a busy one would halve every share.
const WAITING_FOR_WORK: &[&str] = &[
    "do_sigtimedwait",
    "ep_poll",
    "do_sys_poll",
    "do_select",
    "pipe_read",
    "inet_csk_accept",
    "unix_stream_read_generic",
];

/// The samples that count: state -> count, wait channel -> count, and how
/// many were left out as waiting for work.
struct Samples {
    states: BTreeMap<char, u64>,
    wchans: BTreeMap<String, u64>,
    for_work: u64,
}

impl Samples {
    fn of(o: &Observation) -> Samples {
        let mut s = Samples {
            states: BTreeMap::new(),
            wchans: BTreeMap::new(),
            for_work: 0,
        };
        for t in &o.samples {
            // "do_sigtimedwait.isra.0": compiler suffixes after a dot.
            let name = t.wchan.split('.').next().unwrap_or("");
            if WAITING_FOR_WORK.contains(&name) {
                s.for_work += t.count;
                continue;
            }
            *s.states.entry(t.state).or_default() += t.count;
            if !t.wchan.is_empty() {
                *s.wchans.entry(name.to_string()).or_default() += t.count;
            }
        }
        s
    }

    fn share(&self, letter: char) -> f64 {
        let all: u64 = self.states.values().sum();
        if all == 0 {
            return 0.0;
        }
        self.states.get(&letter).copied().unwrap_or(0) as f64 / all as f64
    }
}

/// RSS must grow at least this much, and this fast, to count as a trend.
const GROWTH_MIN_KIB: u64 = 4 * 1024;
const GROWTH_RATE_KIB_S: f64 = 512.0;

pub fn classify(o: &Observation) -> Diagnosis {
    let w = o.window_s.max(1e-3);
    let cpu = (o.user_s + o.system_s) / w;
    let run_delay = o.run_delay_s.unwrap_or(0.0);
    let run_wait = run_delay / w;
    let samples = Samples::of(o);
    let d = samples.share('D');
    let io_rate = (o.read_bytes.unwrap_or(0) + o.write_bytes.unwrap_or(0)) as f64 / w;
    let (growth, slope) = rss_trend(&o.rss_kib);
    let futex = futex_share(&samples);

    let mut evidence = vec![
        format!(
            "CPU: {cpu:.2} CPUs (user {:.2} s, system {:.2} s in {w:.1} s), {} thread{}",
            o.user_s,
            o.system_s,
            o.threads,
            if o.threads == 1 { "" } else { "s" }
        ),
        format!("Thread states: {}", shares(&samples.states, usize::MAX)),
        match o.run_delay_s {
            Some(d) => format!(
                "Waiting for a CPU: {:.0}% of the time (run queue {d:.2} s)",
                run_wait * 100.0
            ),
            None => "Waiting for a CPU: unknown (this kernel keeps no schedstats)".to_string(),
        },
    ];
    if let (Some(r), Some(wr)) = (o.read_bytes, o.write_bytes) {
        evidence.push(format!(
            "Storage: read {}/s, written {}/s",
            human_bytes((r as f64 / w) as u64),
            human_bytes((wr as f64 / w) as u64)
        ));
    }
    if !samples.wchans.is_empty() {
        evidence.push(format!("Sleeping in: {}", shares(&samples.wchans, 3)));
    }
    if samples.for_work > 0 {
        let all = samples.for_work + samples.states.values().sum::<u64>();
        evidence.push(format!(
            "Left out: {:.0}% of thread samples waiting for work (signals, events, input)",
            samples.for_work as f64 * 100.0 / all as f64
        ));
    }
    if let (Some(first), Some(last)) = (o.rss_kib.first(), o.rss_kib.last()) {
        evidence.push(format!(
            "RSS: {} -> {} ({:+.1} MiB/s)",
            human_bytes(first.1 * 1024),
            human_bytes(last.1 * 1024),
            slope / 1024.0
        ));
    }

    let pid = o.pid;
    let (verdict, summary, next) = if growth >= GROWTH_MIN_KIB as i64 && slope >= GROWTH_RATE_KIB_S
    {
        (
            Class::MemoryTrend,
            format!(
                "resident memory grows steadily, {:.1} MiB/s: a leak or an unbounded cache",
                slope / 1024.0
            ),
            vec![
                format!("kdiag top -p {pid}"),
                format!("sudo kdiag profile -p {pid} -d 10"),
            ],
        )
    } else if d >= 0.3 || (io_rate >= 1024.0 * 1024.0 && d >= 0.1) {
        (
            Class::Io,
            format!(
                "waiting for storage: threads in D state {:.0}% of the time",
                d * 100.0
            ),
            vec![format!("sudo kdiag iosnoop -p {pid} --summary 5")],
        )
    } else if cpu >= 0.5 && run_delay / (run_delay + o.user_s + o.system_s) >= 0.25 {
        (
            Class::Sched,
            format!(
                "runnable but waiting for a CPU {:.0}% of the time: the CPUs are oversubscribed",
                run_wait * 100.0
            ),
            vec!["kdiag top".into(), "sudo kdiag profile -a -d 10".into()],
        )
    } else if cpu >= 0.5 {
        let kernel = o.system_s > o.user_s;
        (
            Class::Cpu,
            format!(
                "CPU-bound: {cpu:.2} CPUs, mostly in {}",
                if kernel { "the kernel" } else { "user space" }
            ),
            vec![format!("sudo kdiag profile -p {pid} -d 10 --svg cpu.svg")],
        )
    } else if o.threads >= 2 && futex >= 0.5 {
        (
            Class::Lock,
            format!(
                "threads wait on each other: {:.0}% of sleeping samples are futex waits, CPU {cpu:.2}",
                futex * 100.0
            ),
            vec![
                format!("kdiag top -p {pid}"),
                format!("sudo kdiag profile -p {pid} -d 10"),
            ],
        )
    } else {
        (
            Class::Idle,
            format!("mostly idle: {cpu:.2} CPUs, no storage waits, memory steady"),
            vec![],
        )
    };
    Diagnosis {
        verdict,
        summary,
        evidence,
        next,
    }
}

/// (growth in KiB from first to last, least-squares slope in KiB/s).
fn rss_trend(series: &[(f64, u64)]) -> (i64, f64) {
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return (0, 0.0);
    };
    let n = series.len() as f64;
    let mt = series.iter().map(|p| p.0).sum::<f64>() / n;
    let mv = series.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let cov: f64 = series.iter().map(|p| (p.0 - mt) * (p.1 as f64 - mv)).sum();
    let var: f64 = series.iter().map(|p| (p.0 - mt).powi(2)).sum();
    let slope = if var > 0.0 { cov / var } else { 0.0 };
    (last.1 as i64 - first.1 as i64, slope)
}

/// Share of wait-channel samples in futex waits.
fn futex_share(s: &Samples) -> f64 {
    let all: u64 = s.wchans.values().sum();
    if all == 0 {
        return 0.0;
    }
    let futex: u64 = s
        .wchans
        .iter()
        .filter(|(w, _)| w.contains("futex"))
        .map(|(_, n)| n)
        .sum();
    futex as f64 / all as f64
}

/// "R 97%, S 3%": the `most` most frequent keys with their shares; empty
/// when there is nothing.
fn shares<K: std::fmt::Display + Ord>(counts: &BTreeMap<K, u64>, most: usize) -> String {
    let all = counts.values().sum::<u64>().max(1) as f64;
    let mut v: Vec<(&K, &u64)> = counts.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .take(most)
        .map(|(k, n)| format!("{k} {:.0}%", **n as f64 * 100.0 / all))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs() -> Observation {
        Observation {
            pid: 42,
            comm: "x".into(),
            window_s: 2.0,
            threads: 1,
            read_bytes: Some(0),
            write_bytes: Some(0),
            ..Default::default()
        }
    }

    /// `o` with samples: (state, wait channel, count).
    fn with(mut o: Observation, samples: &[(char, &str, u64)]) -> Observation {
        for &(state, wchan, n) in samples {
            for _ in 0..n {
                o.sample(state, wchan);
            }
        }
        o
    }

    #[test]
    fn cpu_bound_and_scheduler_bound() {
        // A signal thread asleep beside the busy one does not count.
        let mut o = with(
            obs(),
            &[('R', "", 200), ('S', "do_sigtimedwait.isra.0", 200)],
        );
        o.user_s = 1.9;
        let d = classify(&o);
        assert_eq!(d.verdict, Class::Cpu);
        assert!(d.summary.contains("user space"), "{}", d.summary);
        assert!(d.next[0].contains("profile -p 42"));
        assert!(
            d.evidence
                .iter()
                .any(|e| e.contains("Thread states: R 100%")),
            "{:?}",
            d.evidence
        );
        o.run_delay_s = Some(1.5);
        assert_eq!(classify(&o).verdict, Class::Sched);
        o.run_delay_s = None;
        let d = classify(&o);
        assert_eq!(
            d.verdict,
            Class::Cpu,
            "no schedstats: no claim about the queue"
        );
        assert!(
            d.evidence
                .iter()
                .any(|e| e.contains("unknown (this kernel keeps no schedstats)"))
        );
    }

    #[test]
    fn storage_waits() {
        // Storage waits win over the CPU an O_SYNC writer also burns.
        let mut o = with(obs(), &[('D', "folio_wait_bit", 80), ('R', "", 120)]);
        o.write_bytes = Some(40 << 20);
        o.system_s = 1.2;
        let d = classify(&o);
        assert_eq!(d.verdict, Class::Io);
        assert!(
            d.evidence.iter().any(|e| e.contains("written 20 MiB/s")),
            "{:?}",
            d.evidence
        );
    }

    #[test]
    fn futex_waits_with_several_threads_are_a_lock() {
        let mut o = with(
            obs(),
            &[('S', "futex_do_wait", 300), ('S', "hrtimer_nanosleep", 100)],
        );
        o.threads = 4;
        let d = classify(&o);
        assert_eq!(d.verdict, Class::Lock);
        assert!(
            d.evidence.iter().any(|e| e.contains("futex_do_wait 75%")),
            "{:?}",
            d.evidence
        );
        o.threads = 1;
        assert_eq!(
            classify(&o).verdict,
            Class::Idle,
            "one thread cannot contend"
        );
    }

    #[test]
    fn steady_rss_growth_is_a_trend_and_noise_is_not() {
        let mut o = with(obs(), &[('S', "hrtimer_nanosleep", 200)]);
        o.rss_kib = (0..9)
            .map(|i| (i as f64 * 0.25, 10_000 + i * 800))
            .collect();
        assert_eq!(classify(&o).verdict, Class::MemoryTrend);
        o.rss_kib = (0..9)
            .map(|i| (i as f64 * 0.25, 10_000 + (i % 2) * 800))
            .collect();
        assert_eq!(classify(&o).verdict, Class::Idle);
    }
}
