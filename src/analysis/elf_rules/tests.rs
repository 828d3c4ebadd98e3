//! Rules on hand-built ELF fixtures, including the lab's bad_elf.

use super::*;
use crate::model::elf::{PathFact, PathState};

/// (type, flags, offset, vaddr, filesz, memsz, align)
type Ph = (u32, u32, u64, u64, u64, u64, u64);

/// An x86-64 ELF64 with these program headers, padded to `len` bytes.
fn elf(e_type: u16, entry: u64, phdrs: &[Ph], len: usize) -> Vec<u8> {
    let mut f = b"\x7fELF\x02\x01\x01".to_vec();
    f.resize(16, 0);
    f.extend_from_slice(&e_type.to_le_bytes());
    f.extend_from_slice(&EM_X86_64.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&entry.to_le_bytes());
    f.extend_from_slice(&64u64.to_le_bytes());
    f.extend_from_slice(&[0; 12]);
    f.extend_from_slice(&64u16.to_le_bytes());
    f.extend_from_slice(&56u16.to_le_bytes());
    f.extend_from_slice(&(phdrs.len() as u16).to_le_bytes());
    f.extend_from_slice(&[0; 6]);
    for &(t, fl, off, va, fs, ms, al) in phdrs {
        for (v, w) in [
            (t as u64, 4),
            (fl as u64, 4),
            (off, 8),
            (va, 8),
            (va, 8),
            (fs, 8),
            (ms, 8),
            (al, 8),
        ] {
            f.extend_from_slice(&v.to_le_bytes()[..w]);
        }
    }
    f.resize(len.max(f.len()), 0);
    f
}

fn env() -> ElfEnv {
    ElfEnv {
        host_machine: EM_X86_64,
        page_size: 4096,
        mmap_min_addr: 65536,
        task_size: 0x7fff_ffff_f000,
        commit_limit: Some(16 << 30),
        mode: Some(0o755),
        paths: vec![],
    }
}

const RX: u32 = PF_R | PF_X;
const RW: u32 = PF_R | PF_W;
const RWX: u32 = PF_R | PF_W | PF_X;

/// The lab's bad_elf (so2-lab.md, Exercise 5), header for header.
fn lab_bad_elf() -> Vec<u8> {
    elf(
        ET_EXEC,
        0x400130,
        &[
            (PT_LOAD, RWX, 0xf0, 0x4000f0, 0xbe11, 0xbe18, 0x10),
            (PT_LOAD, RW, 0xbf20, 0x40c000, 0x2c20, 0x3008, 0x20),
            (PT_GNU_STACK, RWX, 0, 0, 0, 0, 0x10),
        ],
        60992,
    )
}

fn good() -> Vec<u8> {
    elf(
        ET_EXEC,
        0x4000b0,
        &[(PT_LOAD, RX, 0, 0x400000, 0xc0, 0xc0, 0x1000)],
        0xc0,
    )
}

fn rules(r: &ElfReport) -> Vec<&str> {
    r.problems.iter().map(|p| p.rule).collect()
}

#[test]
fn lab_bad_elf_is_a_congruence_failure_after_the_point_of_no_return() {
    let r = check(&lab_bad_elf(), &env());
    let d = r.decisive().expect("a decisive problem");
    assert_eq!(d.rule, "load-congruence");
    assert_eq!(d.phdr, Some(1));
    assert_eq!(d.errno, Some("EINVAL"));
    assert_eq!(d.stage, Stage::AfterPointOfNoReturn);
    assert_eq!((d.signal, d.si_code), (Some("SIGSEGV"), Some("SI_KERNEL")));
    let n = |name: &str| d.numbers.iter().find(|n| n.name == name).map(|n| n.value);
    assert_eq!(n("p_offset"), Some(0xbf20));
    assert_eq!(n("p_vaddr"), Some(0x40c000));
    assert!(d.message.contains("0xbf20") && d.message.contains("0x40c000"));
    assert!(d.message.contains("p_align 0x20"), "{}", d.message);
    assert!(
        d.quote
            .contains("congruent values for p_vaddr and p_offset")
    );
    // The RWE GNU_STACK is reported too, as a warning.
    assert!(rules(&r).contains(&"exec-stack"));
    assert_eq!(
        explain(&r, Some("EINVAL"), true).map(|p| p.rule),
        Some("load-congruence")
    );
    assert!(explain(&r, Some("ENOENT"), false).is_none());
}

#[test]
fn good_file_is_clean() {
    let r = check(&good(), &env());
    assert!(r.problems.is_empty(), "{:?}", rules(&r));
    assert_eq!(r.program_headers.len(), 1);
}

#[test]
fn segment_rules_in_kernel_order() {
    let cases: &[(&[Ph], u64, &str, &str)] = &[
        (
            &[(PT_LOAD, RX, 0, 0x400000, 0x40, 0x20, 0x1000)],
            0x400000,
            "load-filesz-gt-memsz",
            "EINVAL",
        ),
        (
            &[(PT_LOAD, RW, 0, 0x400000, 0x40, 0x8000_0000_0000, 0x1000)],
            0x400000,
            "load-bss-beyond-task-size",
            "ENOMEM",
        ),
        (
            &[(PT_LOAD, RX, 0, 0x1000, 0xc0, 0xc0, 0x1000)],
            0x1000,
            "load-below-mmap-min-addr",
            "EPERM",
        ),
        (
            &[(PT_LOAD, RX, 0, 0xffff_ffff_8100_0000, 0xc0, 0xc0, 0x1000)],
            0x400000,
            "load-map-beyond-task-size",
            "ENOMEM",
        ),
        (
            &[(PT_LOAD, RX, 0, 0x400000, 0xc0, 0xc0, 0x1000)],
            0xffff_ffff_8100_0000,
            "entry-beyond-task-size",
            "EINVAL",
        ),
        (
            &[(PT_LOAD, RW, 0, 0x400000, 0x1100, 0x3000, 0x1000)],
            0x400000,
            "load-file-range",
            "EFAULT",
        ),
    ];
    for (phdrs, entry, rule, errno) in cases {
        let r = check(&elf(ET_EXEC, *entry, phdrs, 0xc0), &env());
        let d = r
            .decisive()
            .unwrap_or_else(|| panic!("{rule}: nothing decisive"));
        assert_eq!((d.rule, d.errno), (*rule, Some(*errno)));
        assert_eq!(d.stage, Stage::AfterPointOfNoReturn, "{rule}");
    }
}

#[test]
fn failures_before_the_point_of_no_return() {
    let mut e = env();
    let path = "/nonexistent/ld.so";
    let mut f = elf(
        ET_EXEC,
        0x4000b0,
        &[
            (PT_INTERP, PF_R, 0x100, 0, path.len() as u64 + 1, 0, 1),
            (PT_LOAD, RX, 0, 0x400000, 0x120, 0x120, 0x1000),
        ],
        0x120,
    );
    f[0x100..0x100 + path.len()].copy_from_slice(path.as_bytes());
    assert_eq!(paths_to_check(&f, EM_X86_64), vec![path.to_string()]);
    // Unknown to the environment: nothing claimed.
    assert!(check(&f, &e).problems.is_empty());
    e.paths.push(PathFact {
        path: path.into(),
        state: PathState::Missing,
    });
    let d = check(&f, &e).decisive().cloned().unwrap();
    assert_eq!(
        (d.rule, d.errno, d.phdr),
        ("interp-missing", Some("ENOENT"), Some(0))
    );
    assert_eq!(d.stage, Stage::BeforePointOfNoReturn);
    assert_eq!(d.signal, None);
    e.paths[0].state = PathState::File {
        head: b"#!/bin/sh\n".repeat(8),
    };
    assert_eq!(check(&f, &e).decisive().unwrap().errno, Some("ELIBBAD"));
    e.paths[0].state = PathState::File {
        head: b"#!/bin/sh\n".to_vec(),
    };
    assert_eq!(check(&f, &e).decisive().unwrap().errno, Some("EIO"));
    e.paths[0].state = PathState::File {
        head: good()[..64].to_vec(),
    };
    assert!(check(&f, &e).problems.is_empty());
    f[0x100 + path.len()] = b'x';
    assert_eq!(
        check(&f, &e).decisive().unwrap().rule,
        "interp-not-terminated"
    );

    let decisive = |b: &[u8]| check(&b, &env()).decisive().map(|p| (p.rule, p.errno));
    let mut bad = good();
    bad[3] = b'G';
    assert_eq!(decisive(&bad), Some(("not-elf", Some("ENOEXEC"))));
    assert_eq!(decisive(b""), Some(("not-elf", Some("ENOEXEC"))));
    assert_eq!(
        decisive(&good()[..30]),
        Some(("header-truncated", Some("ENOEXEC")))
    );
    let mut bad = good();
    bad[56] = 0; // e_phnum
    assert_eq!(decisive(&bad), Some(("phnum", Some("ENOEXEC"))));
    let mut bad = good();
    bad[54] = 32; // e_phentsize
    assert_eq!(decisive(&bad), Some(("phentsize", Some("ENOEXEC"))));
    let mut bad = good();
    bad[18] = EM_AARCH64 as u8;
    assert_eq!(decisive(&bad), Some(("elf-machine", Some("ENOEXEC"))));
    let mut bad = good();
    bad[16] = 1; // ET_REL
    assert_eq!(decisive(&bad), Some(("elf-type", Some("ENOEXEC"))));
    let mut e = env();
    e.mode = Some(0o644);
    assert_eq!(check(&good(), &e).decisive().unwrap().errno, Some("EACCES"));
}

#[test]
fn class_and_data_are_ignored_by_the_kernel_but_warned_about() {
    let mut f = good();
    f[4] = 1;
    f[5] = 2;
    let r = check(&f, &env());
    assert!(r.decisive().is_none());
    assert_eq!(rules(&r), ["elf-class", "elf-data"]);
}

#[test]
fn no_load_and_entry_outside_crash_in_user_space() {
    let r = check(
        &elf(
            ET_EXEC,
            0x400080,
            &[(PT_GNU_STACK, RW, 0, 0, 0, 0, 0x10)],
            0x80,
        ),
        &env(),
    );
    let d = r.decisive().unwrap();
    assert_eq!(
        (d.rule, d.stage, d.si_code),
        ("no-load", Stage::AfterExec, Some("SEGV_MAPERR"))
    );
    assert_eq!(explain(&r, None, false).map(|p| p.rule), Some("no-load"));
    let r = check(
        &elf(
            ET_EXEC,
            0x400080,
            &[(PT_LOAD, PF_R, 0, 0x400000, 0xc0, 0xc0, 0x1000)],
            0xc0,
        ),
        &env(),
    );
    assert_eq!(r.decisive().unwrap().si_code, Some("SEGV_ACCERR"));
}

#[test]
fn warnings_the_kernel_tolerates() {
    let f = elf(
        ET_EXEC,
        0x4000b0,
        &[
            (PT_LOAD, RX, 0, 0x400000, 0x1000, 0x1000, 0x3000),
            (PT_LOAD, RW, 0x1000, 0x3ff000, 0x100, 0x100, 0x1000),
            (PT_LOAD, RW, 0x1800, 0x400800, 0x100, 0x100, 0x1000),
        ],
        0x2000,
    );
    let r = check(&f, &env());
    assert!(r.decisive().is_none(), "{:?}", rules(&r));
    let got = rules(&r);
    for want in ["align-not-power-of-two", "load-order", "load-overlap"] {
        assert!(got.contains(&want), "{want} missing from {got:?}");
    }
    assert!(r.problems.iter().all(|p| p.severity == Severity::Warning));
}

#[test]
fn dyn_with_zero_extent_is_einval() {
    let r = check(
        &elf(ET_DYN, 0, &[(PT_LOAD, RX, 0, 0, 0, 0, 0x1000)], 0x80),
        &env(),
    );
    assert_eq!(
        r.decisive().map(|p| (p.rule, p.errno)),
        Some(("dyn-zero-extent", Some("EINVAL")))
    );
}

#[test]
fn scripts_name_their_interpreter() {
    let s: &[u8] = b"#! /nonexistent/interp -x\necho hi\n";
    assert_eq!(
        paths_to_check(&s, EM_X86_64),
        vec!["/nonexistent/interp".to_string()]
    );
    let mut e = env();
    e.paths.push(PathFact {
        path: "/nonexistent/interp".into(),
        state: PathState::Missing,
    });
    let r = check(&s, &e);
    assert_eq!(
        r.kind,
        FileKind::Script {
            interpreter: "/nonexistent/interp".into()
        }
    );
    assert_eq!(
        r.decisive().map(|p| (p.rule, p.errno)),
        Some(("script-interpreter", Some("ENOENT")))
    );
}

/// Always-on robustness check (the fuzz target goes much further):
/// every truncation and many byte corruptions of the lab's file.
#[test]
fn never_panics_on_truncated_or_corrupted_files() {
    let lab = lab_bad_elf();
    let head = &lab[..64 + 3 * 56 + 8];
    for len in 0..head.len() {
        check(&&head[..len], &env());
    }
    let mut state = 0x1234_5678_u64;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut b = head.to_vec();
        let at = (state % b.len() as u64) as usize;
        b[at] = (state >> 32) as u8;
        let at2 = ((state >> 16) % b.len() as u64) as usize;
        b[at2] ^= 0xff;
        let r = check(&b, &env());
        assert!(r.problems.iter().filter(|p| p.decisive).count() <= 1);
        assert_same_through_an_image(&b);
    }
}

/// Reading only the parts the rules need (what elf-check does) gives the
/// same report as reading the whole file.
fn assert_same_through_an_image(file: &[u8]) {
    let image = Image::read(file.len() as u64, EM_X86_64, |off, n| {
        let start = off as usize;
        Ok(file[start..(start + n).min(file.len())].to_vec())
    })
    .unwrap();
    let whole = serde_json::to_string(&check(&file, &env())).unwrap();
    let parts = serde_json::to_string(&check(&image, &env())).unwrap();
    assert_eq!(whole, parts, "{file:02x?}");
    assert_eq!(
        paths_to_check(&file, EM_X86_64),
        paths_to_check(&image, EM_X86_64)
    );
}

#[test]
fn images_read_only_what_the_rules_look_at() {
    // The lab's file, a PT_INTERP far into the file, scripts, a huge table.
    let mut far = elf(
        ET_DYN,
        0x1000,
        &[
            (PT_INTERP, PF_R, 0x10_0000, 0, 28, 28, 1),
            (PT_LOAD, RX, 0, 0, 0x1000, 0x1000, 0x1000),
        ],
        0x10_0000,
    );
    far.extend_from_slice(b"/lib64/ld-linux-x86-64.so.2\0");
    let table: Vec<Ph> = (0..1170)
        .map(|_| (PT_LOAD, RX, 0, 0x400000, 0x100, 0x100, 0x1000))
        .collect();
    for file in [
        lab_bad_elf(),
        good(),
        far.clone(),
        b"#!/bin/sh -e\necho hi\n".to_vec(),
        elf(ET_EXEC, 0x400000, &table, 0),
        Vec::new(),
    ] {
        assert_same_through_an_image(&file);
    }
    // A 2 GiB file costs a few reads of at most 64 KiB.
    let mut reads = Vec::new();
    let image = Image::read(2 << 30, EM_X86_64, |off, n| {
        reads.push((off, n));
        let start = off as usize;
        let mut v: Vec<u8> = far.get(start..).unwrap_or_default().to_vec();
        v.resize(n, 0);
        Ok(v)
    })
    .unwrap();
    assert_eq!(reads.len(), 3, "{reads:?}");
    assert!(image.bytes_read() < 70_000);
    assert_eq!(
        check(&image, &env()).interpreter.as_deref(),
        Some("/lib64/ld-linux-x86-64.so.2")
    );
}

/// A 32-bit i386 program (exit via int 0x80) runs on x86-64 through the
/// compat loader; the same file is foreign to an arm64 kernel.
#[test]
fn elf32_i386_goes_through_the_compat_loader() {
    let code = [0xb8, 1, 0, 0, 0, 0x31, 0xdb, 0xcd, 0x80];
    let entry: u32 = 0x0804_8000 + 52 + 32;
    let mut f = b"\x7fELF\x01\x01\x01".to_vec();
    f.resize(16, 0);
    for (v, w) in [
        (2u32, 2),
        (3, 2),
        (1, 4),
        (entry, 4),
        (52, 4),
        (0, 4),
        (0, 4),
        (52, 2),
        (32, 2),
        (1, 2),
        (0, 2),
        (0, 2),
        (0, 2),
    ] {
        f.extend_from_slice(&v.to_le_bytes()[..w]);
    }
    let total = (52 + 32 + code.len()) as u32;
    for v in [
        1,
        0,
        0x0804_8000,
        0x0804_8000,
        total,
        total,
        PF_R | PF_X,
        0x1000,
    ] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(&code);
    let r = check(&f, &env());
    assert!(r.problems.is_empty(), "{:?}", rules(&r));
    let h = r.header.as_ref().unwrap();
    assert_eq!((h.class, h.machine, h.phentsize), (32, EM_386, 32));
    assert_eq!(r.program_headers[0].vaddr, 0x0804_8000);
    let mut arm = env();
    arm.host_machine = EM_AARCH64;
    assert_eq!(
        check(&f, &arm).decisive().map(|p| p.rule),
        Some("elf-machine")
    );
}

#[test]
fn big_endian_files_are_foreign_and_say_so() {
    let mut f = good();
    f[5] = 2;
    f[18..20].copy_from_slice(&EM_AARCH64.to_be_bytes());
    let r = check(&f, &env());
    let d = r.decisive().unwrap();
    assert_eq!((d.rule, d.errno), ("elf-machine", Some("ENOEXEC")));
    assert!(
        d.message.contains("big-endian") && d.message.contains("AArch64"),
        "{}",
        d.message
    );
}

#[test]
fn huge_tables_stay_bounded() {
    // 1170 overlapping PT_LOADs (the most the kernel reads): one overlap
    // warning per segment at most, not one per pair.
    let phdrs: Vec<Ph> = (0..1170)
        .map(|_| (PT_LOAD, RX, 0, 0x400000, 0x100, 0x100, 0x1000))
        .collect();
    let r = check(&elf(ET_EXEC, 0x400000, &phdrs, 0), &env());
    assert_eq!(r.program_headers.len(), 1170);
    assert!(r.problems.len() < 1200, "{}", r.problems.len());
    let mut f = elf(ET_EXEC, 0x400000, &phdrs, 0);
    f[56..58].copy_from_slice(&1171u16.to_le_bytes());
    assert_eq!(check(&f, &env()).decisive().map(|p| p.rule), Some("phnum"));
}

/// Memory accounting and ET_DYN reservations: ENOMEM, as measured on 6.18
/// (a 32 GiB bss on a 23.5 GiB machine without swap; a 128 TiB ET_DYN).
#[test]
fn oversized_images_are_enomem() {
    let phdrs = [(PT_LOAD, RWX, 0, 0x400000, 0xc0, 32 << 30, 0x1000)];
    let mut e = env();
    e.commit_limit = Some(24 << 30);
    let r = check(&elf(ET_EXEC, 0x4000b0, &phdrs, 0xc0), &e);
    assert_eq!(
        r.decisive().map(|p| (p.rule, p.errno)),
        Some(("load-bss-too-large", Some("ENOMEM")))
    );
    e.commit_limit = None; // vm.overcommit_memory=1
    assert!(
        check(&elf(ET_EXEC, 0x4000b0, &phdrs, 0xc0), &e)
            .problems
            .is_empty()
    );
    let phdrs = [(PT_LOAD, RX, 0, 0, 0xc0, 0x8000_0000_0000, 0x1000)];
    let r = check(&elf(ET_DYN, 0xb0, &phdrs, 0xc0), &env());
    assert_eq!(
        r.decisive().map(|p| (p.rule, p.errno)),
        Some(("load-map-beyond-task-size", Some("ENOMEM")))
    );
}
