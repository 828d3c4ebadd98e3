//! A tiny command line parser shared by the workloads (no dependencies):
//! common options, each workload's own options, positionals, sizes like
//! `10M` and durations like `30s`.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::Workload;
use crate::seed::Seed;

const COMMON: &str = "\
Common options:
  --seed TOKEN       vary the observable parameters deterministically: 1 to 64
                     letters, digits, '_' or '-' (default 0, the classic layout)
  --duration D       stop after D (e.g. 30, 30s, 500ms, 2m; 0 = until Ctrl-C);
                     a workload that finishes runs again and again until then
  --describe         print the ground truth for this seed as JSON and exit
  --scratch DIR      scratch directory (default: see docs/workloads.md)
  --scratch-cap SIZE most bytes it may write there (e.g. 64M)
  -h, --help         print this help";

/// Parsed arguments of one workload.
#[derive(Debug, Clone, Default)]
pub struct Cli {
    args: Vec<String>,
    positional: Vec<String>,
    values: Vec<(String, String)>,
    flags: Vec<String>,
}

impl Cli {
    /// Parse `std::env::args`; on a usage error print it and exit 2.
    pub fn parse<W: Workload>() -> Cli {
        let args: Vec<String> = std::env::args().skip(1).collect();
        match Cli::from_args::<W>(args) {
            Ok(cli) => cli,
            Err(msg) if msg.is_empty() => {
                println!("usage: {} [OPTIONS] {}\n\n{COMMON}", W::NAME, W::USAGE);
                std::process::exit(0)
            }
            Err(msg) => usage_exit(W::NAME, &msg),
        }
    }

    /// Parse a list of arguments (without the program name). An empty error
    /// means help was asked for.
    pub fn from_args<W: Workload>(args: Vec<String>) -> Result<Cli, String> {
        let valued = ["--seed", "--duration", "--scratch", "--scratch-cap"];
        let mut cli = Cli {
            args: args.clone(),
            ..Cli::default()
        };
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            if arg == "-h" || arg == "--help" {
                return Err(String::new());
            }
            if !arg.starts_with("--") || arg == "--" {
                cli.positional.push(arg);
                continue;
            }
            let (key, inline) = match arg.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (arg.clone(), None),
            };
            if valued.contains(&key.as_str()) || W::OPTIONS.contains(&key.as_str()) {
                let value = match inline {
                    Some(v) => v,
                    None => it.next().ok_or(format!("{key} needs a value"))?,
                };
                cli.values.push((key, value));
            } else if key == "--describe" || W::FLAGS.contains(&key.as_str()) {
                cli.flags.push(key);
            } else {
                return Err(format!("unknown option {arg}"));
            }
        }
        // Validate the common values now, so mistakes are usage errors.
        cli.try_seed()?;
        cli.try_duration()?;
        cli.try_size("--scratch-cap")?;
        Ok(cli)
    }

    /// The arguments as given (for `--describe`).
    pub fn args(&self) -> &[String] {
        &self.args
    }

    pub fn positional(&self, i: usize) -> Option<&str> {
        self.positional.get(i).map(String::as_str)
    }

    pub fn positional_count(&self) -> usize {
        self.positional.len()
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub fn describe(&self) -> bool {
        self.flag("--describe")
    }

    /// The seed token (the default layout's without `--seed`).
    pub fn seed(&self) -> Seed {
        self.try_seed().ok().flatten().unwrap_or_default()
    }

    /// True unless this is the documented default layout (no `--seed`, or 0).
    pub fn seeded(&self) -> bool {
        !self.seed().is_default()
    }

    fn try_seed(&self) -> Result<Option<Seed>, String> {
        self.raw("--seed").map(Seed::parse).transpose()
    }

    pub fn duration(&self) -> Option<Duration> {
        self.try_duration().ok().flatten()
    }

    pub fn scratch(&self) -> Option<PathBuf> {
        self.raw("--scratch").map(PathBuf::from)
    }

    pub fn scratch_cap(&self) -> Option<u64> {
        self.try_size("--scratch-cap").ok().flatten()
    }

    /// The last value given for `name`.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn try_value<T: FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        self.raw(name)
            .map(|v| v.parse().map_err(|_| format!("{name}: bad value {v:?}")))
            .transpose()
    }

    pub fn try_size(&self, name: &str) -> Result<Option<u64>, String> {
        self.raw(name)
            .map(|v| {
                parse_size(v).ok_or(format!("{name}: bad size {v:?} (e.g. 512, 64K, 10M, 1G)"))
            })
            .transpose()
    }

    fn try_duration(&self) -> Result<Option<Duration>, String> {
        self.raw("--duration")
            .map(|v| {
                parse_duration(v).ok_or(format!(
                    "--duration: bad value {v:?} (e.g. 30, 30s, 500ms, 2m)"
                ))
            })
            .transpose()
    }
}

/// Print a usage error and exit 2, as kdiag does.
pub fn usage_exit(name: &str, msg: &str) -> ! {
    eprintln!("{name}: error: {msg}\nRun with --help for usage.");
    std::process::exit(2)
}

/// `4096`, `64K`, `10M`, `1G` (binary units; an optional trailing `iB`/`B`).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (num, shift) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 10),
        (i, 'm' | 'M') => (&s[..i], 20),
        (i, 'g' | 'G') => (&s[..i], 30),
        _ => (s, 0),
    };
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// `30` or `30s` seconds, `500ms`, `2m`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let secs = num.parse::<f64>().ok()? * scale;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("10MiB"), Some(10 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("-1"), None);
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;
    use crate::{Ctx, Json};

    struct Dummy;
    impl Workload for Dummy {
        const NAME: &'static str = "dummy";
        const USAGE: &'static str = "";
        const OPTIONS: &'static [&'static str] = &["--size"];
        const FLAGS: &'static [&'static str] = &["--verify"];
        fn from_cli(_: &Cli) -> Result<Self, String> {
            Ok(Dummy)
        }
        fn expect(&self) -> Json {
            Json::Null
        }
        fn run(&self, _: &Ctx) -> Result<(), String> {
            Ok(())
        }
    }

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::from_args::<Dummy>(args.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn common_and_own_options() {
        let cli = parse(&[
            "1",
            "--seed=7",
            "--size",
            "4K",
            "--verify",
            "--duration",
            "2s",
            "x",
        ])
        .unwrap();
        assert_eq!((cli.seed().token(), cli.seeded()), ("7", true));
        assert_eq!(cli.try_size("--size"), Ok(Some(4096)));
        assert!(cli.flag("--verify") && !cli.describe());
        assert_eq!(cli.duration(), Some(Duration::from_secs(2)));
        assert_eq!(
            (cli.positional(0), cli.positional(1), cli.positional_count()),
            (Some("1"), Some("x"), 2)
        );
    }

    #[test]
    fn mistakes_are_usage_errors() {
        assert!(parse(&["--bogus"]).unwrap_err().contains("unknown option"));
        assert!(parse(&["--size"]).unwrap_err().contains("needs a value"));
        assert!(parse(&["--seed", "x y"]).unwrap_err().contains("--seed"));
        assert!(!parse(&["--seed", "0"]).unwrap().seeded());
        assert!(
            parse(&["--seed", "abcd-efgh-jkmn"])
                .unwrap()
                .seed()
                .is_course()
        );
        assert!(
            parse(&["--duration", "soon"])
                .unwrap_err()
                .contains("--duration")
        );
        assert_eq!(parse(&["-h"]).unwrap_err(), "", "help is the empty error");
    }
}
