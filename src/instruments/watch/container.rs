//! `--container NAME`: the cgroups of a container, found by the names
//! their paths give them (`analysis::runs_as`: Docker, Podman,
//! containerd, CRI-O, LXC, a Kubernetes pod's uid), with no container
//! runtime's API. Found again at every scan: a container that restarts
//! gets a new cgroup.

use std::path::{Path, PathBuf};

use crate::analysis::runs_as::{container_at, names_container};
use crate::sys::cgroupfs;

/// How deep a container's cgroup may be (a rootless Podman container's
/// is user.slice/user-1000.slice/user@1000.service/user.slice/libpod-ID.scope,
/// a pod's container kubepods.slice/kubepods-burstable.slice/POD.slice/ID.scope).
const DEPTH: usize = 8;

/// The hierarchies, the one every process is in first: systemd's
/// (named, on v1), the unified one, then the controllers' in order.
fn trees() -> Vec<cgroupfs::Mount> {
    let mut m = cgroupfs::mounts();
    m.sort_by_key(|m| {
        let rank = if m.controllers.iter().any(|c| c == "name=systemd") {
            0
        } else if m.v2 {
            1
        } else {
            2
        };
        (rank, m.dir.clone())
    });
    m
}

/// The cgroup directories of the container or pod `name`, in the first
/// hierarchy that has any (every hierarchy has the same containers, a
/// test's may be in one only).
pub fn dirs(name: &str) -> Vec<PathBuf> {
    for tree in trees() {
        let mut found = Vec::new();
        walk(&tree, &mut |dir, path| {
            let it = names_container(path, name);
            if it {
                found.push(dir.to_path_buf());
            }
            it
        });
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// Every container and pod the cgroup trees show ("Docker container
/// 3b6190394e67"), sorted, each once.
pub fn known() -> Vec<String> {
    let mut out = Vec::new();
    for tree in trees() {
        walk(&tree, &mut |_, path| match container_at(path) {
            Some(c) => {
                // A pod's containers are named too.
                let pod = c.starts_with("Kubernetes pod");
                out.push(c);
                !pod
            }
            None => false,
        });
    }
    out.sort();
    out.dedup();
    out
}

/// Call `f` with every cgroup directory of `tree` and its path in the
/// hierarchy (as /proc/PID/cgroup gives it), DEPTH levels down at most;
/// below a directory for which `f` says true, no further.
fn walk(tree: &cgroupfs::Mount, f: &mut dyn FnMut(&Path, &str) -> bool) {
    let root = tree.root.trim_end_matches('/').to_string();
    let mut level = vec![(tree.dir.clone(), root)];
    for _ in 0..DEPTH {
        let mut next = Vec::new();
        for (dir, path) in &level {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let Some(name) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let path = format!("{path}/{name}");
                if !f(&e.path(), &path) {
                    next.push((e.path(), path));
                }
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
}
