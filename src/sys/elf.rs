//! The facts `elf-check` needs from this machine: the file's bytes and
//! mode, page size, vm.mmap_min_addr, TASK_SIZE, and what the file system
//! says about the interpreters the file names.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::Context;

use crate::analysis::elf_rules::{self, EM_386, EM_AARCH64, EM_ARM, EM_X86_64};
use crate::model::elf::{ElfEnv, PathFact, PathState};

/// Read `path` (it must be a regular file) and collect the environment
/// the rules need. This is what exec-trace calls before
/// `analysis::elf_rules::check`.
pub fn read_target(path: &Path) -> anyhow::Result<(Vec<u8>, ElfEnv)> {
    let meta = fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    anyhow::ensure!(
        meta.is_file(),
        "{} is not a regular file (execve would fail with EACCES)",
        path.display()
    );
    let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut env = host_env();
    env.mode = Some(meta.permissions().mode());
    env.paths = elf_rules::paths_to_check(&bytes, env.host_machine)
        .into_iter()
        .map(|p| PathFact {
            state: path_state(&p),
            path: p,
        })
        .collect();
    Ok((bytes, env))
}

/// This machine's loader facts, without any file.
pub fn host_env() -> ElfEnv {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page_size = u64::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096);
    let mmap_min_addr = fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65536);
    let host_machine = match std::env::consts::ARCH {
        "x86_64" => EM_X86_64,
        "aarch64" => EM_AARCH64,
        "x86" => EM_386,
        "arm" => EM_ARM,
        _ => 0,
    };
    // TASK_SIZE: x86-64 with 4-level paging is (1 << 47) - PAGE_SIZE; with
    // 5-level paging (la57) user space may reach 56 bits, but the kernel
    // keeps new mappings below 47 bits unless asked, so the lower bound is
    // what a loader can count on. arm64 is 48 bits with the usual config.
    let task_size = match host_machine {
        EM_X86_64 => (1u64 << 47) - page_size,
        EM_AARCH64 => 1u64 << 48,
        _ => 0xffff_e000,
    };
    ElfEnv {
        host_machine,
        page_size,
        mmap_min_addr,
        task_size,
        commit_limit: commit_limit(),
        mode: None,
        paths: Vec::new(),
    }
}

/// What __vm_enough_memory would let one new anonymous mapping have.
fn commit_limit() -> Option<u64> {
    let mode = fs::read_to_string("/proc/sys/vm/overcommit_memory").ok()?;
    let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(key))?;
        let n: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(n * 1024)
    };
    match mode.trim() {
        // OVERCOMMIT_GUESS: one request may not exceed RAM + swap.
        "0" => Some(kib("MemTotal:")? + kib("SwapTotal:")?),
        // OVERCOMMIT_NEVER: what is left under the commit limit.
        "2" => Some(kib("CommitLimit:")?.saturating_sub(kib("Committed_AS:")?)),
        _ => None,
    }
}

/// What open_exec would find at `path` (relative paths resolve against
/// the current directory, as they do for the kernel).
fn path_state(path: &str) -> PathState {
    let Ok(meta) = fs::metadata(path) else {
        return PathState::Missing;
    };
    if !meta.is_file() {
        return PathState::NotRegular;
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return PathState::NotExecutable;
    }
    let mut head = Vec::with_capacity(64);
    if let Ok(f) = fs::File::open(path) {
        let _ = f.take(64).read_to_end(&mut head);
    }
    PathState::File { head }
}
