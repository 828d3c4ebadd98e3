//! `kdiag workload`: list, run and describe the bundled misbehaving
//! programs. They are separate binaries (crate workloads/) installed next to
//! kdiag's own executable; kdiag finds them there.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::error;
use crate::render::table::{Align, Table};
use crate::sys::privilege;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// List the bundled workloads and whether they are built
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Run a workload; everything after NAME goes to it (try `run io-app --help`)
    Run {
        /// Workload name (see `kdiag workload list`)
        name: String,
        /// Arguments for the workload, e.g. --duration 30s --seed 7
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print a workload's ground truth (what a learner should find) as JSON
    Describe {
        /// Workload name (see `kdiag workload list`)
        name: String,
        /// Seed whose parameters to describe
        #[arg(long)]
        seed: Option<u64>,
        /// Further workload arguments that change the ground truth (e.g. 1 for scheduling's MODE)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

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

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Sub::List { json } => list(json),
        Sub::Run { name, args } => exec(&name, &args),
        Sub::Describe { name, seed, args } => describe(&name, seed, &args),
    }
}

#[derive(serde::Serialize)]
struct Entry {
    name: &'static str,
    description: &'static str,
    built: bool,
    path: String,
}

fn list(json: bool) -> anyhow::Result<u8> {
    let dir = bin_dir()?;
    let entries: Vec<Entry> = WORKLOADS
        .iter()
        .map(|&(name, description)| Entry {
            name,
            description,
            built: dir.join(name).is_file(),
            path: dir.join(name).display().to_string(),
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        crate::render::json(&mut out, &entries)?;
        return Ok(error::OK);
    }
    let mut table = Table::new([
        ("NAME", Align::Left),
        ("BUILT", Align::Left),
        ("DESCRIPTION", Align::Left),
    ]);
    for e in &entries {
        let built = if e.built { "yes" } else { "no" };
        table.push(vec![
            e.name.to_string(),
            built.to_string(),
            e.description.to_string(),
        ]);
    }
    table.write(&mut out)?;
    if entries.iter().any(|e| !e.built) {
        eprintln!("not built ones: {}", build_hint(&dir));
    }
    Ok(error::OK)
}

/// Replace kdiag with the workload, so signals (Ctrl-C) and the exit status
/// are the workload's own. Under sudo it runs as the invoking user.
fn exec(name: &str, args: &[String]) -> anyhow::Result<u8> {
    let path = binary(name)?;
    let mut cmd = Command::new(&path);
    cmd.args(args);
    privilege::run_as_invoker(&mut cmd);
    let err = cmd.exec();
    Err(err).with_context(|| format!("cannot run {}", path.display()))
}

fn describe(name: &str, seed: Option<u64>, args: &[String]) -> anyhow::Result<u8> {
    let path = binary(name)?;
    let mut cmd = Command::new(&path);
    cmd.arg("--describe").args(args);
    if let Some(seed) = seed {
        cmd.args(["--seed", &seed.to_string()]);
    }
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {}", path.display()))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // The workloads exit 2 on usage errors, as kdiag does.
        return Err(match out.status.code() {
            Some(2) => error::usage(msg),
            _ => anyhow::anyhow!(msg),
        });
    }
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(error::OK)
}

/// The directory holding kdiag's own executable, where the workloads live.
fn bin_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find kdiag's own executable")?;
    Ok(exe.parent().map(PathBuf::from).unwrap_or_default())
}

fn binary(name: &str) -> anyhow::Result<PathBuf> {
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

fn build_hint(dir: &std::path::Path) -> String {
    format!(
        "build the workloads with `cargo build --release --workspace` \
         (they must sit next to kdiag, in {}; for a debug kdiag use `cargo build --workspace`)",
        dir.display()
    )
}
