//! Embeds the labs and their checks (labs/, checks/) in the binary, so
//! kdiag works alone and a new lab or step is data only: every file under
//! those folders is listed here, with no table to keep by hand.

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
