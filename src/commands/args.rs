//! Argument types and value parsers several subcommands share, so one flag
//! means one thing everywhere and every value is checked when the command
//! line is parsed, with the allowed range in the message:
//!
//! - `-d/--duration SECS` ([`duration`]): how long to trace or watch;
//! - `--interval SECS` ([`interval`]): time between refreshes;
//! - `-F/--freq HZ` ([`frequency`]): sampling rate, within the kernel's
//!   `kernel.perf_event_max_sample_rate`;
//! - `-p/--pid PID` ([`pid`]), `SIZE` ([`size`]), rwbs patterns ([`rwbs`]);
//! - `-o/--output FILE`, `--json`.
//!
//! A value parser never panics, whatever the string (tests/cli_fuzz.rs).

use std::path::PathBuf;

use crate::instruments::{Ask, Tiers};

/// The shortest duration kdiag accepts, in seconds.
pub const MIN_DURATION_SECS: f64 = 0.001;
/// The longest duration kdiag accepts: a week, in seconds.
pub const MAX_DURATION_SECS: f64 = 7.0 * 86_400.0;
/// The shortest refresh interval, in seconds.
pub const MIN_INTERVAL_SECS: f64 = 0.1;
/// The longest refresh interval: an hour, in seconds.
pub const MAX_INTERVAL_SECS: f64 = 3_600.0;
/// The sampling-rate ceiling assumed when the sysctl cannot be read (the
/// kernel's default).
const DEFAULT_MAX_SAMPLE_RATE: u64 = 100_000;
/// The PID ceiling assumed when kernel.pid_max cannot be read (its maximum).
const DEFAULT_PID_MAX: u64 = 4_194_304;
/// The letters blk_fill_rwbs writes: Read, Write, Discard, secure Erase,
/// Flush/FUA, None, readAhead, Sync, Meta.
const RWBS_LETTERS: &str = "RWDEFNASM";
/// The longest rwbs pattern (the kernel's rwbs strings have at most 8).
const MAX_RWBS_PATTERN: usize = 16;
/// The largest SIZE: 1 TiB.
pub const MAX_SIZE: u64 = 1 << 40;

/// Where a learner's lab files are, for lab, answer and check.
#[derive(Debug, Clone, clap::Args)]
pub struct Files {
    /// Folder for your labs' answers and progress (default:
    /// $XDG_STATE_HOME/kdiag/labs, i.e. ~/.local/state/kdiag/labs)
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Read labs and checks from this directory (labs/, checks/) instead of the built-in ones
    #[arg(long, value_name = "DIR")]
    pub labs: Option<PathBuf>,
}

impl Files {
    pub fn source(&self) -> crate::lab::LabSource {
        crate::lab::LabSource {
            dir: self.labs.clone(),
        }
    }

    /// The learner's folder for lab `id`.
    pub fn lab_dir(&self, id: &str) -> anyhow::Result<crate::lab::state::LabDir> {
        Ok(crate::lab::state::LabDir::new(
            &crate::lab::state::root(self.dir.as_deref())?,
            id,
        ))
    }
}

/// `-p PID,...`, the same for every command that takes a list of processes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PidList {
    /// Only these processes (comma-separated PIDs)
    #[arg(
        short = 'p',
        long = "pid",
        value_name = "PID,...",
        value_delimiter = ',',
        value_parser = pid::<i32>
    )]
    pub pids: Vec<i32>,
}

impl PidList {
    /// What clap cannot check alone: exactly one target, these PIDs or
    /// `command` (faults, syscalls).
    pub fn or_command(&self, command: &[std::ffi::OsString]) -> anyhow::Result<()> {
        if self.pids.is_empty() == command.is_empty() {
            return Err(crate::error::usage(
                "say what to trace: one of -p PID,... or -- CMD ARGS",
            ));
        }
        Ok(())
    }
}

/// How long to trace: `-d SECS`, or SECS as the last word, as iosnoop and
/// execsnoop take it. Without either: until Ctrl-C.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TraceDuration {
    /// Seconds to trace (fractions, ms, m and h allowed; at most a week); default: until Ctrl-C
    #[arg(short = 'd', long = "duration", value_name = "SECS", value_parser = duration)]
    pub duration: Option<f64>,
    /// The same as -d, in iosnoop's and execsnoop's place
    #[arg(value_name = "SECS", value_parser = duration, conflicts_with = "duration")]
    pub duration_secs: Option<f64>,
}

impl TraceDuration {
    /// The duration given either way.
    pub fn secs(&self) -> Option<f64> {
        self.duration.or(self.duration_secs)
    }
}

/// A number of seconds with an optional unit (ms, s, m, h): "5", "0.5",
/// "250ms", "2m". The range check is the caller's.
fn seconds(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    // Only plain decimals: f64's parser also takes "inf", "NaN" and "1e300".
    let plain = !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.chars().filter(|&c| c == '.').count() <= 1
        && number.chars().any(|c| c.is_ascii_digit())
        && number.len() <= 20;
    if !plain {
        return Err(format!(
            "{s:?} is not a number of seconds (examples: 5, 0.5, 250ms, 2m)"
        ));
    }
    number
        .parse::<f64>()
        .map(|n| n * scale)
        .map_err(|e| format!("{s:?}: {e}"))
}

fn seconds_within(s: &str, min: f64, max: f64, what: &str) -> Result<f64, String> {
    let v = seconds(s)?;
    if !(min..=max).contains(&v) {
        return Err(format!(
            "{what} must be from {min} to {max} seconds, not {s}"
        ));
    }
    Ok(v)
}

/// Whose processes this run observes: the policy's (a learner's own on a
/// course server, everyone's otherwise), for the instruments to filter at
/// their source.
pub fn scope() -> anyhow::Result<crate::instruments::target::Scope> {
    use crate::instruments::target::Scope;
    Ok(crate::course::policy::observed_user()?.map_or(Scope::Everyone, Scope::User))
}

/// `-d/--duration`: seconds, from 0.001 to a week.
pub fn duration(s: &str) -> Result<f64, String> {
    seconds_within(s, MIN_DURATION_SECS, MAX_DURATION_SECS, "the duration")
}

/// `--interval`: seconds between refreshes, from 0.1 to an hour.
pub fn interval(s: &str) -> Result<f64, String> {
    seconds_within(s, MIN_INTERVAL_SECS, MAX_INTERVAL_SECS, "the interval")
}

/// A whole number of at most 19 digits (no sign, no exponent).
fn whole(s: &str, what: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 19 || !t.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("{s:?} is not a whole number ({what})"));
    }
    t.parse().map_err(|e| format!("{s:?}: {e}"))
}

/// A kernel limit from /proc/sys, if readable.
fn sysctl(name: &str) -> Option<u64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `-F/--freq`: samples per second, from 1 to the kernel's
/// `kernel.perf_event_max_sample_rate` (perf_event_open refuses more).
pub fn frequency(s: &str) -> Result<u64, String> {
    frequency_within(s, sysctl("kernel.perf_event_max_sample_rate"))
}

fn frequency_within(s: &str, max: Option<u64>) -> Result<u64, String> {
    let hz = whole(s, "samples per second")?;
    let limit = max.unwrap_or(DEFAULT_MAX_SAMPLE_RATE);
    if hz == 0 {
        return Err("the frequency must be at least 1 Hz".into());
    }
    if hz > limit {
        return Err(format!(
            "{hz} Hz is above kernel.perf_event_max_sample_rate ({limit} Hz): use {limit} or \
             less, or raise the limit with `sudo sysctl kernel.perf_event_max_sample_rate={hz}` \
             (the kernel lowers it again if sampling takes too long)"
        ));
    }
    Ok(hz)
}

/// `-p/--pid`: a process id from 1 to kernel.pid_max.
pub fn pid<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let max = sysctl("kernel.pid_max").unwrap_or(DEFAULT_PID_MAX);
    let n = whole(s, "a process id")?;
    if n == 0 || n > max {
        return Err(format!(
            "a PID is from 1 to {max} (kernel.pid_max), not {s}"
        ));
    }
    T::try_from(n).map_err(|_| format!("{s} is out of range for a PID"))
}

/// `--tier`: `auto` (the best tier the machine allows) or one of the
/// instrument's tiers by its `Tier::arg` name, each with its help line,
/// all from the instrument's table.
pub fn tier(tiers: &'static Tiers) -> impl clap::builder::TypedValueParser<Value = Ask> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = std::iter::once(PossibleValue::new("auto").help(tiers.auto)).chain(
        tiers
            .rows
            .iter()
            .map(|r| PossibleValue::new(r.tier.arg()).help(r.sees)),
    );
    PossibleValuesParser::new(values).map(move |name: String| {
        tiers
            .rows
            .iter()
            .find(|r| r.tier.arg() == name)
            .map_or(Ask::Auto, |r| Ask::Only(r.tier))
    })
}

/// `-u/--user`: a user name or uid, resolved to the uid.
pub fn user(s: &str) -> Result<u32, String> {
    if s.is_empty() || s.len() > 256 || s.contains('\0') {
        return Err(format!("{s:?} is not a user name or uid"));
    }
    crate::instruments::target::uid_of(s).ok_or_else(|| format!("no user named {s:?}"))
}

/// A size in bytes with an optional binary unit: "4096", "64K", "1M",
/// "2G" (K = 1024); from 1 byte to 1 TiB.
pub fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (number, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let not_a_size = || {
        format!("{s:?} is not a size: bytes from 1 to 1T, with an optional K, M, G or T (64K, 2M)")
    };
    let n = whole(number, "bytes").map_err(|_| not_a_size())?;
    let bytes = n.checked_shl(shift).filter(|b| b >> shift == n);
    match bytes {
        Some(b) if (1..=MAX_SIZE).contains(&b) => Ok(b),
        _ => Err(not_a_size()),
    }
}

/// An rwbs pattern for block I/O types: letters of R W D E F N A S M and
/// `*` (any run), like iosnoop's -i: "*R*", "WS", "W*".
pub fn rwbs(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_RWBS_PATTERN
        && s.chars().all(|c| c == '*' || RWBS_LETTERS.contains(c));
    if !ok {
        return Err(format!(
            "{s:?} is not an rwbs pattern: up to {MAX_RWBS_PATTERN} of the letters \
             {RWBS_LETTERS} (Read Write Discard Erase Flush/FUA None readAhead Sync Meta) \
             and * (any run), e.g. '*R*' or 'WS'"
        ));
    }
    Ok(s.to_string())
}

/// A cgroup named by its path under /sys/fs/cgroup or in full (`flag`:
/// the option that named it), accepted only on the cgroup file system.
pub fn cgroup_dir(flag: &str, c: &std::path::Path) -> anyhow::Result<PathBuf> {
    crate::instruments::target::cgroup(c).map_err(|at| {
        crate::error::usage(format!(
            "{flag} {}: no cgroup at {} (give a directory under /sys/fs/cgroup, e.g. cpu/system.slice)",
            c.display(),
            at.display()
        ))
    })
}

/// The cgroup of systemd unit `name` (`--unit`), from the cgroup trees.
pub fn unit_dir(name: &str) -> anyhow::Result<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return Err(crate::error::usage(format!(
            "--unit {name}: give a unit's name (nginx, nginx.service, session-2.scope), not a path (--cgroup takes paths)"
        )));
    }
    crate::instruments::target::unit_cgroup(name).ok_or_else(|| {
        crate::error::usage(format!(
            "--unit {name}: no cgroup named for it under /sys/fs/cgroup (is the unit running? `systemctl status {name}`)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("5"), Ok(5.0));
        assert_eq!(duration("0.5"), Ok(0.5));
        assert_eq!(duration("250ms"), Ok(0.25));
        assert_eq!(duration("2m"), Ok(120.0));
        for bad in [
            "1e300", "inf", "NaN", "-1", "0", "", "1.2.3", "8d", "700000", "0.0001", "s", ".",
        ] {
            let e = duration(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(duration("1e300").unwrap_err().contains("not a number"));
        assert!(duration("700000").unwrap_err().contains("0.001 to 604800"));
    }

    #[test]
    fn frequencies_stop_at_the_kernel_limit() {
        assert_eq!(frequency_within("99", Some(25_000)), Ok(99));
        let e = frequency_within("1000000", Some(25_000)).unwrap_err();
        assert!(
            e.contains("kernel.perf_event_max_sample_rate (25000 Hz)"),
            "{e}"
        );
        assert!(e.contains("sudo sysctl kernel.perf_event_max_sample_rate=1000000"));
        assert!(frequency_within("0", None).is_err());
        assert!(frequency_within("-5", None).is_err());
        assert!(frequency_within("99999999999999999999999", None).is_err());
    }

    #[test]
    fn pids() {
        assert_eq!(pid::<i32>("1"), Ok(1));
        assert_eq!(pid::<u32>("4242"), Ok(4242));
        assert!(pid::<i32>("0").is_err());
        assert!(pid::<i32>("-1").is_err());
        assert!(pid::<i32>("99999999999").is_err());
        assert!(pid::<i32>("12abc").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("64K"), Ok(65536));
        assert_eq!(size("1MiB"), Ok(1 << 20));
        assert_eq!(size("2G"), Ok(2 << 30));
        for bad in ["0", "-1", "1P", "99999999999T", "M", "1.5M", ""] {
            assert!(size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rwbs_patterns() {
        assert_eq!(rwbs("*R*").as_deref(), Ok("*R*"));
        assert!(rwbs("WS").is_ok());
        let e = rwbs("garbage!!").unwrap_err();
        assert!(e.contains("not an rwbs pattern"), "{e}");
        assert!(rwbs("").is_err());
        assert!(rwbs(&"*".repeat(100)).is_err());
    }
}
