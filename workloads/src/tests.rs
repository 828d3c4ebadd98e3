//! The truth as a library: every workload describes itself in-process for
//! any token, names files rather than paths, and its seed-dependent facts
//! differ between most pairs of learners.

use std::collections::BTreeMap;

use super::*;

/// Each workload with the arguments it requires.
const REQUIRED: &[(&str, &[&str])] = &[
    ("io-app", &[]),
    ("scheduling", &["1"]),
    ("memory", &["1", "4K"]),
    ("bio", &[]),
    ("io-stall", &[]),
    ("cpu-burn", &[]),
    ("lock-contend", &[]),
    ("mem-leak", &[]),
    ("bad-elf", &[]),
];

/// Facts that must change with the seed, per workload (cpu-burn in user
/// mode, scheduling in mode 1, memory in mode 1).
const SEEDED: &[(&str, &[&str])] = &[
    (
        "io-app",
        &["file", "write_bytes", "region_bytes", "write_function"],
    ),
    ("scheduling", &["tasks", "worker_function"]),
    (
        "memory",
        &["bytes", "src", "dst", "syscalls", "copy_function"],
    ),
    (
        "bio",
        &[
            "file",
            "threads",
            "thread_name_prefix",
            "sectors_per_thread",
            "read_function",
            "throttle_read_iops",
        ],
    ),
    (
        "io-stall",
        &["file", "burst_bytes", "period_s", "dirty_function"],
    ),
    (
        "cpu-burn",
        &[
            "hot_functions.0.name",
            "hot_functions.0.share",
            "hot_functions.1.name",
            "hottest",
        ],
    ),
    (
        "lock-contend",
        &["threads", "thread_name_prefix", "hold_ms", "lock_function"],
    ),
    (
        "mem-leak",
        &[
            "rate_bytes_per_s",
            "cap_bytes",
            "chunk_bytes",
            "leak_function",
        ],
    ),
    (
        "bad-elf",
        // (rule and phnum follow defect and phdr: not counted twice)
        &[
            "defect",
            "phdr",
            "phdr_values.p_offset",
            "phdr_values.p_vaddr",
            "entry",
            "size",
        ],
    ),
];

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The `expect` object of `name` for `seed`, flattened to "a.b.0" keys.
fn facts(name: &str, seed: &str) -> BTreeMap<String, String> {
    let required = REQUIRED.iter().find(|r| r.0 == name).unwrap().1;
    let mut all = args(required);
    all.extend(args(&["--seed", seed]));
    let doc = document_for(name, &all).unwrap_or_else(|e| panic!("{name} {seed}: {e}"));
    let Json::Obj(fields) = doc else { panic!() };
    let expect = &fields.iter().find(|f| f.0 == "expect").unwrap().1;
    let mut out = BTreeMap::new();
    flatten("", expect, &mut out);
    out
}

fn flatten(prefix: &str, v: &Json, out: &mut BTreeMap<String, String>) {
    let key = |k: &str| match prefix {
        "" => k.to_string(),
        p => format!("{p}.{k}"),
    };
    match v {
        Json::Obj(fields) => fields.iter().for_each(|(k, v)| flatten(&key(k), v, out)),
        Json::Arr(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| flatten(&key(&i.to_string()), v, out)),
        other => {
            out.insert(prefix.to_string(), other.pretty());
        }
    }
}

/// Course-like tokens, as kdiag's course code makes them.
fn tokens(n: usize) -> Vec<String> {
    const A: &[u8] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut rng = Rng::new(42, "tokens");
    (0..n)
        .map(|_| {
            let mut t: String = (0..12).map(|_| *rng.pick(A) as char).collect();
            t.insert(8, '-');
            t.insert(4, '-');
            assert!(is_course_token(&t));
            t
        })
        .collect()
}

#[test]
fn every_workload_describes_itself_in_process() {
    assert_eq!(names().count(), REQUIRED.len());
    for &(name, required) in REQUIRED {
        for seed in ["0", "7", "alice_01", "abcd-efgh-jkmn"] {
            let text = describe(name, seed, &args(required)).unwrap();
            assert!(text.contains("\"schema\": 2"), "{name}: {text}");
            assert!(
                text.contains(&format!("\"seed\": \"{seed}\"")),
                "{name}: {text}"
            );
            assert_eq!(text, describe(name, seed, &args(required)).unwrap());
            // Facts name files, never where the scratch directory is.
            for dir in ["/tmp", "/var", "/run", "kdiag-"] {
                assert!(!text.contains(dir), "{name} {seed}: a path in {text}");
            }
        }
        let f = facts(name, "0");
        assert!(
            f.contains_key("class") && f.contains_key("summary"),
            "{name}"
        );
    }
    let err = describe("nope", "0", &[]).unwrap_err();
    assert!(err.contains("io-app"), "{err}");
    assert!(describe("bio", "0", &args(&["--seed", "1"])).is_err());
    assert!(describe("bio", "a b", &[]).unwrap_err().contains("--seed"));
    assert!(describe("memory", "0", &[]).unwrap_err().contains("MODE"));
}

#[test]
fn the_default_layout_is_the_original_labs() {
    let io = facts("io-app", "0");
    assert_eq!(io["file"], "\"lab008.data\"");
    assert_eq!(io["write_bytes"], (10 << 20).to_string());
    let bio = facts("bio", "0");
    assert_eq!(
        (bio["threads"].as_str(), bio["sectors_per_thread"].as_str()),
        ("20", "1500")
    );
    assert_eq!(bio["throttle_read_iops"], "200");
    assert_eq!(facts("scheduling", "0")["tasks"], "300");
    let burn = facts("cpu-burn", "0");
    assert_eq!(burn["hottest"], "\"burn_hot_alpha\"");
    assert_eq!(burn["hot_functions.0.share"], "0.75");
    assert_eq!(facts("bad-elf", "0")["defect"], "\"congruence\"");
    assert_eq!(facts("bad-elf", "0")["phdr"], "1");
    // No --seed at all is the same as 0.
    let expect = |doc: String| doc[doc.find("\"expect\"").unwrap()..].to_string();
    assert_eq!(
        expect(describe_args("bio", &[]).unwrap()),
        expect(describe("bio", "0", &[]).unwrap())
    );
}

#[test]
fn seeds_vary_every_fact_a_check_may_compare() {
    let tokens = tokens(120);
    for &(name, keys) in SEEDED {
        let all: Vec<BTreeMap<String, String>> = tokens.iter().map(|t| facts(name, t)).collect();
        for key in keys {
            let values: std::collections::BTreeSet<&String> = all
                .iter()
                .map(|f| f.get(*key).unwrap_or_else(|| panic!("{name}.{key}")))
                .collect();
            assert!(values.len() >= 3, "{name}.{key} takes only {values:?}");
        }
        // Two learners' answers differ in most of these facts.
        let mut mostly = 0;
        for pair in all.windows(2) {
            let differ = keys.iter().filter(|k| pair[0][**k] != pair[1][**k]).count();
            if differ * 2 > keys.len() {
                mostly += 1;
            }
        }
        let pairs = all.len() - 1;
        eprintln!("{name}: {mostly}/{pairs} pairs differ in most seeded facts");
        assert!(
            mostly * 10 >= pairs * 9,
            "{name}: only {mostly}/{pairs} pairs differ in most facts"
        );
    }
}

#[test]
fn conceptual_facts_do_not_vary() {
    for t in tokens(20) {
        assert_eq!(facts("scheduling", &t)["faster_mode"], "0");
        // At 4K blocks (REQUIRED), read/write is the faster way.
        assert_eq!(facts("memory", &t)["faster_mode"], "1");
        assert_eq!(facts("bio", &t)["class"], "\"io\"");
        assert_eq!(facts("bio", &t)["cpu_bound"], "false");
        assert_eq!(facts("io-app", &t)["io_type"], "\"WS\"");
        assert_eq!(
            facts("bad-elf", &t)["stage"],
            "\"after-point-of-no-return\""
        );
    }
}

#[test]
fn no_throttle_drops_the_requirement() {
    let doc = describe("bio", "0", &args(&["--no-throttle"])).unwrap();
    assert!(doc.contains("\"throttle_read_iops\": null"), "{doc}");
}

#[test]
fn scratch_dir_follows_the_arguments() {
    let bio = scratch_dir("bio", &[]).unwrap();
    assert!(
        bio.starts_with("/var/tmp") && bio.ends_with("bio"),
        "{}",
        bio.display()
    );
    assert_eq!(
        scratch_dir("bio", &args(&["--scratch", "/a", "--scratch=/b"])),
        Some("/b".into())
    );
    assert_eq!(scratch_dir("cpu-burn", &[]), None);
    assert_eq!(scratch_dir("bad-elf", &[]), None);
}
