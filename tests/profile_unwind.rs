//! `kdiag profile` on programs built without frame pointers, on JIT code
//! named by a perf map, and its pprof and speedscope files.
//!
//! The C and Rust programs (tests/programs/) call main → a → b → c → d →
//! leaf, the leaf burning CPU; they are built here without frame pointers.
//! With `--call-graph dwarf` and `auto` the whole chain must come out for at
//! least 90% of the leaf's samples; with frame pointers only it must not
//! (which shows the difference is the unwinding).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::profile_files::{Pprof, speedscope_schema, validate};
use common::{kdiag, require_program, require_root, stderr, stdout};
use serde_json::Value;

fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

/// Build tests/programs/chain.c with gcc -O2 -fomit-frame-pointer.
fn build_c(dir: &Path, source: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(source.trim_end_matches(".c"));
    let st = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(programs().join(source))
        .status()
        .expect("gcc is installed (apt-get install gcc)");
    assert!(st.success(), "gcc failed on {source}");
    out
}

/// Build tests/programs/rchain.rs with rustc directly: the workspace's
/// .cargo/config.toml forces frame pointers, this one must not have them.
fn build_rust(dir: &Path) -> PathBuf {
    let out = dir.join("rchain");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let st = Command::new(rustc)
        .args(["-C", "opt-level=2", "-C", "force-frame-pointers=no", "-o"])
        .arg(&out)
        .arg(programs().join("rchain.rs"))
        .status()
        .unwrap();
    assert!(st.success(), "rustc failed");
    out
}

/// Profile `program secs` with `mode`, returning the folded lines.
fn folded(program: &Path, mode: &str, extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.folded");
    let out = kdiag()
        .args(["profile", "-F", "499", "--call-graph", mode, "--folded"])
        .arg(&path)
        .args(extra)
        .arg("--")
        .arg(program)
        .arg("2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (
                stack.split(';').map(str::to_string).collect(),
                n.parse().unwrap(),
            )
        })
        .collect()
}

/// The share of `leaf`'s samples (leaf as the innermost user frame) whose
/// stack holds `chain` (outermost first) as consecutive frames ending at
/// the leaf.
fn chain_share(lines: &[(Vec<String>, u64)], chain: &[&str]) -> (f64, u64) {
    let short = |f: &str| f.rsplit("::").next().unwrap().to_string();
    let leaf = chain.last().unwrap();
    let (mut all, mut whole) = (0, 0);
    for (frames, n) in lines {
        let user: Vec<String> = frames[1..]
            .iter()
            .filter(|f| !f.ends_with("_[k]"))
            .map(|f| short(f))
            .collect();
        if user.last().map(String::as_str) != Some(*leaf) {
            continue;
        }
        all += n;
        if user.ends_with(&chain.iter().map(|c| c.to_string()).collect::<Vec<_>>()) {
            whole += n;
        }
    }
    (
        if all == 0 {
            0.0
        } else {
            100.0 * whole as f64 / all as f64
        },
        all,
    )
}

fn check_chain(program: &Path, chain: &[&str]) {
    for mode in ["dwarf", "auto"] {
        let (share, samples) = chain_share(&folded(program, mode, &[]), chain);
        assert!(samples >= 100, "{mode}: only {samples} samples of the leaf");
        assert!(
            share >= 90.0,
            "{mode}: the whole chain in only {share:.1}% of {samples} leaf samples"
        );
    }
    let (share, samples) = chain_share(&folded(program, "fp", &[]), chain);
    assert!(samples >= 100, "fp: only {samples} samples of the leaf");
    assert!(
        share < 50.0,
        "fp: frame pointers alone found the chain in {share:.1}%: the program has frame pointers?"
    );
}

#[test]
fn dwarf_unwinds_c_built_without_frame_pointers() {
    if !require_root("dwarf_unwinds_c_built_without_frame_pointers") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "chain.c", &["-O2", "-fomit-frame-pointer"]);
    check_chain(
        &bin,
        &[
            "main",
            "chain_a",
            "chain_b",
            "chain_c",
            "chain_d",
            "chain_leaf",
        ],
    );
}

#[test]
fn dwarf_unwinds_rust_built_without_frame_pointers() {
    if !require_root("dwarf_unwinds_rust_built_without_frame_pointers") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build_rust(dir.path());
    check_chain(
        &bin,
        &[
            "main",
            "rchain_a",
            "rchain_b",
            "rchain_c",
            "rchain_d",
            "rchain_leaf",
        ],
    );
}

#[test]
fn a_small_stack_copy_is_reported_and_bad_sizes_refused() {
    if !require_root("a_small_stack_copy_is_reported_and_bad_sizes_refused") {
        return;
    }
    // Rust's main runs under a few std frames: 64 bytes cannot hold them.
    let dir = tempfile::tempdir().unwrap();
    let bin = build_rust(dir.path());
    let out = kdiag()
        .args(["profile", "-F", "199", "--call-graph", "dwarf"])
        .args(["--stack-size", "64", "--"])
        .arg(&bin)
        .arg("1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("ran past the 64-byte stack copy (raise --stack-size)"),
        "{text}"
    );
    for bad in ["0", "12", "65536"] {
        let out = kdiag()
            .args(["profile", "--call-graph", "dwarf", "--stack-size", bad])
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--stack-size {bad}");
        assert!(
            stderr(&out).contains("multiple of 8 between 8 and 65528"),
            "{}",
            stderr(&out)
        );
    }
}

/// A program that generates code and names it in /tmp/perf-PID.map.
struct Jit {
    bin: PathBuf,
    _dir: tempfile::TempDir,
}

impl Jit {
    fn build() -> Jit {
        let dir = tempfile::tempdir().unwrap();
        let bin = build_c(dir.path(), "jit.c", &["-O2", "-fno-omit-frame-pointer"]);
        Jit { bin, _dir: dir }
    }
}

/// Profile the JIT through `sh -c 'PREFIX; echo $$; exec JIT 1.5'`: the
/// shell prints the pid the JIT will have before kdiag's report. Returns the
/// pid and the report; the perf map the JIT leaves (as Node does) is removed.
fn profile_jit(jit: &Jit, prefix: &str, args: &[&str]) -> (u32, String) {
    let script = format!("{prefix} echo $$; exec {} 1.5", jit.bin.display());
    let out = kdiag()
        .args(["profile", "-F", "499"])
        .args(args)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = stdout(&out);
    let (pid, report) = text.split_once('\n').unwrap_or(("", ""));
    let pid: u32 = pid
        .parse()
        .unwrap_or_else(|_| panic!("no pid first: {text}"));
    let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    assert!(out.status.success(), "{}", stderr(&out));
    (pid, report.to_string())
}

#[test]
fn perf_map_names_jit_frames_in_every_output() {
    if !require_root("perf_map_names_jit_frames_in_every_output") {
        return;
    }
    let jit = Jit::build();
    let dir = tempfile::tempdir().unwrap();
    let (folded, pprof, speedscope) = (
        dir.path().join("jit.folded"),
        dir.path().join("jit.pb.gz"),
        dir.path().join("jit.speedscope.json"),
    );
    let (_, out) = profile_jit(
        &jit,
        "",
        &[
            "--json",
            "--folded",
            folded.to_str().unwrap(),
            "--pprof",
            pprof.to_str().unwrap(),
            "--speedscope",
            speedscope.to_str().unwrap(),
        ],
    );
    let report: Value = serde_json::from_str(&out).unwrap();
    let text = std::fs::read_to_string(&folded).unwrap();
    let jit_samples: u64 = text
        .lines()
        .filter(|l| l.contains(";main;jit_outer;jit_inner"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    let all = report["profile"]["samples"].as_u64().unwrap();
    assert!(
        jit_samples * 10 >= all * 8,
        "main;jit_outer;jit_inner in {jit_samples} of {all} samples:\n{text}"
    );
    assert_eq!(
        report["summary"]["top_self"][0]["name"], "jit_inner",
        "{report:#}"
    );

    let profile = Pprof::read(&pprof);
    assert!(
        profile
            .stacks()
            .iter()
            .any(|(s, _)| s.starts_with(&["jit_inner".to_string(), "jit_outer".to_string()])),
        "pprof stacks: {:?}",
        profile.stacks()
    );
    let ss: Value = serde_json::from_slice(&std::fs::read(&speedscope).unwrap()).unwrap();
    let names: Vec<&str> = ss["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"jit_inner") && names.contains(&"jit_outer"),
        "{names:?}"
    );
}

#[test]
fn a_perf_map_of_another_user_is_ignored() {
    if !require_root("a_perf_map_of_another_user_is_ignored") {
        return;
    }
    // The JIT runs as root; a map that nobody (65534) planted at its path
    // first is not trusted, whatever the JIT then writes into it: frames
    // stay [anon] and the reason is given.
    let jit = Jit::build();
    let (pid, text) = profile_jit(
        &jit,
        "f=/tmp/perf-$$.map; rm -f $f; touch $f; chown 65534 $f;",
        &[],
    );
    assert!(!text.contains("jit_inner"), "{text}");
    assert!(
        text.contains(&format!(
            "/tmp/perf-{pid}.map belongs to uid 65534, not to the profiled process's uid 0 (ignored)"
        )),
        "{text}"
    );
    assert!(text.contains("[anon]"), "{text}");
}

/// The GNU build id of an ELF file, in hex.
fn build_id(path: &Path) -> String {
    use object::Object;
    let data = std::fs::read(path).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let id = obj.build_id().unwrap().expect("gcc links a build id");
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn pprof_and_speedscope_hold_the_unwound_chain() {
    if !require_root("pprof_and_speedscope_hold_the_unwound_chain") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path(), "chain.c", &["-O2", "-fomit-frame-pointer"]);
    let (pprof, ss) = (dir.path().join("p.pb.gz"), dir.path().join("p.json"));
    let out = kdiag()
        .args(["profile", "-F", "499", "--call-graph", "dwarf", "--json"])
        .arg("--pprof")
        .arg(&pprof)
        .arg("--speedscope")
        .arg(&ss)
        .arg("--")
        .arg(&bin)
        .arg("1.5")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let samples = report["profile"]["samples"].as_u64().unwrap();
    let weight: u64 = report["profile"]["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["weight"].as_u64().unwrap())
        .sum();

    // pprof: types, totals, the chain leaf first, the binary's build id.
    let p = Pprof::read(&pprof);
    assert_eq!(
        p.sample_types,
        [
            ("samples".to_string(), "count".to_string()),
            ("cpu".to_string(), "nanoseconds".to_string())
        ]
    );
    assert_eq!(p.period_type, ("cpu".into(), "nanoseconds".into()));
    assert_eq!(p.period, 1_000_000_000 / 499);
    assert!(p.time_nanos > 1_600_000_000_000_000_000 && p.duration_nanos > 1_000_000_000);
    assert_eq!(p.samples.iter().map(|s| s.1[0]).sum::<u64>(), samples);
    assert_eq!(p.samples.iter().map(|s| s.1[1]).sum::<u64>(), weight);
    assert!(p.samples.iter().all(|s| s.2 == "chain"), "comm labels");
    let chain = [
        "chain_leaf",
        "chain_d",
        "chain_c",
        "chain_b",
        "chain_a",
        "main",
    ];
    let with_chain: u64 = p
        .stacks()
        .iter()
        .filter(|(s, _)| s.len() >= 6 && s[..6] == chain)
        .map(|(_, n)| n)
        .sum();
    assert!(with_chain * 10 >= samples * 8, "{with_chain} of {samples}");
    let leaf_loc = p
        .locations
        .iter()
        .find(|(_, (_, f))| p.functions[f] == "chain_leaf")
        .map(|(_, l)| *l)
        .unwrap();
    let (file, id) = &p.mappings[&leaf_loc.0];
    assert_eq!(Path::new(file), bin.as_path());
    assert_eq!(*id, build_id(&bin));
    assert!(
        p.strings
            .iter()
            .any(|s| s.starts_with("CPU profile of chain"))
    );

    // speedscope: valid against its schema, weights add up, root first.
    let doc: Value = serde_json::from_slice(&std::fs::read(&ss).unwrap()).unwrap();
    let schema = speedscope_schema();
    validate(&schema, &schema, &doc, "$").unwrap();
    let prof = &doc["profiles"][0];
    assert_eq!(prof["name"], "chain");
    assert_eq!(prof["unit"], "nanoseconds");
    let weights: u64 = prof["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .sum();
    assert_eq!(weights, weight);
    assert_eq!(prof["endValue"].as_u64(), Some(weight));
    let frames = doc["shared"]["frames"].as_array().unwrap();
    let name = |i: &Value| {
        frames[i.as_u64().unwrap() as usize]["name"]
            .as_str()
            .unwrap()
    };
    let deepest = prof["samples"]
        .as_array()
        .unwrap()
        .iter()
        .zip(prof["weights"].as_array().unwrap())
        .max_by_key(|(_, w)| w.as_u64())
        .unwrap()
        .0
        .as_array()
        .unwrap();
    let names: Vec<&str> = deepest.iter().map(name).collect();
    assert_eq!(names.first(), Some(&"_start"), "{names:?}");
    assert!(
        names.ends_with(&["chain_a", "chain_b", "chain_c", "chain_d", "chain_leaf"]),
        "{names:?}"
    );
    // A document breaking the schema is caught (the check can fail).
    let mut bad = doc.clone();
    bad["profiles"][0]["unit"] = "furlongs".into();
    assert!(validate(&schema, &schema, &bad, "$").is_err());
}

/// Node with `--perf-prof` writes a jitdump (jit-PID.dump, in its working
/// directory) and maps it for profilers to find; with
/// `--interpreted-frames-native-stack` its interpreted functions get code of
/// their own there too. The JavaScript chain must come out by name, however
/// much of it V8 inlined.
#[test]
fn jitdump_names_node_functions() {
    if !require_root("jitdump_names_node_functions") {
        return;
    }
    if require_program("jitdump_names_node_functions", &["node"], "nodejs").is_none() {
        return;
    }
    // node writes its jitdump in its working directory: a fresh one.
    let dir = tempfile::tempdir().unwrap();
    let (folded, pprof) = (dir.path().join("n.folded"), dir.path().join("n.pb.gz"));
    let out = kdiag()
        .current_dir(dir.path())
        .args(["profile", "-F", "499", "--json", "--folded"])
        .arg(&folded)
        .arg("--pprof")
        .arg(&pprof)
        .args([
            "--",
            "node",
            "--perf-prof",
            "--interpreted-frames-native-stack",
        ])
        .arg(programs().join("hot.js"))
        .arg("1.5")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let all = report["profile"]["samples"].as_u64().unwrap();
    let text = std::fs::read_to_string(&folded).unwrap();
    // V8 names code "JS:*name file:line:col" (optimised, TurboFan),
    // "JS:~name ..." (interpreted), "JS:^name" (baseline, Sparkplug) or
    // "JS:+name" (Maglev): which tier runs when depends on the load. What it inlines is its own choice: an optimised
    // outerLoop may hold middleStep and leafWork, so a correct profile has,
    // in nearly every sample, the script's functions by name in call order
    // from outerLoop down to the leaf, the rest inlined into the last one.
    // Unnamed JIT code (`[anon]`, the jitdump not read) matches none.
    const CHAIN: [&str; 3] = ["outerLoop", "middleStep", "leafWork"];
    let script_fn = |f: &str| {
        let name = f
            .strip_prefix("JS:")?
            .trim_start_matches(['*', '~', '^', '+']);
        CHAIN
            .iter()
            .position(|c| name.starts_with(&format!("{c} ")))
    };
    // The user stack only: a sample that caught the thread preempted or in
    // an interrupt (as under load) has kernel frames on top of the same
    // user frames.
    let in_order = |l: &&str| {
        let frames: Vec<&str> = l
            .rsplit_once(' ')
            .unwrap()
            .0
            .split(';')
            .filter(|f| !f.ends_with("_[k]"))
            .collect();
        let ours: Vec<usize> = frames.iter().filter_map(|f| script_fn(f)).collect();
        let leaf_is_ours = frames.last().is_some_and(|f| script_fn(f).is_some());
        leaf_is_ours && ours.iter().copied().eq(0..ours.len())
    };
    let in_chain: u64 = text
        .lines()
        .filter(in_order)
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(
        in_chain * 10 >= all * 7,
        "outerLoop[;middleStep[;leafWork]] (by name, in call order, one of them the user \
         leaf) in {in_chain} of {all} samples:\n{text}"
    );
    let names: Vec<String> = Pprof::read(&pprof)
        .stacks()
        .into_iter()
        .flat_map(|(s, _)| s)
        .collect();
    // Optimised code, compiled after node started, is named too.
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("JS:*") && script_fn(n).is_some()),
        "pprof function names: {names:?}"
    );
}
