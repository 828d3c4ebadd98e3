//! Docs show what a reader types, not the machine they were written on:
//! no home directory, worktree, build folder or temporary folder of ours
//! in README.md or docs/ (the binary is `kdiag`; a checkout's relative
//! `target/release/kdiag` after `cargo build` is an instruction), only the documented
//! examples (`/home/you`, the perf map `/tmp/perf-PID.map`, a JVM's
//! `/tmp/hsperfdata_USER/PID` and attach socket `/tmp/.java_pidPID`, kdiag's own
//! `/tmp/kdiag-UID` folders).

use std::path::Path;

/// Paths of a developer's machine, each with the examples it allows.
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("/work/", &[]),
    ("/root/", &[]),
    ("/home/", &["/home/you"]),
    // A build folder given as a path of ours (a checkout's own relative
    // `target/release/kdiag`, after `cargo build`, is an instruction).
    ("/target/", &[]),
    (
        "/tmp/",
        &[
            "/tmp/perf-",
            "/tmp/kdiag-",
            "/tmp/hsperfdata_",
            "/tmp/.java_pid",
        ],
    ),
];

fn machine_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (bad, allowed) in FORBIDDEN {
            for (at, _) in line.match_indices(bad) {
                let rest = &line[at..];
                // Inside a longer path (/var/tmp/, /home/you/work/) it is not one.
                let inside = !bad.starts_with("/target")
                    && line[..at].ends_with(|c: char| c.is_alphanumeric());
                if !inside && !allowed.iter().any(|a| rest.starts_with(a)) {
                    found.push(format!("line {}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn docs_show_no_path_of_the_machine_they_were_written_on() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    assert!(files.len() > 5, "README.md and docs/*.md");
    let mut bad = Vec::new();
    for f in &files {
        for hit in machine_paths(&std::fs::read_to_string(f).unwrap()) {
            bad.push(format!(
                "{}: {hit}",
                f.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "paths of this machine in the docs (write `kdiag`):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_finds_what_it_should() {
    assert_eq!(
        machine_paths("$ sudo /work/wt/x/target/release/kdiag lab").len(),
        2
    );
    assert_eq!(machine_paths("./target/debug/kdiag top").len(), 1);
    assert!(machine_paths("cargo build && sudo target/release/kdiag lab").is_empty());
    assert_eq!(machine_paths("/root/.rustup/toolchains/x/rustc").len(), 1);
    assert!(machine_paths("see /tmp/perf-PID.map and /home/you/a, /var/tmp/x").is_empty());
    assert_eq!(machine_paths("--scratch /tmp/cbdoc4").len(), 1);
}

/// The sections `docs/capture` writes: (file, name) from each of its
/// `section FILE NAME` calls.
fn captured_sections(script: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = script.split_whitespace().collect();
    words
        .windows(3)
        .filter(|w| w[0] == "section" && w[1].ends_with(".md"))
        .map(|w| (w[1].to_string(), w[2].to_string()))
        .collect()
}

/// Every section docs/capture produces is in its file, between its markers,
/// with a fenced body; every marked section in the docs has its recipe in
/// docs/capture (none pasted by hand under a marker).
#[test]
fn captured_sections_exist_and_each_has_a_recipe() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("docs/capture")).unwrap();
    let sections = captured_sections(&script);
    assert!(
        sections.len() >= 4,
        "docs/capture writes sections: {sections:?}"
    );
    for (file, name) in &sections {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let open = format!("<!-- capture:{name} -->\n");
        let close = format!("<!-- /capture:{name} -->");
        let (Some(a), Some(b)) = (text.find(&open), text.find(&close)) else {
            panic!("{file} lacks the markers of section {name}: run docs/capture");
        };
        let body = &text[a + open.len()..b.max(a + open.len())];
        assert!(
            body.starts_with("```\n") && body.ends_with("```\n") && body.lines().count() > 2,
            "{file} section {name} is not a fenced capture: run docs/capture\n{body}"
        );
        assert!(machine_paths(body).is_empty(), "{file} section {name}");
    }
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        files.push(e.unwrap().path());
    }
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "md"))
    {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        // A marker is a line of its own (a mention in prose is not one).
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("<!-- capture:") else {
                continue;
            };
            let name = rest.split(' ').next().unwrap();
            assert!(
                sections.iter().any(|(sf, sn)| *sf == rel && sn == name),
                "{rel}: section {name} has no recipe in docs/capture"
            );
        }
    }
}

#[test]
fn the_recipes_are_read_from_the_script() {
    let script = "x | section docs/top.md once\nscreen | section docs/lab.md step1\nsection() {";
    assert_eq!(
        captured_sections(script),
        [
            ("docs/top.md".to_string(), "once".to_string()),
            ("docs/lab.md".to_string(), "step1".to_string())
        ]
    );
}
