//! Fuzz `analysis::elf_rules::check`: any bytes, any environment, no panic,
//! and the report keeps its invariants. The kdiag sources are included by
//! path because kdiag is a binary crate.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

#[path = "../../../src/model/elf.rs"]
pub mod elf_model;
#[path = "../../../src/analysis/elf_rules/mod.rs"]
pub mod elf_rules_src;
// The paths the included files use: crate::model::elf, crate::analysis::elf_rules.
mod model {
    pub use super::elf_model as elf;
}
mod analysis {
    pub use super::elf_rules_src as elf_rules;
}

use analysis::elf_rules;
use model::elf::{ElfEnv, PathFact, PathState, Severity};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the environment, the rest is the file.
    let (knob, bytes) = match data.split_first() {
        Some((k, rest)) => (*k, rest),
        None => (0, data),
    };
    let host_machine = [62, 183, 3, 40][usize::from(knob & 3)];
    let page_size = [4096, 16384, 65536, 3][usize::from((knob >> 2) & 3)];
    let mmap_min_addr = [0, 4096, 65536, u64::MAX][usize::from((knob >> 4) & 3)];
    let mut env = ElfEnv {
        host_machine,
        page_size,
        mmap_min_addr,
        task_size: if knob & 0x40 != 0 { 0x7fff_ffff_f000 } else { 1 << 48 },
        commit_limit: (knob & 0x20 != 0).then_some(8 << 30),
        mode: (knob & 0x80 != 0).then_some(0o644),
        paths: Vec::new(),
    };
    // Every path the file names gets a state taken from its own bytes.
    for (i, path) in elf_rules::paths_to_check(&bytes, host_machine).into_iter().enumerate() {
        let head: Vec<u8> = bytes.iter().skip(i).take(64).copied().collect();
        let state = match (knob as usize + i) % 4 {
            0 => PathState::Missing,
            1 => PathState::NotRegular,
            2 => PathState::NotExecutable,
            _ => PathState::File { head },
        };
        let state = match (knob as usize + i) % 5 {
            4 => PathState::Denied,
            _ => state,
        };
        env.paths.push(PathFact { path, state });
    }
    let report = elf_rules::check(&bytes, &env);
    // elf-check reads only parts of a file (pread): the same report.
    let image = elf_rules::Image::read(bytes.len() as u64, host_machine, |off, n| {
        let start = off as usize;
        Ok(bytes[start..(start + n).min(bytes.len())].to_vec())
    })
    .unwrap();
    assert_eq!(
        serde_json::to_string(&report).unwrap(),
        serde_json::to_string(&elf_rules::check(&image, &env)).unwrap(),
        "reading parts changed the report"
    );
    let decisive: Vec<_> = report.problems.iter().filter(|p| p.decisive).collect();
    assert!(decisive.len() <= 1, "more than one decisive problem");
    if let Some(d) = decisive.first() {
        assert_eq!(d.severity, Severity::Error);
        let first_error = report
            .problems
            .iter()
            .find(|p| p.severity == Severity::Error)
            .unwrap();
        assert_eq!(first_error.rule, d.rule, "decisive is the first error");
    }
    for p in &report.problems {
        if let Some(i) = p.phdr {
            assert!(i < report.program_headers.len() || report.program_headers.is_empty());
        }
    }
    let _ = elf_rules::explain(&report, Some("EINVAL"), true);
    let _ = elf_rules::explain(&report, None, false);
    serde_json::to_string(&report).expect("report serializes");
});
