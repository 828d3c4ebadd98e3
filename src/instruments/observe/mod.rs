//! Watch one process for a window, for `kdiag diagnose`: every thread's
//! state (and, when asleep, its wait channel) sampled every 10 ms, RSS every
//! 250 ms, and CPU time, run-queue delay, storage bytes and context
//! switches read at both ends. Amounts come from the counters; sampling
//! only says where the threads wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::model::diagnosis::Observation;
use crate::model::process::Process;
use crate::sys::procfs::{Reader, hz, parse, tids};

const SAMPLE: Duration = Duration::from_millis(10);
const RSS_EVERY: Duration = Duration::from_millis(250);

/// Counters of the whole process at one moment.
#[derive(Clone)]
struct Counters {
    utime: u64,
    stime: u64,
    /// None when the kernel keeps no schedstats (every thread reads "0 0 0").
    run_delay_ns: Option<u64>,
    io: Option<(u64, u64)>,
    vcsw: u64,
    ivcsw: u64,
    rss_kib: u64,
}

impl Counters {
    /// From a snapshot of the process (read with `top_extras`), plus every
    /// thread's schedstat.
    fn of(p: &Process) -> Counters {
        let stats: Vec<(u64, u64, u64)> = tids(p.pid)
            .iter()
            .filter_map(|tid| std::fs::read(format!("/proc/{}/task/{tid}/schedstat", p.pid)).ok())
            .filter_map(|b| parse::schedstat(&b))
            .collect();
        let run_delay_ns = stats
            .iter()
            .any(|s| *s != (0, 0, 0))
            .then(|| stats.iter().map(|s| s.1).sum());
        Counters {
            utime: p.utime,
            stime: p.stime,
            run_delay_ns,
            io: p.io.map(|io| (io.read_bytes, io.write_bytes)),
            vcsw: p.voluntary_ctxt,
            ivcsw: p.nonvoluntary_ctxt,
            rss_kib: p.rss_kib,
        }
    }
}

/// Watch `pid` for `window` (less if it exits or `stop` is set). An error
/// when the process does not exist at the start.
pub fn observe(pid: i32, window: Duration, stop: &AtomicBool) -> anyhow::Result<Observation> {
    let mut reader = Reader::new();
    reader.top_extras = true;
    let first = reader
        .process(pid)
        .ok_or_else(|| crate::error::NoSuchProcess::one(pid))?;
    let start = Counters::of(&first);
    let mut o = Observation {
        pid,
        comm: first.comm,
        ..Default::default()
    };
    let t0 = Instant::now();
    let mut next_rss = t0;
    // The latest counters, so a process that exits mid-window still counts.
    let mut last = None;
    while t0.elapsed() < window && !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let tids = tids(pid);
        o.threads = o.threads.max(tids.len());
        // Gone, or a zombie waiting for its parent (our own -- CMD child):
        // its main thread says so.
        let mut alive = false;
        for tid in tids {
            let dir = format!("/proc/{pid}/task/{tid}");
            let Some(st) = std::fs::read(format!("{dir}/stat"))
                .ok()
                .and_then(|b| parse::stat(&b))
            else {
                continue;
            };
            if tid == pid {
                alive = !matches!(st.state, 'Z' | 'X');
                if !alive {
                    break;
                }
            }
            let wchan = match st.state {
                'S' | 'D' => std::fs::read_to_string(format!("{dir}/wchan")).unwrap_or_default(),
                _ => String::new(),
            };
            o.sample(st.state, if wchan == "0" { "" } else { &wchan });
        }
        if !alive {
            break;
        }
        if now >= next_rss {
            let Some(c) = reader.process(pid).map(|p| Counters::of(&p)) else {
                break; // gone
            };
            o.rss_kib.push((t0.elapsed().as_secs_f64(), c.rss_kib));
            last = Some(c);
            next_rss += RSS_EVERY;
        }
        std::thread::sleep(SAMPLE.saturating_sub(now.elapsed()));
    }
    let end = reader
        .process(pid)
        .map(|p| Counters::of(&p))
        .or(last)
        .unwrap_or_else(|| start.clone());
    o.window_s = t0.elapsed().as_secs_f64();
    let hz = hz() as f64;
    o.user_s = end.utime.saturating_sub(start.utime) as f64 / hz;
    o.system_s = end.stime.saturating_sub(start.stime) as f64 / hz;
    o.run_delay_s = end
        .run_delay_ns
        .zip(start.run_delay_ns)
        .map(|(e, s)| e.saturating_sub(s) as f64 / 1e9);
    if let (Some(a), Some(b)) = (start.io, end.io) {
        o.read_bytes = Some(b.0.saturating_sub(a.0));
        o.write_bytes = Some(b.1.saturating_sub(a.1));
    }
    o.voluntary_switches = end.vcsw.saturating_sub(start.vcsw);
    o.involuntary_switches = end.ivcsw.saturating_sub(start.ivcsw);
    Ok(o)
}
