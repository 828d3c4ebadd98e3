//! Shared pieces of the bundled workloads: scratch directories, seeds and the
//! ground truth each workload describes with `--describe`.
//!
//! Every workload binary is a [`Workload`] run by [`main`]: it parses the
//! common options (`--seed`, `--duration`, `--describe`, `--scratch`,
//! `--scratch-cap`), prints its ground truth or creates its scratch directory
//! (removed on exit, SIGINT, SIGTERM, and at the next start after SIGKILL),
//! then runs. Exit codes: 0 ok, 1 failure, 2 usage error (as kdiag's),
//! 128 + the signal when stopped by SIGINT, SIGTERM or SIGHUP.

pub mod cli;
pub mod json;
pub mod scratch;
pub mod seed;

use std::path::Path;
use std::time::{Duration, Instant};

pub use cli::Cli;
pub use json::Json;
pub use scratch::{Scratch, Storage};
pub use seed::Rng;

/// Version of the `--describe` document; bumped only on incompatible changes.
pub const DESCRIBE_SCHEMA: u64 = 1;

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
    fn expect(&self, scratch: &Path) -> Json;
    /// Misbehave.
    fn run(&self, ctx: &Ctx) -> Result<(), String>;
}

/// What a running workload gets: its scratch directory and its deadline.
pub struct Ctx {
    scratch: Option<Scratch>,
    pub deadline: Option<Instant>,
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

    /// Sleep `d`, cut short at the deadline.
    pub fn sleep(&self, d: Duration) {
        let d = match self.deadline {
            Some(end) => d.min(end.saturating_duration_since(Instant::now())),
            None => d,
        };
        std::thread::sleep(d);
    }
}

/// The whole life of a workload binary; never returns.
pub fn main<W: Workload>() -> ! {
    let cli = Cli::parse::<W>();
    let params = W::from_cli(&cli).unwrap_or_else(|msg| cli::usage_exit(W::NAME, &msg));
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
    let dir = Scratch::path_for(cli, W::NAME, W::STORAGE);
    let duration = cli.duration().or(W::DURATION);
    if cli.describe() {
        let mut workload = vec![
            ("name", Json::str(W::NAME)),
            ("seed", Json::Int(cli.seed() as i64)),
            (
                "args",
                // The arguments that reproduce this run.
                Json::strs(cli.args().iter().filter(|a| *a != "--describe")),
            ),
            (
                "scratch",
                match W::STORAGE {
                    Storage::None => Json::Null,
                    _ => Json::str(dir.display().to_string()),
                },
            ),
        ];
        if let Some(d) = duration {
            workload.push(("duration_s", Json::Num(d.as_secs_f64())));
        }
        let doc = Json::obj([
            ("schema", Json::Int(DESCRIBE_SCHEMA as i64)),
            ("workload", Json::obj(workload)),
            ("expect", params.expect(&dir)),
        ]);
        println!("{}", doc.pretty());
        return Ok(());
    }
    let cap = cli.scratch_cap().unwrap_or(W::SCRATCH_CAP);
    let scratch = match W::STORAGE {
        Storage::None => None,
        _ => Some(Scratch::create(
            dir,
            W::STORAGE,
            cap,
            cli.scratch().is_none(),
        )?),
    };
    let ctx = Ctx {
        scratch,
        deadline: duration
            .filter(|d| !d.is_zero())
            .map(|d| Instant::now() + d),
    };
    // ctx (and with it the scratch directory) is dropped on return.
    params.run(&ctx)
}
