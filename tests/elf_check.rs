//! `kdiag elf-check` against files the bad-elf workload generates, and
//! against the kernel: every file is really executed (std::process::Command
//! and a small ptrace tracer that sees execve's return value) and must do
//! exactly what elf-check predicted.

mod common;
use common::*;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const DEFECTS: &[&str] = BAD_ELF_DEFECTS;

fn bad_elf(args: &[&str]) -> std::process::Output {
    Command::new(workload("bad-elf"))
        .args(args)
        .output()
        .expect("bad-elf runs")
}

/// Generate `defect` with `seed` into `dir`; returns the path and the
/// ground truth from --describe.
fn generate(dir: &Path, defect: &str, seed: &str) -> (PathBuf, Value) {
    let path = dir.join(format!("{defect}-{seed}"));
    let out = bad_elf(&[defect, "--seed", seed, "-o", path.to_str().unwrap()]);
    assert!(out.status.success(), "bad-elf {defect}: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), path.to_str().unwrap());
    let out = bad_elf(&[defect, "--seed", seed, "--describe"]);
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("--describe is JSON");
    (path, doc["expect"].clone())
}

fn elf_check_json(path: &Path) -> (Option<i32>, Value) {
    let out = run_kdiag(&["elf-check", "--json", path.to_str().unwrap()]);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("elf-check --json {}: {e}\n{}", path.display(), stderr(&out)));
    (out.status.code(), report)
}

fn errno_number(name: &str) -> i32 {
    match name {
        "EINVAL" => libc::EINVAL,
        "ENOMEM" => libc::ENOMEM,
        "ENOENT" => libc::ENOENT,
        "ENOEXEC" => libc::ENOEXEC,
        "EACCES" => libc::EACCES,
        "EPERM" => libc::EPERM,
        "EIO" => libc::EIO,
        "ELIBBAD" => libc::ELIBBAD,
        "EFAULT" => libc::EFAULT,
        other => panic!("unknown errno {other}"),
    }
}

/// What a traced exec did.
#[derive(Debug)]
struct Traced {
    /// execve's return value (0 or -errno), from its syscall-exit stop.
    execve: Option<i64>,
    /// Signals seen at signal-delivery stops: (signo, si_code, si_addr).
    signals: Vec<(i32, i32, u64)>,
    /// Exit code, or the killing signal as a negative number.
    end: i32,
}

/// Run `path` under a minimal ptrace tracer (x86-64 syscall numbers).
fn trace_exec(path: &Path) -> Traced {
    let cpath = CString::new(path.as_os_str().as_bytes()).unwrap();
    let argv = [cpath.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null()];
    // SAFETY: the child only makes async-signal-safe calls before execve.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            libc::execve(cpath.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    let wait = || {
        let mut status = 0;
        // SAFETY: plain waitpid on our child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        assert_eq!(r, pid, "waitpid");
        status
    };
    let status = wait();
    assert!(libc::WIFSTOPPED(status));
    unsafe {
        libc::ptrace(
            libc::PTRACE_SETOPTIONS,
            pid,
            0,
            libc::PTRACE_O_TRACESYSGOOD | libc::PTRACE_O_EXITKILL,
        );
    }
    let mut t = Traced {
        execve: None,
        signals: vec![],
        end: 0,
    };
    let mut entering = true;
    let mut deliver = 0;
    loop {
        unsafe { libc::ptrace(libc::PTRACE_SYSCALL, pid, 0, deliver) };
        deliver = 0;
        let status = wait();
        if libc::WIFEXITED(status) {
            t.end = libc::WEXITSTATUS(status);
            break;
        }
        if libc::WIFSIGNALED(status) {
            t.end = -libc::WTERMSIG(status);
            break;
        }
        let sig = libc::WSTOPSIG(status);
        if sig == libc::SIGTRAP | 0x80 {
            let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
            unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs) };
            if regs.orig_rax == libc::SYS_execve as u64 {
                if !entering && t.execve.is_none() {
                    t.execve = Some(regs.rax as i64);
                }
                entering = !entering;
            }
        } else if sig == libc::SIGTRAP {
            // The legacy SIGTRAP after a successful execve: swallow it.
        } else {
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, pid, 0, &mut info) };
            let addr = unsafe { info.si_addr() } as u64;
            t.signals.push((info.si_signo, info.si_code, addr));
            deliver = sig;
        }
    }
    t
}

/// Generated file, elf-check and the kernel agree, for every defect and a
/// few seeds (which move the broken header among indices 1 to 4).
#[test]
fn every_defect_is_named_and_behaves_as_predicted() {
    let dir = tempfile::tempdir().unwrap();
    for defect in DEFECTS {
        for seed in ["0", "1", "7", "alice", "s3", "s5"] {
            let (path, truth) = generate(dir.path(), defect, seed);
            let ctx = format!("{defect} seed {seed}");
            assert!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o111 != 0);

            // elf-check names the ground truth's rule, program header and errno.
            let (code, report) = elf_check_json(&path);
            let decisive = report["problems"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["decisive"] == true);
            if *defect == "good" {
                assert_eq!(code, Some(0), "{ctx}: {report}");
                assert!(decisive.is_none(), "{ctx}");
            } else {
                assert_eq!(code, Some(1), "{ctx}");
                let d = decisive.unwrap_or_else(|| panic!("{ctx}: no decisive problem: {report}"));
                assert_eq!(d["rule"], truth["rule"], "{ctx}");
                assert_eq!(d["phdr"], truth["phdr"], "{ctx}");
                assert_eq!(d["errno"], truth["errno"], "{ctx}");
                assert_eq!(d["stage"], truth["stage"], "{ctx}");
                assert_eq!(d["si_code"], truth["si_code"], "{ctx}");
            }

            // The kernel agrees: first through std::process::Command ...
            let errno = truth["errno"].as_str();
            let stage = truth["stage"].as_str().unwrap();
            match Command::new(&path).status() {
                Err(e) => {
                    assert_eq!(
                        stage, "before-point-of-no-return",
                        "{ctx}: spawn failed: {e}"
                    );
                    assert_eq!(e.raw_os_error(), errno.map(errno_number), "{ctx}: {e}");
                }
                Ok(status) => match stage {
                    "none" => assert_eq!(status.code(), Some(0), "{ctx}"),
                    _ => assert_eq!(status.signal(), Some(libc::SIGSEGV), "{ctx}: {status}"),
                },
            }

            // ... then under ptrace, which sees execve's own return value.
            let t = trace_exec(&path);
            let want_ret = errno.map_or(0, |e| -i64::from(errno_number(e)));
            assert_eq!(t.execve, Some(want_ret), "{ctx}: {t:?}");
            match stage {
                "before-point-of-no-return" => {
                    // execve returned to our child, which exited 127.
                    assert_eq!(t.end, 127, "{ctx}: {t:?}");
                    assert!(t.signals.is_empty(), "{ctx}: {t:?}");
                }
                "after-point-of-no-return" => {
                    assert_eq!(t.end, -libc::SIGSEGV, "{ctx}: {t:?}");
                    // Under ptrace the forced signal is seen at its delivery
                    // stop: SIGSEGV, si_code SI_KERNEL, no address.
                    assert_eq!(
                        t.signals,
                        vec![(libc::SIGSEGV, libc::SI_KERNEL, 0)],
                        "{ctx}"
                    );
                }
                "after-exec" => {
                    assert_eq!(t.end, -libc::SIGSEGV, "{ctx}: {t:?}");
                    let entry = u64::from_str_radix(
                        truth["entry"].as_str().unwrap().trim_start_matches("0x"),
                        16,
                    )
                    .unwrap();
                    // SEGV_MAPERR is 1, at the entry point.
                    assert_eq!(t.signals, vec![(libc::SIGSEGV, 1, entry)], "{ctx}");
                }
                "none" => assert_eq!(t.end, 0, "{ctx}: {t:?}"),
                other => panic!("{ctx}: unknown stage {other}"),
            }
        }
    }
}

#[test]
fn generator_is_deterministic_and_the_seed_moves_things() {
    let make = |seed: &str| {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        assert!(
            bad_elf(&["congruence", "--seed", seed, "-o", p.to_str().unwrap()])
                .status
                .success()
        );
        std::fs::read(&p).unwrap()
    };
    assert_eq!(make("5"), make("5"));
    assert_ne!(make("5"), make("6"));
    // Default defect and default path: ./bad-elf-congruence.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(workload("bad-elf"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out).trim(), "./bad-elf-congruence");
    assert_eq!(
        std::fs::read(dir.path().join("bad-elf-congruence")).unwrap(),
        make("0")
    );
    let out = bad_elf(&["no-such-defect"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown defect"));
}

/// Without a DEFECT, a seed picks one of the lab's family and the file's
/// default name does not give it away.
#[test]
fn a_seed_picks_the_defect_and_the_broken_header() {
    let mut picked = std::collections::BTreeSet::new();
    let mut headers = std::collections::BTreeSet::new();
    for seed in ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(workload("bad-elf"))
            .args(["--seed", seed])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "./bad_elf");
        let out = bad_elf(&["--seed", seed, "--describe"]);
        let truth: Value = serde_json::from_slice::<Value>(&out.stdout).unwrap()["expect"].clone();
        let defect = truth["defect"].as_str().unwrap().to_string();
        assert!(
            ["congruence", "filesz-gt-memsz", "huge-memsz"].contains(&defect.as_str()),
            "{defect}"
        );
        // The same file as naming that defect.
        let (named, _) = generate(dir.path(), &defect, seed);
        assert_eq!(
            std::fs::read(dir.path().join("bad_elf")).unwrap(),
            std::fs::read(named).unwrap()
        );
        let (code, report) = elf_check_json(&dir.path().join("bad_elf"));
        assert_eq!(code, Some(1));
        let decisive = report["problems"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["decisive"] == true)
            .cloned()
            .unwrap();
        assert_eq!(decisive["phdr"], truth["phdr"], "{seed}");
        picked.insert(defect);
        headers.insert(truth["phdr"].as_u64().unwrap());
    }
    assert!(
        picked.len() >= 2,
        "seeds pick different defects: {picked:?}"
    );
    assert!(
        headers.len() >= 2,
        "seeds move the broken header: {headers:?}"
    );
}

/// The lab's point: readelf finds nothing wrong with the congruence case.
#[test]
fn readelf_accepts_the_congruence_case() {
    let dir = tempfile::tempdir().unwrap();
    for seed in ["0", "3", "alice"] {
        let (path, _) = generate(dir.path(), "congruence", seed);
        let out = Command::new("readelf")
            .args(["-lW", path.to_str().unwrap()])
            .output()
            .expect("readelf (binutils) is installed");
        assert!(out.status.success());
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!all.to_lowercase().contains("warning"), "{all}");
        assert!(all.contains("LOAD"), "{all}");
    }
}

#[test]
fn text_report_shows_header_numbers_rule_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = generate(dir.path(), "congruence", "0");
    let out = run_kdiag(&["elf-check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    for want in [
        "ERROR load-congruence (program header 1)",
        "p_offset 0x160",
        "p_vaddr 0x401000",
        "p_align 0x20",
        "congruent values for p_vaddr and p_offset, modulo the page size",
        "EINVAL after the point of no return",
        "SIGSEGV (si_code SI_KERNEL",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn real_system_binaries_are_clean() {
    for bin in ["/bin/ls", "/bin/true"] {
        let (code, report) = elf_check_json(Path::new(bin));
        assert_eq!(code, Some(0), "{bin}: {report}");
        assert_eq!(report["problems"].as_array().unwrap().len(), 0, "{bin}");
        assert!(report["program_headers"].as_array().unwrap().len() > 2);
        assert!(report["interpreter"].as_str().unwrap().contains("ld-linux"));
    }
}

#[test]
fn script_with_missing_interpreter_explains_enoent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script");
    std::fs::write(&path, "#!/nonexistent/interp\necho hi\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, report) = elf_check_json(&path);
    assert_eq!(code, Some(1));
    assert_eq!(report["kind"]["kind"], "script");
    assert_eq!(report["kind"]["interpreter"], "/nonexistent/interp");
    let p = &report["problems"][0];
    assert_eq!(
        (p["rule"].as_str(), p["errno"].as_str()),
        (Some("script-interpreter"), Some("ENOENT"))
    );
    assert!(p["message"].as_str().unwrap().contains("does not exist"));
    let err = Command::new(&path).status().expect_err("exec fails");
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    // A script whose interpreter exists is fine.
    std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
    assert_eq!(elf_check_json(&path).0, Some(0));
}

#[test]
fn garbage_and_truncated_files_give_clear_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (good, _) = generate(dir.path(), "good", "0");
    let bytes = std::fs::read(&good).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "not-elf"),
        ("three", b"\x7fEL".to_vec(), "not-elf"),
        ("header-cut", bytes[..40].to_vec(), "header-truncated"),
        ("phdrs-cut", bytes[..100].to_vec(), "phdrs-beyond-eof"),
        (
            "garbage",
            (0..4096u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
            "not-elf",
        ),
    ];
    for (name, content, rule) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (code, report) = elf_check_json(&path);
        assert_eq!(code, Some(1), "{name}");
        assert_eq!(report["problems"][0]["rule"], rule, "{name}: {report}");
        assert_eq!(report["problems"][0]["errno"], "ENOEXEC", "{name}");
        // And the kernel agrees.
        let err = Command::new(&path).status().expect_err(name);
        assert_eq!(err.raw_os_error(), Some(libc::ENOEXEC), "{name}");
    }
    // Unreadable targets are errors with a message, not reports.
    let out = run_kdiag(&["elf-check", "/nonexistent/file"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/nonexistent/file: no such file or directory"),
        "{}",
        stderr(&out)
    );
    let out = run_kdiag(&["elf-check", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );
    // A file without execute permission: EACCES.
    let path = dir.path().join("noexec");
    std::fs::write(&path, &bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, report) = elf_check_json(&path);
    assert_eq!(code, Some(1));
    assert_eq!(report["problems"][0]["errno"], "EACCES");
    let err = Command::new(&path).status().expect_err("noexec");
    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
}

/// Run kdiag with `args` and return its output and peak RSS in KiB (from
/// wait4, so the measurement is the kernel's).
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which clippy cannot see
fn kdiag_with_rss(args: &[&str]) -> (std::process::Output, i64) {
    use std::io::Read;
    let mut child = kdiag()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data; the pid is our unreaped child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(rc, child.id() as i32);
    let output = std::process::Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: out,
        stderr: err,
    };
    (output, ru.ru_maxrss)
}

/// A 2 GiB (sparse) program costs elf-check no more memory than a small
/// one: it reads the headers, the program header table and the interpreter
/// path, wherever they are, and nothing else.
#[test]
fn huge_files_are_read_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::read("/bin/true").unwrap();
    // /bin/true padded to 2 GiB: same report as the original.
    let padded = dir.path().join("true-2g");
    std::fs::write(&padded, &real).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&padded)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    std::fs::set_permissions(&padded, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, rss_kib) = kdiag_with_rss(&["elf-check", "--json", padded.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["interpreter"], "/lib64/ld-linux-x86-64.so.2");
    assert!(
        rss_kib < 64 * 1024,
        "elf-check used {rss_kib} KiB for 2 GiB"
    );
    // The program header table and the interpreter path near the end of
    // a 2 GiB file: found there, still in little memory.
    let far = dir.path().join("far-2g");
    let size: u64 = 2 << 30;
    let phoff = size - 4096;
    let interp_off = phoff + 2 * 56;
    let mut head = real[..64].to_vec();
    head[32..40].copy_from_slice(&phoff.to_le_bytes());
    head[56..58].copy_from_slice(&2u16.to_le_bytes());
    let mut table = Vec::new();
    for (p_type, flags, off, filesz) in [(3u32, 4u32, interp_off, 28u64), (1, 5, 0, 4096)] {
        table.extend_from_slice(&p_type.to_le_bytes());
        table.extend_from_slice(&flags.to_le_bytes());
        for v in [off, 0, 0, filesz, filesz, 4096] {
            table.extend_from_slice(&v.to_le_bytes());
        }
    }
    table.extend_from_slice(b"/lib64/ld-linux-x86-64.so.2\0");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(&far).unwrap();
        f.set_len(size).unwrap();
        f.write_all_at(&head, 0).unwrap();
        f.write_all_at(&table, phoff).unwrap();
    }
    std::fs::set_permissions(&far, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, rss_kib) = kdiag_with_rss(&["elf-check", "--json", far.to_str().unwrap()]);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(
        report["interpreter"], "/lib64/ld-linux-x86-64.so.2",
        "{report}"
    );
    assert_eq!(report["program_headers"].as_array().unwrap().len(), 2);
    assert!(
        rss_kib < 64 * 1024,
        "elf-check used {rss_kib} KiB for 2 GiB"
    );
    // Every truncation of a real program gives a report, never a crash.
    let cut = dir.path().join("cut");
    for len in (0..real.len().min(8192)).step_by(61) {
        std::fs::write(&cut, &real[..len]).unwrap();
        let out = run_kdiag(&["elf-check", "--json", cut.to_str().unwrap()]);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{len}: {}",
            stderr(&out)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap();
    }
}
