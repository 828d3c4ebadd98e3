//! No command line panics kdiag: a deterministic generator builds argv for
//! every subcommand from its real options (found by walking the clap
//! definition) and hostile values, and runs each through the real parser
//! and `commands::validate`, the checks every command makes before it
//! traces or runs anything. A panic anywhere fails the test with the argv.

use std::ffi::OsString;
use std::panic::{AssertUnwindSafe, catch_unwind};

use clap::{CommandFactory, Parser};
use kdiag::cli::Cli;

/// Values that have broken parsers before, or could.
const HOSTILE: &[&str] = &[
    "",
    "-",
    "--",
    "0",
    "-0",
    "-1",
    "1",
    "5",
    "0.5",
    "1e300",
    "-1e300",
    "1e-300",
    "inf",
    "-inf",
    "NaN",
    "nan",
    "0.0001",
    "0.001",
    "604800",
    "604801",
    "100ms",
    "2m",
    "1h",
    "3d",
    "99999999999999999999999",
    "18446744073709551616",
    "4294967296",
    "2147483648",
    "-2147483649",
    "1000000",
    "1.5",
    "1,2,3",
    ",,,",
    "1,,2",
    "0x10",
    "1K",
    "64M",
    "1P",
    "1T",
    "garbage!!",
    "*",
    "**",
    "*R*",
    "WS",
    "rwbs*R*W*S*M*A*F*D*E*N*",
    "vda",
    "/dev/vda",
    "254,0",
    "254:0",
    "999:999",
    ":",
    "root",
    "nobody",
    "no-such-user-kdiag",
    "%cpu",
    "-%cpu",
    "+pid",
    "bpf",
    "perf",
    "auto",
    "json",
    "csv",
    "/dev/zero",
    "/",
    ".",
    "..",
    "a b",
    "é",
    "\u{202e}",
    "0-demo",
    "k3m9-x2pq-7vtz",
    "--json",
    "-p",
    "-d",
];

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// One leaf subcommand: its path and the words that name its options.
struct Leaf {
    path: Vec<String>,
    flags: Vec<String>,
    /// Values a `value_enum` or `possible_values` option accepts.
    known: Vec<String>,
}

fn leaves() -> Vec<Leaf> {
    fn walk(cmd: &clap::Command, path: Vec<String>, globals: &[String], out: &mut Vec<Leaf>) {
        let mut flags: Vec<String> = globals.to_vec();
        let mut known = Vec::new();
        for arg in cmd.get_arguments() {
            if let Some(l) = arg.get_long() {
                flags.push(format!("--{l}"));
            }
            if let Some(s) = arg.get_short() {
                flags.push(format!("-{s}"));
            }
            known.extend(
                arg.get_possible_values()
                    .iter()
                    .map(|v| v.get_name().to_string()),
            );
        }
        out.push(Leaf {
            path: path.clone(),
            flags,
            known,
        });
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, globals, out);
        }
    }
    let top = Cli::command();
    let globals: Vec<String> = top
        .get_arguments()
        .filter(|a| a.is_global_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    let mut out = Vec::new();
    walk(&top, Vec::new(), &globals, &mut out);
    out
}

/// Parse and validate: whether it parsed; Err(message) on a panic.
fn exercise(argv: &[OsString]) -> Result<bool, String> {
    let run = catch_unwind(AssertUnwindSafe(|| match Cli::try_parse_from(argv) {
        Ok(cli) => {
            let _ = kdiag::commands::validate(&cli.command);
            true
        }
        Err(_) => false,
    }));
    run.map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

#[test]
fn no_command_line_panics() {
    let leaves = leaves();
    assert!(
        leaves.len() > 20,
        "the walk found {} subcommands",
        leaves.len()
    );
    let mut rng = Rng(0x6b64_6961_6721_2025);
    let mut failures = Vec::new();
    let mut parsed = 0usize;
    let iterations = 20_000;
    for _ in 0..iterations {
        let leaf = rng.pick(&leaves);
        let mut argv: Vec<OsString> = vec!["kdiag".into()];
        argv.extend(leaf.path.iter().map(OsString::from));
        for _ in 0..rng.below(7) {
            match rng.below(10) {
                // An option with a hostile value.
                0..=4 if !leaf.flags.is_empty() => {
                    argv.push(rng.pick(&leaf.flags).into());
                    argv.push((*rng.pick(HOSTILE)).into());
                }
                // An option alone.
                5 if !leaf.flags.is_empty() => argv.push(rng.pick(&leaf.flags).into()),
                // A value the option knows.
                6 if !leaf.known.is_empty() => argv.push(rng.pick(&leaf.known).into()),
                // A long string.
                7 => argv.push("9".repeat(rng.below(5000)).into()),
                // After --, a command.
                8 => {
                    argv.push("--".into());
                    argv.push("true".into());
                }
                _ => argv.push((*rng.pick(HOSTILE)).into()),
            }
        }
        match exercise(&argv) {
            Ok(true) => parsed += 1,
            Ok(false) => {}
            Err(msg) => failures.push(format!("{argv:?}: {msg}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} panics, e.g.:\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
    // The generator reaches past the parser often enough to matter.
    assert!(
        parsed > iterations / 20,
        "only {parsed} of {iterations} command lines parsed"
    );
    eprintln!("{iterations} command lines, {parsed} parsed and validated, no panic");
}

/// The values that used to panic or be accepted, each refused with its
/// range, through the binary.
#[test]
fn known_bad_values_are_refused_with_their_range() {
    let kdiag = env!("CARGO_BIN_EXE_kdiag");
    for (args, want) in [
        (
            &["diagnose", "-d", "1e300", "-p", "1"][..],
            "is not a number of seconds",
        ),
        (
            &["profile", "-d", "1e300", "-a"][..],
            "is not a number of seconds",
        ),
        (
            &["iosnoop", "-d", "1e300"][..],
            "is not a number of seconds",
        ),
        (&["iosnoop", "1e300"][..], "is not a number of seconds"),
        (
            &["execsnoop", "-d", "1e300"][..],
            "is not a number of seconds",
        ),
        (&["execsnoop", "1e300"][..], "is not a number of seconds"),
        (
            &["profile", "-F", "1000000", "-a"][..],
            "kernel.perf_event_max_sample_rate",
        ),
        (&["profile", "-F", "0", "-a"][..], "at least 1 Hz"),
        (&["iosnoop", "-i", "garbage!!"][..], "not an rwbs pattern"),
        (&["diagnose", "-p", "0"][..], "kernel.pid_max"),
        (&["top", "--interval", "0"][..], "from 0.1 to 3600"),
        (
            &["diagnose", "-d", "700000", "-p", "1"][..],
            "from 0.001 to 604800",
        ),
        (
            &["check", "0-demo", "--max-input", "1P"][..],
            "is not a size",
        ),
        (
            &["check", "0-demo", "--max-input", "2T"][..],
            "is not a size",
        ),
    ] {
        let out = std::process::Command::new(kdiag)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // -d is a duration everywhere; iosnoop's device is --device.
    let out = std::process::Command::new(kdiag)
        .args(["iosnoop", "-d", "vda"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a number of seconds"));
}
