//! `kdiag workload`: list, run and describe the bundled misbehaving
//! programs. They are separate binaries (crate workloads/) installed next to
//! kdiag's own executable; kdiag finds them there.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::error;
use crate::render::table::{Align, Table};
use crate::sys::process::{privilege, user_files};
use crate::workloads::{self, WORKLOADS, bin_dir, binary, build_hint};

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
    /// Build a kernel module with an original exercise's behaviour (only `io`:
    /// a timer that busy-waits in softirq context); needs kernel headers
    BuildModule {
        /// Module to build: io
        name: String,
        /// Directory for the sources and the built .ko
        #[arg(long, default_value = "kdiag-io-module")]
        out: PathBuf,
        /// Kernel build directory (default /lib/modules/$(uname -r)/build)
        #[arg(long)]
        kernel_dir: Option<PathBuf>,
    },
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    match args.command {
        Sub::List { json } => list(json),
        Sub::Run { name, args } => exec(&name, &args),
        Sub::Describe { name, seed, args } => describe(&name, seed, &args),
        Sub::BuildModule {
            name,
            out,
            kernel_dir,
        } => build_module(&name, &out, kernel_dir),
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
    print!(
        "{}",
        workloads::ground_truth(name, seed.map(|s| s.to_string()).as_deref(), args)?
    );
    Ok(error::OK)
}

/// The io module's sources, embedded so the kdiag binary works alone.
const IO_MODULE: &[(&str, &str)] = &[
    (
        "kdiag_io.c",
        include_str!("../../workloads/modules/io/kdiag_io.c"),
    ),
    ("Kbuild", include_str!("../../workloads/modules/io/Kbuild")),
];

fn build_module(
    name: &str,
    out: &std::path::Path,
    kernel_dir: Option<PathBuf>,
) -> anyhow::Result<u8> {
    if name != "io" {
        return Err(error::usage(format!(
            "no module named {name:?}; the only one is io"
        )));
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .context("cannot read the kernel release")?
        .trim()
        .to_string();
    let kdir = kernel_dir.unwrap_or_else(|| PathBuf::from(format!("/lib/modules/{release}/build")));
    if !kdir.join("Makefile").is_file() {
        anyhow::bail!(
            "kernel headers not found at {}: install the headers for kernel {release} \
             (Debian/Ubuntu: sudo apt install linux-headers-{release}; Fedora: sudo dnf install \
             kernel-devel-{release}; Arch: sudo pacman -S linux-headers) plus make and gcc, \
             or pass --kernel-dir DIR",
            kdir.display()
        );
    }
    user_files::create_dir_all(out)?;
    let out = out.canonicalize()?;
    for (file, text) in IO_MODULE {
        let path = out.join(file);
        user_files::write(&path, text)?;
    }
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(&kdir)
        .arg(format!("M={}", out.display()))
        .arg("modules");
    privilege::run_as_invoker(&mut make);
    let status = make
        .status()
        .context("cannot run make: install make and gcc")?;
    if !status.success() {
        anyhow::bail!("building the module failed (make's output is above)");
    }
    let ko = out.join("kdiag_io.ko");
    println!(
        "built {ko}\n\
         load:   sudo insmod {ko} [spin_ms=1000] [period_ms=2000] [delay_s=5] [lifetime_s=60]\n\
         unload: sudo rmmod kdiag_io\n\
         Once loaded, one CPU busy-waits in softirq context for spin_ms out of every\n\
         period_ms, from delay_s after loading for lifetime_s seconds.",
        ko = ko.display()
    );
    Ok(error::OK)
}
