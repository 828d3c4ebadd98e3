//! A kernel thread as the target: what it is (`analysis::kthread`) and,
//! when its kind says whose activity drives it, those processes: the
//! storage writers of the window for writeback and journal threads, the
//! processes whose anonymous memory grew for reclaim. Read from every
//! process's /proc files at both ends (others' need root). A workqueue
//! worker's kind is known only from the names it had during the window
//! (the pool hands it any work), so both figures are taken at the start.

use std::collections::HashMap;

use crate::analysis::kthread::{self, DrivenBy};
use crate::model::diagnosis::{Driver, KernelThread};
use crate::sys::procfs::task::TaskReader;

pub struct Drivers {
    writers: HashMap<i32, u64>,
    memory: HashMap<i32, u64>,
}

impl Drivers {
    pub fn start(r: &mut TaskReader) -> Drivers {
        Drivers {
            writers: figures(r, DrivenBy::Writers),
            memory: figures(r, DrivenBy::MemoryGrowth),
        }
    }

    /// What the thread is, by the name it had most often while working
    /// (a '+' in a worker's name: it runs that work now), else most often
    /// at all; and its three busiest drivers over the window.
    pub fn finish(self, r: &mut TaskReader, names: &HashMap<String, u32>) -> KernelThread {
        let most = |busy: bool| {
            names
                .iter()
                .filter(|(n, _)| !busy || n.contains('+'))
                .max_by_key(|(n, c)| (**c, std::cmp::Reverse((*n).clone())))
                .map(|(n, _)| n.clone())
        };
        let name = most(true).or_else(|| most(false)).unwrap_or_default();
        let (kind, what, by) = kthread::describe(&name);
        let start = match by {
            DrivenBy::Writers => self.writers,
            DrivenBy::MemoryGrowth => self.memory,
            DrivenBy::Unknown => HashMap::new(),
        };
        let end = figures(r, by);
        let mut drivers: Vec<Driver> = end
            .iter()
            .filter_map(|(&pid, &b)| {
                let d = b.saturating_sub(start.get(&pid).copied().unwrap_or(0));
                (d > 0).then(|| Driver {
                    pid,
                    comm: r.comm(pid).unwrap_or_default(),
                    bytes: d,
                })
            })
            .collect();
        drivers.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.pid.cmp(&b.pid)));
        drivers.truncate(3);
        KernelThread {
            kind,
            what,
            drivers,
        }
    }
}

/// Per process: bytes written to storage, or anonymous memory in bytes.
fn figures(r: &mut TaskReader, by: DrivenBy) -> HashMap<i32, u64> {
    if by == DrivenBy::Unknown {
        return HashMap::new();
    }
    let me = std::process::id() as i32;
    let pids = r.pids().unwrap_or_default();
    pids.into_iter()
        .filter(|&p| p != me)
        .filter_map(|pid| {
            let v = match by {
                DrivenBy::Writers => r.io(pid)?.write_bytes,
                _ => r.status(pid, None)?.rss_anon_kib? * 1024,
            };
            Some((pid, v))
        })
        .collect()
}
