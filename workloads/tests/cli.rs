//! Every workload binary honours the shared command line: `--describe`
//! prints schema-2 ground truth that changes with `--seed` and is the
//! library's, refuses a course token, `--help` succeeds, an unknown option
//! is a usage error (exit 2).
//!
//! Being an integration test of this package, it also makes
//! `cargo test --workspace` build the workload binaries that kdiag's own
//! tests run.

use std::process::Command;

/// Each workload with the positional arguments it requires.
const WORKLOADS: &[(&str, &[&str])] = &[
    ("io-app", &[]),
    ("scheduling", &["1"]),
    ("memory", &["1", "4096"]),
    ("bio", &[]),
    ("io-stall", &[]),
    ("cpu-burn", &[]),
    ("lock-contend", &[]),
    ("mem-leak", &[]),
    ("bad-elf", &[]),
];

fn run(name: &str, args: &[&str]) -> std::process::Output {
    let exe = match name {
        "io-app" => env!("CARGO_BIN_EXE_io-app"),
        "scheduling" => env!("CARGO_BIN_EXE_scheduling"),
        "memory" => env!("CARGO_BIN_EXE_memory"),
        "bio" => env!("CARGO_BIN_EXE_bio"),
        "io-stall" => env!("CARGO_BIN_EXE_io-stall"),
        "cpu-burn" => env!("CARGO_BIN_EXE_cpu-burn"),
        "lock-contend" => env!("CARGO_BIN_EXE_lock-contend"),
        "mem-leak" => env!("CARGO_BIN_EXE_mem-leak"),
        "bad-elf" => env!("CARGO_BIN_EXE_bad-elf"),
        _ => unreachable!("unknown workload {name}"),
    };
    Command::new(exe).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn describe_prints_ground_truth_that_follows_the_seed() {
    for &(name, required) in WORKLOADS {
        let with = |seed: &'static str| [required, &["--describe", "--seed", seed]].concat();
        let a = run(name, &with("1"));
        assert!(a.status.success(), "{name}: {}", text(&a.stderr));
        let a = text(&a.stdout);
        assert!(a.contains("\"schema\": 2"), "{name}: {a}");
        assert!(a.contains(&format!("\"name\": \"{name}\"")), "{name}: {a}");
        assert!(a.contains("\"expect\""), "{name}: {a}");
        let again = text(&run(name, &with("1")).stdout);
        assert_eq!(a, again, "{name}: --describe is not deterministic");
        let other = text(&run(name, &with("2")).stdout);
        assert_ne!(a, other, "{name}: --seed changes nothing");
        // The binary prints what the library computes in-process.
        let args: Vec<String> = required.iter().map(|s| s.to_string()).collect();
        let lib = kdiag_workloads::describe(name, "1", &args).unwrap();
        assert_eq!(a.trim_end(), lib, "{name}");
    }
}

#[test]
fn describe_refuses_a_course_token() {
    for &(name, required) in WORKLOADS {
        let args = [required, &["--describe", "--seed", "k3m9-x2pq-7vtz"]].concat();
        let out = run(name, &args);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            out.stdout.is_empty(),
            "{name}: printed {}",
            text(&out.stdout)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains(
                "the truth of a course seed is for the instructor: kdiag lab solution --course FILE"
            ),
            "{name}: {err}"
        );
        // The library still describes it (for the grader).
        let args: Vec<String> = required.iter().map(|s| s.to_string()).collect();
        assert!(kdiag_workloads::describe(name, "k3m9-x2pq-7vtz", &args).is_ok());
    }
}

#[test]
fn help_and_usage_errors() {
    for name in WORKLOADS.iter().map(|w| w.0) {
        let help = run(name, &["--help"]);
        assert!(
            help.status.success(),
            "{name} --help: {}",
            text(&help.stderr)
        );
        let bad = run(name, &["--no-such-option"]);
        assert_eq!(bad.status.code(), Some(2), "{name}: {}", text(&bad.stderr));
        assert!(
            !text(&bad.stderr).is_empty(),
            "{name}: usage error without a message"
        );
    }
}
