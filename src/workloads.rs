//! The bundled workloads as kdiag finds and runs them: separate binaries
//! (crate workloads/) installed next to kdiag's own executable.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::error;

/// The bundled workloads: name and what is wrong with it.
pub const WORKLOADS: &[(&str, &str)] = &[
    (
        "io-app",
        "rewrites the same 10 MiB file region with large O_SYNC writes, forever",
    ),
    (
        "scheduling",
        "runs N small tasks as threads (MODE 0) or fork()ed processes (MODE 1)",
    ),
    (
        "memory",
        "copies a file with mmap (MODE 0) or read/write through a BLK-byte buffer (MODE 1)",
    ),
    (
        "bio",
        "20 threads doing tiny synchronous O_DIRECT reads: D state, high load, idle CPU",
    ),
    (
        "io-stall",
        "bursts of dirty page cache flushed by kernel threads: disk stalls, culprit looks idle",
    ),
    (
        "cpu-burn",
        "burns CPU in two named hot functions (user) or a system-call loop (kernel)",
    ),
    (
        "lock-contend",
        "threads serialised on one mutex held while sleeping",
    ),
    ("mem-leak", "resident memory grows steadily until a cap"),
    (
        "bad-elf",
        "generates ELF files the kernel refuses to execute after the point of no return",
    ),
];

/// The directory holding kdiag's own executable, where the workloads live.
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find kdiag's own executable")?;
    Ok(exe.parent().map(PathBuf::from).unwrap_or_default())
}

pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    if !WORKLOADS.iter().any(|(n, _)| *n == name) {
        let names: Vec<&str> = WORKLOADS.iter().map(|(n, _)| *n).collect();
        return Err(error::usage(format!(
            "no workload named {name:?}; the workloads are: {}",
            names.join(", ")
        )));
    }
    let dir = bin_dir()?;
    let path = dir.join(name);
    if !path.is_file() {
        anyhow::bail!(
            "workload {name} is not built (looked for {}): {}",
            path.display(),
            build_hint(&dir)
        );
    }
    Ok(path)
}

pub fn build_hint(dir: &std::path::Path) -> String {
    format!(
        "build the workloads with `cargo build --release --workspace` \
         (they must sit next to kdiag, in {}; for a debug kdiag use `cargo build --workspace`)",
        dir.display()
    )
}

/// The `--seed` value a workload binary gets for a seed token. The bundled
/// binaries take numbers only until they learn tokens (branch workloads):
/// a number passes as it is, any other token as a 64-bit hash of its bytes.
pub fn seed_arg(token: &str) -> String {
    if token.parse::<u64>().is_ok() {
        return token.to_string();
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64; // FNV-1a
    for b in token.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    // Not 0: that is the documented default layout, not a variant.
    (h | 1).to_string()
}

/// The ground truth of workload `name` for seed `token` (the `--describe`
/// document): the one place labs, checks and grading get a learner's
/// truth. `args` are workload arguments that change it (e.g. scheduling's
/// MODE).
pub fn truth(name: &str, token: &str, args: &[String]) -> anyhow::Result<serde_json::Value> {
    let text = ground_truth(name, Some(token), args)?;
    serde_json::from_str(&text).with_context(|| format!("the ground truth of {name} is not JSON"))
}

/// A workload's ground truth (`--describe`, JSON text) for `seed`; `args`
/// are workload arguments that change it (e.g. scheduling's MODE). Under
/// sudo it is the invoking user's, as `kdiag workload run` runs it as that
/// user (the scratch directory's path depends on the uid).
pub fn ground_truth(name: &str, seed: Option<&str>, args: &[String]) -> anyhow::Result<String> {
    let path = binary(name)?;
    let mut cmd = Command::new(&path);
    cmd.arg("--describe").args(args);
    if let Some(seed) = seed {
        cmd.args(["--seed", &seed_arg(seed)]);
    }
    crate::sys::process::privilege::run_as_invoker(&mut cmd);
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {}", path.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let msg = stderr
            .trim()
            .trim_end_matches("Run with --help for usage.")
            .trim_end()
            .to_string();
        // The workloads exit 2 on usage errors, as kdiag does.
        return Err(match out.status.code() {
            Some(2) => error::usage(msg),
            _ => anyhow::anyhow!(msg),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
