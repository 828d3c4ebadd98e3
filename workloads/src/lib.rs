//! The bundled workloads: one module per workload, holding how its seed
//! and arguments become parameters, its ground truth (the `expect`
//! document) and the misbehaviour itself. The binaries in src/bin/ only
//! call [`main`]; kdiag and its grader get the truth in-process with
//! [`describe`], from the seed alone, with no binary and no scratch
//! directory.
//!
//! A workload binary parses the common options (`--seed`, `--duration`,
//! `--describe`, `--scratch`, `--scratch-cap`), prints its ground truth or
//! creates its scratch directory (removed on exit, SIGINT, SIGTERM, and at
//! the next start after SIGKILL), then runs. Exit codes: 0 ok, 1 failure,
//! 2 usage error (as kdiag's), 128 + the signal when stopped by SIGINT,
//! SIGTERM or SIGHUP.

pub mod bad_elf;
pub mod bio;
pub mod cli;
pub mod cpu_burn;
pub mod io_app;
pub mod io_stall;
pub mod json;
pub mod lock_contend;
pub mod mem_leak;
pub mod memory;
pub mod names;
pub mod scheduling;
pub mod scratch;
pub mod seed;

use std::time::{Duration, Instant};

pub use cli::Cli;
pub use json::Json;
pub use scratch::{Scratch, Storage};
pub use seed::{COURSE_REFUSAL, Rng, Seed, is_course_token};

/// Version of the `--describe` document; bumped on incompatible changes.
/// 2: seeds are tokens (strings); facts name files, not paths; the
/// `workload.scratch` path became `workload.storage`; bad-elf joined.
pub const DESCRIBE_SCHEMA: u64 = 2;

/// The bundled workloads: name and what is wrong with it.
pub const WORKLOADS: &[(&str, &str)] = &[
    (
        "io-app",
        "rewrites the same file region (10 MiB) with large O_SYNC writes, forever",
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
        "20 threads doing tiny synchronous O_DIRECT reads on a throttled disk: D state, high load, idle CPU",
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

/// The workloads' names.
pub fn names() -> impl Iterator<Item = &'static str> {
    WORKLOADS.iter().map(|w| w.0)
}

/// The ground truth (the `--describe` JSON) of workload `name` for `seed`
/// (any token, course tokens included) and the workload arguments `args`
/// (e.g. `["1"]` for scheduling's MODE; without `--seed`). The error is a
/// usage message.
pub fn describe(name: &str, seed: &str, args: &[String]) -> Result<String, String> {
    if args
        .iter()
        .any(|a| a == "--seed" || a.starts_with("--seed="))
    {
        return Err("give the seed on its own, not among the workload's arguments".into());
    }
    let mut all = args.to_vec();
    all.extend(["--seed".to_string(), seed.to_string()]);
    describe_args(name, &all)
}

/// The ground truth for a workload command line as its binary would get it
/// (`--seed` among `args` or not; a `--describe` there is ignored).
pub fn describe_args(name: &str, args: &[String]) -> Result<String, String> {
    document_for(name, args).map(|doc| doc.pretty())
}

/// Where workload `name` would put its scratch directory with `args` (for
/// the current user), or None if it writes no files: `--scratch DIR` if
/// given, else the default. kdiag uses it to find the disk to throttle.
pub fn scratch_dir(name: &str, args: &[String]) -> Option<std::path::PathBuf> {
    let storage = match name {
        "io-app" => io_app::IoApp::STORAGE,
        "scheduling" => scheduling::Scheduling::STORAGE,
        "memory" => memory::Memory::STORAGE,
        "bio" => bio::Bio::STORAGE,
        "io-stall" => io_stall::IoStall::STORAGE,
        "cpu-burn" => cpu_burn::CpuBurn::STORAGE,
        "lock-contend" => lock_contend::LockContend::STORAGE,
        "mem-leak" => mem_leak::MemLeak::STORAGE,
        _ => Storage::None,
    };
    if storage == Storage::None {
        return None;
    }
    // The last --scratch wins, as in the workload's own parser.
    let mut given = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--scratch" {
            given = it.next().cloned();
        } else if let Some(v) = a.strip_prefix("--scratch=") {
            given = Some(v.to_string());
        }
    }
    Some(given.map_or_else(|| scratch::base(storage).join(name), Into::into))
}

fn document_for(name: &str, args: &[String]) -> Result<Json, String> {
    let args: Vec<String> = args
        .iter()
        .filter(|a| *a != "--describe")
        .cloned()
        .collect();
    match name {
        "io-app" => document::<io_app::IoApp>(args),
        "scheduling" => document::<scheduling::Scheduling>(args),
        "memory" => document::<memory::Memory>(args),
        "bio" => document::<bio::Bio>(args),
        "io-stall" => document::<io_stall::IoStall>(args),
        "cpu-burn" => document::<cpu_burn::CpuBurn>(args),
        "lock-contend" => document::<lock_contend::LockContend>(args),
        "mem-leak" => document::<mem_leak::MemLeak>(args),
        "bad-elf" => bad_elf::document(&args),
        _ => Err(format!(
            "no workload named {name:?}; the workloads are: {}",
            names().collect::<Vec<_>>().join(", ")
        )),
    }
}

fn document<W: Workload>(args: Vec<String>) -> Result<Json, String> {
    let cli = Cli::from_args::<W>(args).map_err(|msg| match msg.is_empty() {
        true => "--help has no ground truth".to_string(),
        false => msg,
    })?;
    let params = W::from_cli(&cli)?;
    Ok(workload_document::<W>(&cli, &params))
}

/// The whole `--describe` document of a parsed workload.
fn workload_document<W: Workload>(cli: &Cli, params: &W) -> Json {
    let mut workload = header(W::NAME, cli.seed().token(), cli.args(), W::STORAGE);
    if let Some(d) = cli.duration().or(W::DURATION) {
        workload.push(("duration_s", Json::Num(d.as_secs_f64())));
    }
    envelope(workload, params.expect())
}

/// The `workload` fields every document starts with.
pub(crate) fn header(
    name: &str,
    seed: &str,
    args: &[String],
    storage: Storage,
) -> Vec<(&'static str, Json)> {
    vec![
        ("name", Json::str(name)),
        ("seed", Json::str(seed)),
        (
            "args",
            // The arguments that reproduce this run.
            Json::strs(args.iter().filter(|a| *a != "--describe")),
        ),
        (
            "storage",
            Json::str(match storage {
                Storage::None => "none",
                Storage::Any => "any",
                Storage::Disk => "disk",
            }),
        ),
    ]
}

pub(crate) fn envelope(workload: Vec<(&'static str, Json)>, expect: Json) -> Json {
    Json::obj([
        ("schema", Json::Int(DESCRIBE_SCHEMA as i64)),
        ("workload", Json::obj(workload)),
        ("expect", expect),
    ])
}

/// One misbehaving program.
pub trait Workload: Sized {
    const NAME: &'static str;
    /// Usage text after the common options (printed by `--help`).
    const USAGE: &'static str;
    /// Workload-specific options that take a value (e.g. `--size`).
    const OPTIONS: &'static [&'static str] = &[];
    /// Workload-specific options without a value (e.g. `--verify`).
    const FLAGS: &'static [&'static str] = &[];
    /// Where its scratch directory must live.
    const STORAGE: Storage = Storage::Any;
    /// Default cap on the bytes it may write into its scratch directory.
    const SCRATCH_CAP: u64 = 64 << 20;
    /// Default `--duration` for endless workloads; `None` for ones that finish.
    const DURATION: Option<Duration> = Some(Duration::from_secs(60));

    /// Resolve the parameters for this seed and these arguments.
    fn from_cli(cli: &Cli) -> Result<Self, String>;
    /// The `expect` object of `--describe`: what a learner should find.
    /// Files are named relative to the scratch directory, never by path.
    fn expect(&self) -> Json;
    /// Misbehave.
    fn run(&self, ctx: &Ctx) -> Result<(), String>;
}

/// What a running workload gets: its scratch directory and its deadline.
pub struct Ctx {
    name: &'static str,
    scratch: Option<Scratch>,
    pub deadline: Option<Instant>,
    /// A workload that finishes was given `--duration`: it runs again and
    /// again until then, as a service would (a lab runs it that way).
    pub repeat: bool,
    /// Started with a course token: say nothing of the parameters.
    pub course: bool,
}

impl Ctx {
    /// The scratch directory (workloads with `Storage::None` have none).
    pub fn scratch(&self) -> &Scratch {
        self.scratch
            .as_ref()
            .expect("this workload declared Storage::None")
    }

    /// True until `--duration` has passed (signals end the process directly).
    pub fn running(&self) -> bool {
        self.deadline.is_none_or(|d| Instant::now() < d)
    }

    /// Whether a finishing workload should run its work once more.
    pub fn again(&self) -> bool {
        self.repeat && self.running()
    }

    /// Sleep `d`, cut short at the deadline.
    pub fn sleep(&self, d: Duration) {
        let d = match self.deadline {
            Some(end) => d.min(end.saturating_duration_since(Instant::now())),
            None => d,
        };
        std::thread::sleep(d);
    }

    /// The start line on stderr: pid, scratch directory and `detail` (the
    /// parameters), which a course seed's run keeps to itself.
    pub fn announce(&self, detail: impl FnOnce() -> String) {
        let pid = std::process::id();
        let dir = match &self.scratch {
            Some(s) => format!(", scratch directory {}", s.path().display()),
            None => String::new(),
        };
        let detail = match self.course {
            true => "running (course seed: its parameters are not shown)".to_string(),
            false => detail(),
        };
        eprintln!("{}: pid {pid}{dir}: {detail}", self.name);
    }

    /// A result line on stdout, or `hidden` for a course seed's run.
    pub fn report(&self, full: impl FnOnce() -> String, hidden: impl FnOnce() -> String) {
        println!(
            "{}: {}",
            self.name,
            if self.course { hidden() } else { full() }
        );
    }
}

/// The whole life of a workload binary; never returns.
pub fn main<W: Workload>() -> ! {
    let cli = Cli::parse::<W>();
    let params = W::from_cli(&cli).unwrap_or_else(|msg| cli::usage_exit(W::NAME, &msg));
    if cli.describe() {
        if cli.seed().is_course() {
            cli::usage_exit(W::NAME, COURSE_REFUSAL);
        }
        println!("{}", workload_document(&cli, &params).pretty());
        std::process::exit(0);
    }
    let code = match run(&cli, params) {
        Ok(()) => 0,
        Err(msg) => {
            eprintln!("{}: error: {msg}", W::NAME);
            1
        }
    };
    std::process::exit(code)
}

fn run<W: Workload>(cli: &Cli, params: W) -> Result<(), String> {
    let duration = cli.duration().or(W::DURATION);
    let cap = cli.scratch_cap().unwrap_or(W::SCRATCH_CAP);
    let scratch = match W::STORAGE {
        Storage::None => None,
        _ => Some(Scratch::create(
            Scratch::path_for(cli, W::NAME, W::STORAGE),
            W::STORAGE,
            cap,
            cli.scratch().is_none(),
        )?),
    };
    let ctx = Ctx {
        name: W::NAME,
        scratch,
        deadline: duration
            .filter(|d| !d.is_zero())
            .map(|d| Instant::now() + d),
        repeat: W::DURATION.is_none() && cli.duration().is_some(),
        course: cli.seed().is_course(),
    };
    // ctx (and with it the scratch directory) is dropped on return.
    params.run(&ctx)
}

#[cfg(test)]
mod tests;
