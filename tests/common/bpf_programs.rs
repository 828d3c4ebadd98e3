//! Which BPF programs a kdiag started by a test holds, and whether they are
//! gone after it: told by what that process holds, never by counting the
//! machine's programs, which other runs (another test suite's kdiag) load
//! and unload at any time.

use std::collections::BTreeSet;

/// The IDs of the BPF programs the whole machine has loaded now.
pub fn loaded() -> BTreeSet<u64> {
    let out = std::process::Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .expect("bpftool is installed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array()
        .map(|a| a.iter().filter_map(|p| p["id"].as_u64()).collect())
        .unwrap_or_default()
}

/// The IDs of the BPF programs process `pid` holds (its program and link
/// descriptors' fdinfo).
pub fn held_by(pid: u32) -> BTreeSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return BTreeSet::new();
    };
    fds.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| {
                let l = l.to_string_lossy();
                l.contains("bpf-prog") || l.contains("bpf_link")
            })
        })
        .filter_map(|e| {
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", e.file_name().display()))
                    .ok()?;
            info.lines()
                .find_map(|l| l.strip_prefix("prog_id:"))?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

/// Wait until none of `ids` is loaded (the kernel frees a program whose
/// last descriptor closed after an RCU grace period), at most 5 s; panic
/// naming `how` kdiag ended if some are left.
pub fn wait_until_gone(ids: &BTreeSet<u64>, how: &str) {
    for _ in 0..50 {
        if loaded().is_disjoint(ids) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let left: Vec<_> = loaded().intersection(ids).copied().collect();
    panic!("BPF programs {left:?} outlived kdiag ({how}) by 5 s");
}
