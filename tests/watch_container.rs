//! `kdiag watch --container NAME`: a container's cgroup as its runtime
//! names it (`docker-<64 hex>.scope`), made inside a cgroup of the test's
//! own beside a cgroup that is no container's, with a workload moved in:
//! watch follows the container's processes (and only them) through a
//! restart that re-creates its cgroup; a name no cgroup has is a usage
//! error that lists the containers there are, on the command line and in
//! a --config file. Every process is killed by a guard; every wait has a
//! deadline.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::watch::{Guard, OwnCg, log_lines, within};
use common::{kdiag, require_root};

/// A container id of the test's own (64 hex digits).
fn fake_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:032x}{:032x}", std::process::id(), nanos as u64)
}

/// A cgroup named as Docker's systemd driver names a container's, inside
/// `parent` (a cgroup of the test's own); removed, emptied, on drop.
fn container_in(parent: &OwnCg, id: &str) -> OwnCg {
    let name = parent.path.trim_start_matches('/');
    OwnCg::named("cpu", &format!("{name}/docker-{id}.scope"))
}

/// A shell in `cg` named `name` (its comm, the group it is watched as)
/// that sleeps until killed; returned once it has its name.
fn named_sleeper(cg: &OwnCg, name: &str) -> Guard {
    let shell = Guard(cg.spawn(&format!(
        "printf {name} > /proc/self/comm; while :; do sleep 1; done"
    )));
    let comm = format!("/proc/{}/comm", shell.0.id());
    within(Duration::from_secs(5), "the shell's name", || {
        (std::fs::read_to_string(&comm).ok()?.trim() == name).then_some(())
    });
    shell
}

/// The groups kdiag.prom has processes for.
fn groups(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("kdiag_group_processes{group=\""))
        .filter_map(|l| l.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_container_by_its_id_is_watched_through_a_restart() {
    if !require_root("a_container_by_its_id_is_watched_through_a_restart") {
        return;
    }
    let id = fake_id();
    let parent = OwnCg::new("cpu");
    let _outsider = named_sleeper(&parent, "kdt-outsider");
    let container = container_in(&parent, &id);
    let first = named_sleeper(&container, "kdt-first");
    let dir = tempfile::tempdir().unwrap();
    let mut watch = Guard(
        kdiag()
            .args(["watch", "--interval", "1", "--container", &id[..12]])
            .arg("--textfile")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let prom = dir.path().join("kdiag.prom");
    let text = within(Duration::from_secs(20), "the container's process", || {
        let text = std::fs::read_to_string(&prom).ok()?;
        groups(&text)
            .contains(&"kdt-first".to_string())
            .then_some(text)
    });
    // The container's processes only: its shell and its sleeps.
    for g in groups(&text) {
        assert!(matches!(g.as_str(), "kdt-first" | "sleep"), "{g}:\n{text}");
    }

    // A restart: the processes killed, the cgroup removed and made again,
    // a new process in it. Watch goes on through the gap and finds it.
    drop(first);
    drop(container);
    let container = container_in(&parent, &id);
    let _second = named_sleeper(&container, "kdt-second");
    let text = within(Duration::from_secs(20), "the restarted container", || {
        let text = std::fs::read_to_string(&prom).ok()?;
        groups(&text)
            .contains(&"kdt-second".to_string())
            .then_some(text)
    });
    assert!(
        !groups(&text).contains(&"kdt-outsider".to_string()),
        "{text}"
    );
    assert!(watch.0.try_wait().unwrap().is_none(), "watch ended");
}

#[test]
fn a_container_of_no_cgroup_is_a_usage_error_naming_those_there_are() {
    if !require_root("a_container_of_no_cgroup_is_a_usage_error_naming_those_there_are") {
        return;
    }
    let id = fake_id();
    let parent = OwnCg::new("cpu");
    let _container = container_in(&parent, &id);
    let listed = format!("Docker container {}", &id[..12]);
    // A name no cgroup has, and a prefix too short to be an id's.
    for name in ["kdt-no-such-container", &id[..8]] {
        let out = kdiag()
            .args(["watch", "--container", name, "--duration", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!(
                "--container {name}: no container or pod of that name"
            )),
            "{err}"
        );
        assert!(err.contains(&listed), "{err}");
    }
    // In a configuration file, the same.
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(conf.path(), "container = \"kdt-no-such-container\"\n").unwrap();
    let out = kdiag()
        .args(["watch", "--duration", "1", "--config"])
        .arg(conf.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&listed), "{err}");
    // And the container's own name in the file is watched.
    std::fs::write(conf.path(), format!("container = \"{id}\"\n")).unwrap();
    let out = kdiag()
        .args(["watch", "--duration", "1", "--config"])
        .arg(conf.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With a configuration file, a SIGHUP while the container is between two
/// cgroups (restarting) and the new file names no container: the file is
/// refused, watch goes on with the container it had, and follows it into
/// its new cgroup.
#[test]
fn a_reload_refused_while_the_container_restarts_keeps_watching_it() {
    if !require_root("a_reload_refused_while_the_container_restarts_keeps_watching_it") {
        return;
    }
    let id = fake_id();
    let parent = OwnCg::new("cpu");
    let container = container_in(&parent, &id);
    let first = named_sleeper(&container, "kdt-before");
    let dir = tempfile::tempdir().unwrap();
    let conf = tempfile::NamedTempFile::new().unwrap();
    let good = format!(
        "container = \"{}\"\ninterval = 1\ntextfile = \"{}\"\n",
        &id[..16],
        dir.path().display()
    );
    std::fs::write(conf.path(), &good).unwrap();
    let mut watch = Guard(
        kdiag()
            .args(["watch", "--config"])
            .arg(conf.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let log = log_lines(&mut watch);
    let prom = dir.path().join("kdiag.prom");
    let seen = |name: &str| {
        let name = name.to_string();
        let prom = prom.clone();
        move || {
            let text = std::fs::read_to_string(&prom).ok()?;
            groups(&text).contains(&name).then_some(())
        }
    };
    within(
        Duration::from_secs(20),
        "the container's process",
        seen("kdt-before"),
    );
    drop(first);
    drop(container);
    std::fs::write(conf.path(), "container = \"kdt-no-such-container\"\n").unwrap();
    // SAFETY: kill on the child's own pid.
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGHUP) };
    // The refusal's message, over lines, ends in "going on as before".
    let mut said = String::new();
    within(Duration::from_secs(10), "the refusal", || {
        said.extend(log.try_iter().map(|l| l + "\n"));
        said.contains("going on as before").then_some(())
    });
    assert!(said.contains("--container kdt-no-such-container"), "{said}");
    let container = container_in(&parent, &id);
    let _after = named_sleeper(&container, "kdt-after");
    within(
        Duration::from_secs(20),
        "the restarted container",
        seen("kdt-after"),
    );
    assert!(watch.0.try_wait().unwrap().is_none(), "watch ended");
}
