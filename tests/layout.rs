//! The source layout keeps its promises (docs/ARCHITECTURE.md): a folder
//! imports only the folders its line of the document's table allows (the
//! test reads the table from the document, so the two cannot drift), no two
//! folders import each other, render/ and tui/ never touch sys/, no command
//! imports another, an instrument's tiers never import each other, no
//! module imports one that imports it back (directly or around a longer
//! circle), the model names no other stage, no source file over 800 lines,
//! `src/sys/` (kernel interfaces only) under a quarter of the code, watch's
//! metrics in one table, a quiet diagnose engine, and commands that only
//! wire. Read from the files themselves, so a change that breaks a promise
//! fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// "src/instruments/exec/mod.rs" → ["instruments", "exec"].
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Code with comments and string literals blanked, so paths in prose or
/// messages do not count as imports.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut in_str = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            }
            out.push(if in_str { ' ' } else { c });
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// Paths a file names, resolved to absolute module paths: `crate::a::b`,
/// `super::x` and grouped imports `crate::a::{b, c::d}`.
fn referenced_paths(me: &[String], text: &str) -> Vec<Vec<String>> {
    // `use super::*;` is the unit-test idiom: inside `mod tests` it names the
    // file's own module, not its parent.
    let code = code_only(text).replace("use super::*;", "");
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        let starts = |w: &str| {
            bytes[i..].iter().take(w.len()).copied().eq(w.chars())
                && (i == 0 || !ident(bytes[i - 1]))
        };
        let base: Option<(Vec<String>, usize)> = if starts("crate::") {
            Some((vec![], 7))
        } else if starts("super::") {
            // `super` of a mod.rs is its parent folder's module.
            let mut b = me.to_vec();
            let mut n = 7;
            b.pop();
            while bytes[i + n..].iter().take(7).copied().eq("super::".chars()) {
                b.pop();
                n += 7;
            }
            Some((b, n))
        } else {
            None
        };
        let Some((mut path, skip)) = base else {
            i += 1;
            continue;
        };
        i += skip;
        // Read a::b::c (stop at `{`, `*` or anything else).
        loop {
            let start = i;
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            if i == start {
                break;
            }
            path.push(bytes[start..i].iter().collect());
            if bytes[i..].iter().take(2).copied().eq("::".chars()) {
                i += 2;
            } else {
                break;
            }
        }
        if i < bytes.len() && bytes[i] == '{' {
            // Grouped: each member is a path under `path`.
            let end = bytes[i..]
                .iter()
                .position(|&c| c == '}')
                .map_or(bytes.len(), |p| i + p);
            let inner: String = bytes[i + 1..end].iter().collect();
            for member in inner.split(',') {
                let member = member.trim().trim_start_matches("self");
                let mut p = path.clone();
                p.extend(
                    member
                        .split("::")
                        .map(str::trim)
                        .filter(|s| !s.is_empty() && s.chars().all(ident))
                        .map(str::to_string),
                );
                out.push(p);
            }
            i = end;
        } else {
            out.push(path);
        }
    }
    out
}

struct Tree {
    modules: BTreeSet<Vec<String>>,
    /// Module → the modules it names (longest known prefix of each path).
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    lines: BTreeMap<PathBuf, usize>,
}

/// The tree checked: KDIAG_LAYOUT_SRC checks another (e.g. an older
/// checkout) against this one's rules.
fn src_dir() -> PathBuf {
    std::env::var_os("KDIAG_LAYOUT_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn read_tree() -> Tree {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut lines = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        lines.insert(f.clone(), text.lines().count());
        let me = module_of(&src, f);
        for path in referenced_paths(&me, &text) {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p))
                .unwrap_or_default();
            // Naming yourself, an enclosing module of yours or the crate root
            // is not an import of another module.
            if target.is_empty() || me.starts_with(&target) {
                continue;
            }
            edges.entry(me.clone()).or_default().insert(target);
        }
    }
    Tree {
        modules,
        edges,
        lines,
    }
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(tree: &Tree) -> Vec<Vec<String>> {
    struct State<'a> {
        tree: &'a Tree,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.tree.edges.get(v) {
            for w in targets {
                let w = s.tree.modules.get(w).unwrap();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if s.on_stack.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                scc.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.found.push(scc);
            }
        }
    }
    let mut s = State {
        tree,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for m in &tree.modules {
        if !s.index.contains_key(m) {
            visit(&mut s, m);
        }
    }
    s.found
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let tree = read_tree();
    let found = circles(&tree);
    assert!(
        found.is_empty(),
        "modules that import each other (directly or around a circle): {found:#?}"
    );
    // The checker must see real imports, or it would pass on anything.
    let commands = tree
        .edges
        .get(&vec!["commands".to_string(), "iosnoop".to_string()]);
    assert!(
        commands.is_some_and(|e| e.contains(&vec!["instruments".to_string(), "block".to_string()])),
        "the import reader missed commands::iosnoop → instruments::block: {commands:?}"
    );
}

#[test]
fn the_circle_finder_finds_circles() {
    let m = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    let tree = Tree {
        modules: ["a", "b", "c", "d"].iter().map(|s| m(s)).collect(),
        edges: [
            (m("a"), [m("b")].into()),
            (m("b"), [m("c")].into()),
            (m("c"), [m("a")].into()),
            (m("d"), [m("a")].into()),
        ]
        .into(),
        lines: BTreeMap::new(),
    };
    assert_eq!(circles(&tree), vec![vec!["a", "b", "c"]]);
    let paths = referenced_paths(
        &m("x::y"),
        "use crate::a::{b, c::d};\nuse super::z; // crate::not::this\nlet s = \"crate::nor::this\";",
    );
    assert_eq!(paths, vec![m("a::b"), m("a::c::d"), m("x::z")]);
}

/// Data flows one way (collect → model → analyse → render): the model is
/// the data every stage shares, so it names no stage.
#[test]
fn the_model_imports_only_the_model() {
    let tree = read_tree();
    let upward: Vec<String> = tree
        .edges
        .iter()
        .filter(|(from, _)| from.first().is_some_and(|m| m == "model"))
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| t.first().is_none_or(|m| m != "model"))
                .map(move |t| format!("{} → {}", from.join("::"), t.join("::")))
        })
        .collect();
    assert!(
        upward.is_empty(),
        "model/ imports from outside model/: {upward:#?}"
    );
    // The checker must see model's own imports, or it would pass on anything.
    let drill = tree
        .edges
        .get(&vec!["model".to_string(), "drill".to_string()]);
    assert!(
        drill.is_some_and(|e| e.contains(&vec!["model".to_string(), "flame".to_string()])),
        "the import reader missed model::drill → model::flame: {drill:?}"
    );
}

#[test]
fn no_source_file_over_800_lines() {
    let tree = read_tree();
    let long: Vec<String> = tree
        .lines
        .iter()
        .filter(|(_, n)| **n > MAX_LINES)
        .map(|(f, n)| format!("{} ({n} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "split these files: {long:?}");
}

#[test]
fn sys_is_under_a_quarter_of_the_code() {
    let tree = read_tree();
    let total: usize = tree.lines.values().sum();
    let src = src_dir();
    // Within src/: the checkout's own path may have a `sys` in it.
    let sys: usize = tree
        .lines
        .iter()
        .filter(|(f, _)| f.strip_prefix(&src).is_ok_and(|f| f.starts_with("sys")))
        .map(|(_, n)| n)
        .sum();
    assert!(
        sys * 4 < total,
        "src/sys/ holds {sys} of {total} lines: keep only kernel interfaces there"
    );
}

/// The table of docs/ARCHITECTURE.md: folder → the folders it may import.
/// It is the fenced block after the comment that names this test.
fn allowed_imports() -> BTreeMap<String, BTreeSet<String>> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .unwrap();
    let after = doc
        .split_once("<!-- tests/layout.rs reads the next block")
        .expect("docs/ARCHITECTURE.md has lost its table of allowed imports")
        .1;
    let block = after
        .split("```")
        .nth(1)
        .expect("the table of allowed imports is a fenced block");
    let mut table = BTreeMap::new();
    for line in block.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace().map(str::to_string);
        let folder = words.next().unwrap();
        table.insert(folder, words.collect());
    }
    table
}

/// Imports between top-level folders (or files) of src/: (from, to) → an
/// example module pair that makes it.
fn folder_imports(tree: &Tree) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for (from, targets) in &tree.edges {
        for to in targets {
            let (Some(a), Some(b)) = (from.first(), to.first()) else {
                continue;
            };
            if a != b {
                out.entry((a.clone(), b.clone()))
                    .or_insert_with(|| format!("{} → {}", from.join("::"), to.join("::")));
            }
        }
    }
    out
}

#[test]
fn folders_import_only_what_the_documented_table_allows() {
    let table = allowed_imports();
    let tree = read_tree();
    let imports = folder_imports(&tree);
    let wrong: Vec<String> = imports
        .iter()
        .filter(|((a, b), _)| !table.get(a).is_some_and(|allowed| allowed.contains(b)))
        .map(|((a, b), example)| {
            if table.contains_key(a) {
                format!("{a}/ may not import {b}/ (docs/ARCHITECTURE.md's table): {example}")
            } else {
                format!("{a} has no line in docs/ARCHITECTURE.md's table: {example}")
            }
        })
        .collect();
    assert!(wrong.is_empty(), "imports against the table: {wrong:#?}");
    // The reader must see folder imports, or it would pass on anything.
    assert!(
        imports.contains_key(&("commands".into(), "instruments".into())),
        "the import reader missed commands → instruments"
    );
}

#[test]
fn no_two_folders_import_each_other() {
    let imports = folder_imports(&read_tree());
    let both: Vec<String> = imports
        .iter()
        .filter(|((a, b), _)| a < b)
        .filter_map(|((a, b), there)| {
            let back = imports.get(&(b.clone(), a.clone()))?;
            Some(format!("{there} and back: {back}"))
        })
        .collect();
    assert!(both.is_empty(), "folders that import each other: {both:#?}");
    // The table itself runs one way: a folder never allows one that allows it.
    let table = allowed_imports();
    for (a, allowed) in &table {
        for b in allowed {
            assert!(
                !table.get(b).is_some_and(|t| t.contains(a)),
                "the table lets {a} and {b} import each other"
            );
        }
    }
}

#[test]
fn render_and_tui_never_touch_sys() {
    let imports = folder_imports(&read_tree());
    let touching: Vec<&String> = imports
        .iter()
        .filter(|((a, b), _)| (a == "render" || a == "tui") && b == "sys")
        .map(|(_, example)| example)
        .collect();
    assert!(
        touching.is_empty(),
        "render/ and tui/ read the kernel only through instruments/: {touching:#?}"
    );
}

#[test]
fn no_command_imports_another() {
    let tree = read_tree();
    let shared = ["args", "mod"];
    let crossing: Vec<String> = tree
        .edges
        .iter()
        .filter(|(from, _)| from.len() == 2 && from[0] == "commands")
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| t.len() >= 2 && t[0] == "commands" && !shared.contains(&t[1].as_str()))
                .map(move |t| format!("{} → {}", from.join("::"), t.join("::")))
        })
        .collect();
    assert!(
        crossing.is_empty(),
        "commands/ only wires: what two commands share goes below it: {crossing:#?}"
    );
}

/// A tier of an instrument: `instruments::<name>::<bpf|perf|proc|tracefs>`.
fn is_tier(m: &[String]) -> bool {
    m.len() == 3
        && m[0] == "instruments"
        && ["bpf", "perf", "proc", "tracefs"].contains(&m[2].as_str())
}

#[test]
fn tiers_never_import_each_other_and_only_their_open_names_them() {
    let tree = read_tree();
    let mut wrong = Vec::new();
    for (from, to) in &tree.edges {
        for t in to.iter().filter(|t| is_tier(t)) {
            // The instrument's mod.rs (its `open`) and the tier's own tests.
            let own_open = from.len() == 2 && from[..] == t[..2];
            if !own_open {
                wrong.push(format!("{} → {}", from.join("::"), t.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a tier is named only by its instrument's mod.rs (never by another tier): {wrong:#?}"
    );
    // The reader must see a tier's imports of its instrument, or it would
    // pass on anything.
    let bpf = vec!["instruments".into(), "block".into(), "bpf".into()];
    assert!(
        tree.edges
            .get(&bpf)
            .is_some_and(|to| to.iter().any(|t| t.len() == 3 && t[..2] == bpf[..2])),
        "the import reader missed instruments::block::bpf → its source.rs"
    );
}

/// Names in quotes after `key: ` or `key: Some(` in a file: the table of
/// render/metrics.rs, read as text.
fn quoted_after(text: &str, key: &str) -> Vec<String> {
    text.split(key)
        .skip(1)
        .filter_map(|rest| {
            let rest = rest.trim_start().trim_start_matches("Some(");
            Some(rest.strip_prefix('"')?.split('"').next()?.to_string())
        })
        .collect()
}

/// watch's exporters render one table (render/metrics.rs): a metric's
/// name is written there and nowhere else, so a new metric is one row and
/// a new format one file that reads the table.
#[test]
fn every_metric_is_named_once_in_the_table_of_metrics() {
    let src = src_dir();
    let table = std::fs::read_to_string(src.join("render/metrics.rs"))
        .expect("render/metrics.rs holds the table of watch's metrics");
    let mut names = quoted_after(&table, "prom:");
    names.extend(quoted_after(&table, "otel:"));
    assert!(
        names.len() >= 30,
        "the table's names were not read: {names:?}"
    );
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut again = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("render/metrics.rs")) {
        let text = std::fs::read_to_string(f).unwrap();
        // A unit test pins what a format writes.
        let text = text.split("#[cfg(test)]").next().unwrap();
        for n in &names {
            // A name with a label's value in it, by its fixed start.
            let quoted = match n.split_once("{}") {
                Some((start, _)) => format!("\"{start}"),
                None => format!("\"{n}\""),
            };
            if text.contains(&quoted) {
                again.push(format!("{} names {n}", f.display()));
            }
        }
    }
    assert!(
        again.is_empty(),
        "metrics named outside render/metrics.rs: {again:#?}"
    );
}

/// diagnose's engine and the analyses are quiet, like the lab's engine:
/// they return data and events, and the command (or the live view, or
/// watch's flight recorder) decides what is said and where.
#[test]
fn the_engine_and_the_analyses_never_print() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src.join("diagnose"), &mut files);
    rust_files(&src.join("analysis"), &mut files);
    assert!(files.len() > 20, "diagnose/ and analysis/ were not read");
    let mut loud = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let code = code_only(&text);
        for word in [
            "print!(",
            "println!(",
            "eprint!(",
            "eprintln!(",
            "stdout()",
            "stderr()",
        ] {
            // The word itself, not the end of a longer one.
            let found = code
                .match_indices(word)
                .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
            if found {
                loud.push(format!("{}: {word}", f.display()));
            }
        }
    }
    assert!(
        loud.is_empty(),
        "these print instead of returning what they found: {loud:#?}"
    );
}

/// The longest a command's file may be: its Args and the wiring of one
/// run; logic longer than that belongs below commands/.
const MAX_COMMAND_LINES: usize = 400;

/// Commands only wire (docs/ARCHITECTURE.md): no command file names
/// `crate::sys` (the kernel is reached through instruments/, course/ or
/// another façade), and none is longer than MAX_COMMAND_LINES.
#[test]
fn commands_only_wire() {
    let commands = src_dir().join("commands");
    let mut files = Vec::new();
    rust_files(&commands, &mut files);
    assert!(files.len() > 20, "commands/ was not read");
    let mut wrong = Vec::new();
    for f in &files {
        let name = f.strip_prefix(&commands).unwrap().display();
        let text = std::fs::read_to_string(f).unwrap();
        if code_only(&text).contains("crate::sys") {
            wrong.push(format!("{name} names crate::sys"));
        }
        if text.lines().count() > MAX_COMMAND_LINES {
            wrong.push(format!("{name} is over {MAX_COMMAND_LINES} lines"));
        }
    }
    assert!(wrong.is_empty(), "commands/ only wires: {wrong:#?}");
}
