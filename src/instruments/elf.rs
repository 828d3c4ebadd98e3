//! The facts `elf-check` needs from this machine: the parts of the file the
//! rules read and its mode, page size, vm.mmap_min_addr, TASK_SIZE, and
//! what the file system says about the interpreters the file names.
//!
//! The file and the interpreters are opened as the user (`user_files`):
//! under sudo, kdiag never inspects a file its caller could not read.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::analysis::elf_rules::{self, EM_386, EM_AARCH64, EM_ARM, EM_X86_64, Image};
use crate::model::elf::{ElfEnv, PathFact, PathState};
use crate::user_files::{self, Limits, Peek, UserFileError};

/// Read what the rules need of `path` (a regular file the user can read,
/// of any size: only its headers and interpreter path are read) and
/// collect the environment they need. exec-trace calls this too, before
/// `analysis::elf_rules::check`.
pub fn read_target(path: &Path) -> Result<(Image, ElfEnv), UserFileError> {
    let (file, size) = user_files::open(path, &Limits::parts_only())?;
    let mode = file
        .metadata()
        .map_err(|e| UserFileError::Io {
            path: path.to_path_buf(),
            source: e,
        })?
        .mode();
    let mut env = host_env();
    let mut failed = None;
    let image = Image::read(size, env.host_machine, |off, n| {
        user_files::read_at(&file, path, off, n).map_err(|e| {
            let io = std::io::Error::other(e.to_string());
            failed = Some(e);
            io
        })
    });
    let image = match (image, failed) {
        (Ok(image), _) => image,
        (Err(_), Some(e)) => return Err(e),
        (Err(e), None) => {
            return Err(UserFileError::Io {
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    env.mode = Some(mode);
    env.paths = elf_rules::paths_to_check(&image, env.host_machine)
        .into_iter()
        .filter_map(|p| {
            Some(PathFact {
                state: path_state(&p)?,
                path: p,
            })
        })
        .collect();
    Ok((image, env))
}

/// This machine's loader facts, without any file.
pub fn host_env() -> ElfEnv {
    let page_size = crate::sys::page_size();
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

/// What open_exec would find at `path`, looked at as the user (relative
/// paths resolve against the current directory, as they do for the kernel).
/// None for an executable the user may not read: the kernel may still run
/// it, and kdiag does not read it for them.
fn path_state(path: &str) -> Option<PathState> {
    Some(match user_files::peek(Path::new(path), 64) {
        Peek::Missing => PathState::Missing,
        Peek::Denied => PathState::Denied,
        Peek::NotRegular => PathState::NotRegular,
        Peek::File { mode, .. } if mode & 0o111 == 0 => PathState::NotExecutable,
        Peek::File { head, .. } => PathState::File { head: head? },
    })
}
