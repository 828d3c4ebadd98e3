//! What a kernel thread is, from its name, and whose activity gives it
//! work: a flush worker writes back pages other processes dirtied, jbd2
//! commits the journal for them, kswapd frees memory others want.

/// Whose activity drives a kind of kernel thread, when that can be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrivenBy {
    /// Processes writing to storage (write_bytes counts pages as they are
    /// dirtied, charged to the process that dirtied them).
    Writers,
    /// Processes whose anonymous memory grows.
    MemoryGrowth,
    Unknown,
}

/// (kind, what it does, who drives it) for the kernel thread named `comm`.
pub fn describe(comm: &str) -> (String, String, DrivenBy) {
    let after = |p: &str| comm.strip_prefix(p).unwrap_or("").to_string();
    let (kind, what, by) = if comm.starts_with("kworker/") && comm.contains("flush-") {
        let dev = comm.rsplit("flush-").next().unwrap_or("");
        (
            "writeback",
            format!("writes dirty page-cache pages of block device {dev} back to storage"),
            DrivenBy::Writers,
        )
    } else if let Some(rest) = comm.strip_prefix("kworker/") {
        match rest.split_once(['+', '-']) {
            Some((_, wq)) if !wq.is_empty() => (
                "workqueue",
                format!("a workqueue worker, last running work of the `{wq}` workqueue"),
                DrivenBy::Unknown,
            ),
            _ => (
                "workqueue",
                "a workqueue worker: runs deferred kernel work".to_string(),
                DrivenBy::Unknown,
            ),
        }
    } else if comm.starts_with("jbd2/") {
        (
            "journal",
            format!("commits the ext4 journal of {}", after("jbd2/")),
            DrivenBy::Writers,
        )
    } else if comm.starts_with("kswapd") {
        (
            "reclaim",
            "frees memory (page cache, swap-out) when free memory runs low".to_string(),
            DrivenBy::MemoryGrowth,
        )
    } else if comm.starts_with("kcompactd") {
        (
            "compaction",
            "moves pages to make contiguous free memory".to_string(),
            DrivenBy::MemoryGrowth,
        )
    } else if comm == "khugepaged" {
        (
            "huge-pages",
            "collapses small pages into transparent huge pages".to_string(),
            DrivenBy::Unknown,
        )
    } else if comm.starts_with("ksoftirqd/") {
        (
            "softirq",
            format!(
                "runs deferred interrupt work (network, block completions, timers) on CPU {}",
                after("ksoftirqd/")
            ),
            DrivenBy::Unknown,
        )
    } else if let Some(rest) = comm.strip_prefix("irq/") {
        (
            "interrupt",
            format!("handles interrupt {rest} (threaded handler)"),
            DrivenBy::Unknown,
        )
    } else if comm.starts_with("migration/") {
        (
            "migration",
            "moves tasks between CPUs for the scheduler".to_string(),
            DrivenBy::Unknown,
        )
    } else if comm == "kthreadd" {
        (
            "kthreadd",
            "creates every other kernel thread".to_string(),
            DrivenBy::Unknown,
        )
    } else if comm.starts_with("rcu") {
        (
            "rcu",
            "runs read-copy-update grace periods and callbacks".to_string(),
            DrivenBy::Unknown,
        )
    } else {
        ("kernel", "a kernel thread".to_string(), DrivenBy::Unknown)
    };
    (kind.to_string(), what, by)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_kernel_threads() {
        let (kind, what, by) = describe("kworker/u8:2+flush-254:0");
        assert_eq!((kind.as_str(), by), ("writeback", DrivenBy::Writers));
        assert!(what.contains("254:0"), "{what}");
        assert_eq!(describe("jbd2/vda-8").0, "journal");
        assert_eq!(describe("kswapd0").2, DrivenBy::MemoryGrowth);
        assert!(describe("ksoftirqd/1").1.contains("CPU 1"));
        assert!(describe("kworker/0:1+events").1.contains("`events`"));
        assert_eq!(describe("kworker/1:2").0, "workqueue");
        assert_eq!(describe("irq/24-virtio0").0, "interrupt");
        assert_eq!(describe("something").0, "kernel");
    }
}
