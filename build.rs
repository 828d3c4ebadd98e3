//! Embeds the labs and their checks (labs/, checks/) in the binary, so
//! kdiag works alone and a new lab or step is data only: every file under
//! those folders is listed here, with no table to keep by hand. Lists the
//! committed BPF objects (src/sys/bpf/*.bpf.o) the same way, as the statics
//! of `sys::bpf::objects`: a new object needs no line anywhere.

use std::io::Write;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("toml" | "md")
        ) {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    bpf_objects(&root);
    let mut found = Vec::new();
    for top in ["labs", "checks"] {
        println!("cargo:rerun-if-changed={top}");
        files(&root.join(top), &mut found);
    }
    found.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("embedded_labs.rs");
    let mut f = std::fs::File::create(out).unwrap();
    writeln!(f, "&[").unwrap();
    for path in &found {
        let rel = path.strip_prefix(&root).unwrap().to_str().unwrap();
        writeln!(
            f,
            "    ({rel:?}, include_str!({:?})),",
            path.to_str().unwrap()
        )
        .unwrap();
    }
    writeln!(f, "]").unwrap();
}

/// `NAME.bpf.o` becomes `pub static NAME: &[u8]`, documented by the leading
/// comment of its `NAME.bpf.c` (its license line left out).
fn bpf_objects(root: &Path) {
    let dir = root.join("src/sys/bpf");
    println!("cargo:rerun-if-changed=src/sys/bpf");
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_str().is_some_and(|p| p.ends_with(".bpf.o")))
        .collect();
    objects.sort();
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("bpf_objects.rs");
    let mut f = std::fs::File::create(out).unwrap();
    for object in &objects {
        let file = object.file_name().unwrap().to_str().unwrap();
        let name = file.trim_end_matches(".bpf.o");
        let source = dir.join(format!("{name}.bpf.c"));
        let text = std::fs::read_to_string(&source)
            .unwrap_or_else(|_| panic!("{file} has no source {name}.bpf.c beside it"));
        let doc = text
            .lines()
            .map_while(|l| l.strip_prefix("//"))
            .map(str::trim)
            .filter(|l| !l.starts_with("SPDX-License-Identifier"))
            .take_while(|l| !l.is_empty());
        for line in doc {
            writeln!(f, "/// {line}").unwrap();
        }
        writeln!(
            f,
            "pub static {}: &[u8] = aya::include_bytes_aligned!({:?});",
            name.to_uppercase().replace('-', "_"),
            object.to_str().unwrap()
        )
        .unwrap();
    }
}
