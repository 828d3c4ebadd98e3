//! exec-trace and execsnoop, really tracing (root), on both tiers: every
//! bad-elf defect, a script with a missing interpreter, a real binary, and
//! execsnoop seeing a known exec and a failed one.

mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

const TIERS: [&str; 2] = ["bpf", "perf"];

/// The generator's ground truth for a defect (`bad-elf --describe`).
fn describe(defect: &str) -> Value {
    let out = Command::new(workload("bad-elf"))
        .args(["--describe", defect])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["expect"].clone()
}

/// `kdiag exec-trace --json --tier TIER -- cmd...`, parsed.
fn trace(tier: &str, cmd: &[&str]) -> Value {
    let mut args = vec!["exec-trace", "--json", "--tier", tier, "--"];
    args.extend_from_slice(cmd);
    let out = run_kdiag(&args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exec-trace {cmd:?} failed: {}",
        stderr(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(&out)));
    assert_eq!(v["tier"], tier, "{v}");
    v
}

fn events<'a>(v: &'a Value, kind: &str) -> Vec<&'a Value> {
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == kind)
        .collect()
}

fn stack_names(signal: &Value) -> Vec<String> {
    signal["kernel_stack"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["symbol"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn every_bad_elf_defect_is_traced_and_explained() {
    if !require_root("every_bad_elf_defect_is_traced_and_explained") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for &defect in BAD_ELF_DEFECTS {
        let truth = describe(defect);
        let file = dir.path().join(defect);
        let made = Command::new(workload("bad-elf"))
            .args([defect, "-o"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(made.status.success());
        let path = file.to_str().unwrap();
        for tier in TIERS {
            let what = format!("{defect} ({tier})");
            let v = trace(tier, &[path]);
            let pid = v["pid"].as_u64().unwrap();
            let execs = events(&v, "exec");
            assert_eq!(execs.len(), 1, "{what}: one exec expected: {v:#}");
            let exec = execs[0];
            assert_eq!(exec["pid"].as_u64(), Some(pid), "{what}");
            assert_eq!(exec["filename"], path, "{what}");
            assert_eq!(exec["errno"], truth["errno"], "{what}: errno: {v:#}");

            // The fatal signal, if the ground truth has one.
            let signals: Vec<&Value> = events(&v, "signal")
                .into_iter()
                .filter(|s| s["pid"].as_u64() == Some(pid) && s["sig_name"] == "SIGSEGV")
                .collect();
            let finding = &v["findings"][0];
            match truth["si_code"].as_str() {
                Some(code) => {
                    assert_eq!(signals.len(), 1, "{what}: one SIGSEGV expected: {v:#}");
                    let s = signals[0];
                    assert_eq!(s["code_name"], code, "{what}");
                    let stack = stack_names(s);
                    if code == "SI_KERNEL" {
                        for f in ["force_fatal_sig", "bprm_execve"] {
                            assert!(stack.iter().any(|n| n == f), "{what}: {f} in {stack:?}");
                        }
                        assert_eq!(finding["family"], "after-point-of-no-return", "{what}");
                        assert_eq!(finding["sender"], "force_fatal_sig", "{what}");
                        assert_eq!(finding["called_from"], "bprm_execve", "{what}");
                    } else {
                        assert!(
                            stack.iter().any(|n| n == "force_sig_fault"),
                            "{what}: force_sig_fault in {stack:?}"
                        );
                        assert_eq!(finding["family"], "user-crash", "{what}");
                        if tier == "bpf" {
                            assert!(s["addr"].as_u64().is_some_and(|a| a > 0), "{what}: {s}");
                        }
                    }
                    let end = events(&v, "exit");
                    assert!(
                        end.iter().any(|e| e["pid"].as_u64() == Some(pid)
                            && e["exit"]["how"] == "signal"
                            && e["exit"]["name"] == "SIGSEGV"),
                        "{what}: killed by SIGSEGV: {v:#}"
                    );
                }
                None => assert!(signals.is_empty(), "{what}: no SIGSEGV expected: {v:#}"),
            }

            // elf-check's rule is the stated cause.
            let text = finding["text"].as_str().unwrap();
            if let Some(errno) = truth["errno"].as_str() {
                assert!(text.contains(errno), "{what}: {text}");
            }
            if truth["rule"].is_string() {
                assert!(
                    finding["cause"].is_string(),
                    "{what}: elf-check cause: {text}"
                );
            }
            match defect {
                "congruence" => assert!(
                    text.contains("not congruent modulo the page size"),
                    "{text}"
                ),
                "bad-interp" => assert_eq!(finding["family"], "missing-interpreter", "{what}"),
                "bad-magic" => {
                    assert_eq!(finding["family"], "format-error", "{what}");
                    assert!(text.contains("before the point of no return"), "{text}");
                }
                "good" => {
                    assert_eq!(finding["family"], "success", "{what}");
                    assert!(text.contains("exited with code 0"), "{text}");
                }
                _ => {}
            }
            // The point of no return is reported where the kernel has it.
            let passed = truth["stage"] != "before-point-of-no-return";
            if Path::new("/sys/kernel/tracing/events/sched/sched_prepare_exec").exists() {
                assert_eq!(
                    !events(&v, "prepare-exec").is_empty(),
                    passed,
                    "{what}: sched_prepare_exec: {v:#}"
                );
            }
            // Events in kernel time order: execve's return comes after
            // everything that happened during the call (the point of no
            // return, the signal the kernel generated).
            let all = v["events"].as_array().unwrap();
            let times: Vec<u64> = all.iter().map(|e| e["time_ns"].as_u64().unwrap()).collect();
            assert!(times.is_sorted(), "{what}: not in time order: {v:#}");
            let at = |kind: &str| all.iter().position(|e| e["event"] == kind);
            if let (Some(p), Some(x)) = (at("prepare-exec"), at("exec")) {
                assert!(
                    p < x,
                    "{what}: execve's return before the point of no return: {v:#}"
                );
            }
        }
    }
}

#[test]
fn script_with_a_missing_interpreter_is_explained() {
    if !require_root("script_with_a_missing_interpreter_is_explained") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.sh");
    std::fs::write(&script, "#!/nonexistent/kdiag-sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    for tier in TIERS {
        let v = trace(tier, &[script.to_str().unwrap()]);
        let f = &v["findings"][0];
        assert_eq!(f["errno"], "ENOENT", "{tier}: {v:#}");
        assert_eq!(f["family"], "missing-interpreter", "{tier}: {v:#}");
        let text = f["text"].as_str().unwrap();
        assert!(text.contains("/nonexistent/kdiag-sh"), "{tier}: {text}");
    }
}

#[test]
fn a_real_binary_runs_clean() {
    if !require_root("a_real_binary_runs_clean") {
        return;
    }
    for tier in TIERS {
        let out = run_kdiag(&["exec-trace", "--tier", tier, "--", "/bin/true"]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{tier}: {text}{}", stderr(&out));
        assert!(text.contains("execve(\"/bin/true\""), "{tier}: {text}");
        assert!(
            text.contains("execve(\"/bin/true\") succeeded and the program exited with code 0."),
            "{tier}: {text}"
        );
    }
}

#[test]
fn usage_errors() {
    let out = run_kdiag(&["exec-trace", "-p", "1", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    if !require_root("usage_errors") {
        return;
    }
    let gone = free_pid();
    let out = run_kdiag(&["exec-trace", "-p", &gone]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("no process with PID {gone}")),
        "{}",
        stderr(&out)
    );
}

/// Start execsnoop, wait until it traces, run `act`, return its JSON.
fn snoop(tier: &str, act: impl FnOnce()) -> Vec<Value> {
    let mut child = kdiag()
        .args(["execsnoop", "-x", "--json", "--tier", tier, "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "execsnoop ended early"
        );
        if line.starts_with("tracing execs") {
            break;
        }
    }
    act();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

#[test]
fn execsnoop_sees_a_known_exec_and_a_failed_one() {
    if !require_root("execsnoop_sees_a_known_exec_and_a_failed_one") {
        return;
    }
    for tier in TIERS {
        let marker = format!("0.{}", std::process::id());
        let missing = format!("/nonexistent/kdiag-{}", std::process::id());
        let mut shell = 0;
        let execs = snoop(tier, || {
            Command::new("/bin/sleep").arg(&marker).status().unwrap();
            // The shell's own execve of a missing path: its pid is known.
            let mut sh = Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("exec {missing}"))
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            shell = sh.id();
            assert!(!sh.wait().unwrap().success());
        });
        assert!(
            execs
                .iter()
                .any(|e| e["ret"] == 0 && e["argv"] == serde_json::json!(["/bin/sleep", marker])),
            "{tier}: sleep {marker} not seen in {execs:#?}"
        );
        let failed = execs
            .iter()
            .find(|e| e["pid"].as_u64() == Some(shell as u64) && e["ret"] != 0);
        let failed = failed.unwrap_or_else(|| panic!("{tier}: failed exec not seen in {execs:#?}"));
        assert_eq!(failed["ret"], -2, "{tier}");
        assert_eq!(failed["errno"], "ENOENT", "{tier}");
        if tier == "bpf" {
            assert_eq!(failed["filename"], missing.as_str());
        }
    }
}

#[test]
fn watches_a_running_process_and_its_children() {
    if !require_root("watches_a_running_process_and_its_children") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad");
    let made = Command::new(workload("bad-elf"))
        .arg("-o")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(made.status.success());
    for tier in TIERS {
        // The shell waits for a line, runs a child, then execs the bad ELF.
        let mut sh = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("read go; /bin/true; exec {}", bad.display()))
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = sh.id();
        let mut trace = kdiag()
            .args([
                "exec-trace",
                "--json",
                "--tier",
                tier,
                "-p",
                &pid.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(trace.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.contains("watching pid"), "{tier}: {line}");
        use std::io::Write;
        sh.stdin.take().unwrap().write_all(b"go\n").unwrap();
        sh.wait().unwrap();
        let out = trace.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{tier}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let execs = events(&v, "exec");
        let child = execs
            .iter()
            .find(|e| e["pid"].as_u64() != Some(pid as u64))
            .unwrap_or_else(|| panic!("{tier}: the child's exec: {v:#}"));
        assert_eq!(child["ret"], 0, "{tier}");
        assert_eq!(child["filename"], "/bin/true", "{tier}");
        let own = execs
            .iter()
            .find(|e| e["pid"].as_u64() == Some(pid as u64))
            .unwrap_or_else(|| panic!("{tier}: the shell's exec: {v:#}"));
        assert_eq!(own["errno"], "EINVAL", "{tier}");
        let f = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["pid"].as_u64() == Some(pid as u64))
            .unwrap();
        assert_eq!(f["family"], "after-point-of-no-return", "{tier}: {f}");
        assert_eq!(f["sender"], "force_fatal_sig", "{tier}: {f}");
    }
}

#[test]
fn runs_the_command_as_the_sudo_invoker() {
    if !require_root("runs_the_command_as_the_sudo_invoker") {
        return;
    }
    // The invoker's own groups: not the supplementary group of root's that
    // kdiag is given here.
    let want = String::from_utf8(
        Command::new("id")
            .args(["-G", "65534"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let script = format!(
        "test $(id -u) = 65534 && test \"$(id -G)\" = '{}'",
        want.trim()
    );
    let mut cmd = kdiag();
    cmd.env("SUDO_UID", "65534").env("SUDO_GID", "65534").args([
        "exec-trace",
        "--json",
        "--",
        "/bin/sh",
        "-c",
        &script,
    ]);
    with_root_groups(&mut cmd);
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let root = &v["findings"][0];
    assert_eq!(root["family"], "success", "{v:#}");
    assert!(
        root["text"]
            .as_str()
            .unwrap()
            .contains("exited with code 0"),
        "{root}"
    );
    assert_eq!(events(&v, "exec")[0]["uid"], 65534, "{v:#}");
}

#[test]
fn execsnoop_stops_cleanly_on_ctrl_c() {
    if !require_root("execsnoop_stops_cleanly_on_ctrl_c") {
        return;
    }
    let mut child = kdiag()
        .args(["execsnoop", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("tracing execs") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "execsnoop ended early"
        );
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("JSON after Ctrl-C");
}

#[test]
fn errno_families_before_the_point_of_no_return() {
    if !require_root("errno_families_before_the_point_of_no_return") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // No execute bit: EACCES.
    let plain = dir.path().join("plain");
    std::fs::copy("/bin/true", &plain).unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Open for writing while exec'd: ETXTBSY.
    let busy = dir.path().join("busy");
    std::fs::copy("/bin/true", &busy).unwrap();
    let _writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&busy)
        .unwrap();
    // A shell builds one argument over MAX_ARG_STRLEN (128 KiB): E2BIG.
    let huge = "exec /bin/true $(head -c 200000 /dev/zero | tr '\\0' a)";
    let cases: [(&[&str], &str, &str); 3] = [
        (&[plain.to_str().unwrap()], "EACCES", "permission"),
        (&[busy.to_str().unwrap()], "ETXTBSY", "text-busy"),
        (&["/bin/sh", "-c", huge], "E2BIG", "too-big"),
    ];
    for tier in TIERS {
        for (cmd, errno, family) in cases {
            let v = trace(tier, cmd);
            let f = v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["errno"] == errno)
                .unwrap_or_else(|| panic!("{tier}: no {errno}: {v:#}"));
            assert_eq!(f["family"], family, "{tier}: {}", f);
            assert!(f["signal"].is_null(), "{tier}: no signal expected: {f}");
            assert!(
                f["text"]
                    .as_str()
                    .unwrap()
                    .contains("before the point of no return"),
                "{tier}: {f}"
            );
        }
    }
}
