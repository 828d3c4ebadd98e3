//! bad-elf: writes a small static x86-64 ELF executable with one chosen
//! loader defect, for lab 5-bad-elf and the elf-check / exec-trace tests.
//!
//!   bad-elf [DEFECT] [--seed S] [-o PATH] [--describe] [--list]
//!
//! The file is deterministic for a defect and seed; the seed moves the load
//! address, the code's offset and the defective segment. `--describe`
//! prints the ground truth (expected errno, signal, program header, rule id)
//! as JSON instead of writing the file.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::ExitCode;

/// One defect: name, what it breaks, and what the kernel does about it.
struct Defect {
    name: &'static str,
    about: &'static str,
    /// Rule id of `kdiag elf-check`.
    rule: Option<&'static str>,
    phdr: Option<usize>,
    errno: Option<&'static str>,
    /// "before-point-of-no-return", "after-point-of-no-return", "after-exec", "none".
    stage: &'static str,
    signal: Option<&'static str>,
    si_code: Option<&'static str>,
    exit_code: Option<i32>,
}

const DEFECTS: &[Defect] = &[
    Defect {
        name: "congruence",
        about: "2nd PT_LOAD: p_offset and p_vaddr differ modulo the page size, p_align 0x20 hides it (the lab's bad_elf)",
        rule: Some("load-congruence"),
        phdr: Some(1),
        errno: Some("EINVAL"),
        stage: "after-point-of-no-return",
        signal: Some("SIGSEGV"),
        si_code: Some("SI_KERNEL"),
        exit_code: None,
    },
    Defect {
        name: "filesz-gt-memsz",
        about: "2nd PT_LOAD: p_filesz larger than p_memsz",
        rule: Some("load-filesz-gt-memsz"),
        phdr: Some(1),
        errno: Some("EINVAL"),
        stage: "after-point-of-no-return",
        signal: Some("SIGSEGV"),
        si_code: Some("SI_KERNEL"),
        exit_code: None,
    },
    Defect {
        name: "entry-in-kernel",
        about: "e_entry in the kernel's half of the address space (>= TASK_SIZE)",
        rule: Some("entry-beyond-task-size"),
        phdr: None,
        errno: Some("EINVAL"),
        stage: "after-point-of-no-return",
        signal: Some("SIGSEGV"),
        si_code: Some("SI_KERNEL"),
        exit_code: None,
    },
    Defect {
        name: "huge-memsz",
        about: "2nd PT_LOAD: p_memsz so large the zero-filled part ends past TASK_SIZE",
        rule: Some("load-bss-beyond-task-size"),
        phdr: Some(1),
        errno: Some("ENOMEM"),
        stage: "after-point-of-no-return",
        signal: Some("SIGSEGV"),
        si_code: Some("SI_KERNEL"),
        exit_code: None,
    },
    Defect {
        name: "no-load",
        about: "no PT_LOAD at all: execve succeeds, then the program faults at its entry point",
        rule: Some("no-load"),
        phdr: None,
        errno: None,
        stage: "after-exec",
        signal: Some("SIGSEGV"),
        si_code: Some("SEGV_MAPERR"),
        exit_code: None,
    },
    Defect {
        name: "bad-interp",
        about: "PT_INTERP names an interpreter that does not exist",
        rule: Some("interp-missing"),
        phdr: Some(0),
        errno: Some("ENOENT"),
        stage: "before-point-of-no-return",
        signal: None,
        si_code: None,
        exit_code: None,
    },
    Defect {
        name: "bad-magic",
        about: "e_ident does not start with \\x7fELF",
        rule: Some("not-elf"),
        phdr: None,
        errno: Some("ENOEXEC"),
        stage: "before-point-of-no-return",
        signal: None,
        si_code: None,
        exit_code: None,
    },
    Defect {
        name: "good",
        about: "no defect: runs and exits 0",
        rule: None,
        phdr: None,
        errno: None,
        stage: "none",
        signal: None,
        si_code: None,
        exit_code: Some(0),
    },
];

const PAGE: u64 = 0x1000;
/// TASK_SIZE of x86-64 with 4-level paging.
const TASK_SIZE: u64 = 0x7fff_ffff_f000;
const EHDR: usize = 64;
const PHDR: usize = 56;
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_GNU_STACK: u32 = 0x6474_e551;
const R: u32 = 4;
const W: u32 = 2;
const X: u32 = 1;

/// exit(0): xor edi,edi; mov eax,60; syscall.
const EXIT0: [u8; 9] = [0x31, 0xff, 0xb8, 0x3c, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// splitmix64: small, deterministic, good enough to spread layouts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy)]
struct Phdr {
    p_type: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

/// The layout every defect starts from, and what the defect changes.
struct Image {
    entry: u64,
    phdrs: Vec<Phdr>,
    /// Bytes after the headers, at file offset `body_at`.
    body: Vec<u8>,
    body_at: usize,
    magic: [u8; 4],
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

fn build(defect: &str, seed: u64) -> Vec<u8> {
    // Seed 0 gives the classic layout; others vary address and offsets.
    let mut rng = Rng(seed);
    let (base, pad) = if seed == 0 {
        (0x40_0000, 0)
    } else {
        (0x40_0000 + rng.below(0x100) * 0x1_0000, rng.below(8) * 0x10)
    };
    let nph = match defect {
        "no-load" => 1,
        "good" | "entry-in-kernel" | "bad-magic" => 2,
        _ => 3,
    };
    let body_at = EHDR + nph * PHDR;
    // Code after the headers, 16-byte aligned plus the seeded padding.
    let code_at = round_up(body_at as u64, 0x10) + pad;
    let mut body = vec![0u8; (code_at as usize) - body_at];
    body.extend_from_slice(&EXIT0);
    let text_end = body_at as u64 + body.len() as u64;
    let text = Phdr {
        p_type: PT_LOAD,
        flags: R | X,
        offset: 0,
        vaddr: base,
        filesz: text_end,
        memsz: text_end,
        align: PAGE,
    };
    let stack = Phdr {
        p_type: PT_GNU_STACK,
        flags: R | W,
        offset: 0,
        vaddr: 0,
        filesz: 0,
        memsz: 0,
        align: 0x10,
    };
    let mut img = Image {
        entry: base + code_at,
        phdrs: vec![text, stack],
        body,
        body_at,
        magic: *b"\x7fELF",
    };
    // A second PT_LOAD for data, 0x20-aligned in the file right after the code.
    let data_at = round_up(text_end, 0x20) + 0x20 * rng.below(4);
    let data_page = base + PAGE * (1 + rng.below(4));
    let data = |img: &mut Image, vaddr: u64, filesz: u64, memsz: u64, align: u64| {
        img.body.resize((data_at - body_at as u64) as usize, 0);
        img.body.extend((0..filesz).map(|i| i as u8));
        img.phdrs.insert(
            1,
            Phdr {
                p_type: PT_LOAD,
                flags: R | W,
                offset: data_at,
                vaddr,
                filesz,
                memsz,
                align,
            },
        );
    };
    match defect {
        "good" => {}
        "congruence" => {
            // The lab's case: offset 0x..20-aligned, address page-aligned,
            // p_align 0x20 on both loads so readelf sees nothing wrong.
            img.phdrs[0].align = 0x20;
            data(&mut img, data_page, 0x20, 0x28, 0x20);
        }
        "filesz-gt-memsz" => {
            data(&mut img, data_page + (data_at % PAGE), 0x40, 0x20, PAGE);
        }
        "huge-memsz" => {
            let vaddr = data_page + (data_at % PAGE);
            let memsz = TASK_SIZE - base + PAGE * (1 + rng.below(0x100));
            data(&mut img, vaddr, 0x20, memsz, PAGE);
        }
        "entry-in-kernel" => {
            img.entry = 0xffff_ffff_8100_0000 + PAGE * rng.below(0x100);
        }
        "no-load" => {
            img.phdrs.remove(0);
        }
        "bad-interp" => {
            let path = format!("/nonexistent/kdiag-ld-{:x}.so.1\0", rng.below(0x1_0000));
            let at = img.body_at as u64 + img.body.len() as u64;
            img.body.extend_from_slice(path.as_bytes());
            img.phdrs.insert(
                0,
                Phdr {
                    p_type: PT_INTERP,
                    flags: R,
                    offset: at,
                    vaddr: base + at,
                    filesz: path.len() as u64,
                    memsz: path.len() as u64,
                    align: 1,
                },
            );
            let end = img.body_at as u64 + img.body.len() as u64;
            img.phdrs[1].filesz = end;
            img.phdrs[1].memsz = end;
        }
        "bad-magic" => img.magic = *b"\x7fELG",
        other => unreachable!("unknown defect {other}"),
    }
    assert_eq!(img.phdrs.len(), nph, "header count");
    write_elf(&img)
}

fn write_elf(img: &Image) -> Vec<u8> {
    let mut f = Vec::with_capacity(img.body_at + img.body.len());
    f.extend_from_slice(&img.magic);
    // ELFCLASS64, little-endian, EV_CURRENT, System V ABI, padding.
    f.extend_from_slice(&[2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    f.extend_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    f.extend_from_slice(&1u32.to_le_bytes()); // e_version
    f.extend_from_slice(&img.entry.to_le_bytes());
    f.extend_from_slice(&(EHDR as u64).to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff: no sections
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    f.extend_from_slice(&(EHDR as u16).to_le_bytes());
    f.extend_from_slice(&(PHDR as u16).to_le_bytes());
    f.extend_from_slice(&(img.phdrs.len() as u16).to_le_bytes());
    f.extend_from_slice(&[0; 6]); // e_shentsize, e_shnum, e_shstrndx
    for p in &img.phdrs {
        f.extend_from_slice(&p.p_type.to_le_bytes());
        f.extend_from_slice(&p.flags.to_le_bytes());
        f.extend_from_slice(&p.offset.to_le_bytes());
        f.extend_from_slice(&p.vaddr.to_le_bytes());
        f.extend_from_slice(&p.vaddr.to_le_bytes()); // p_paddr
        f.extend_from_slice(&p.filesz.to_le_bytes());
        f.extend_from_slice(&p.memsz.to_le_bytes());
        f.extend_from_slice(&p.align.to_le_bytes());
    }
    f.extend_from_slice(&img.body);
    f
}

fn opt(v: Option<&str>) -> String {
    v.map_or("null".into(), |s| format!("\"{s}\""))
}

fn describe(d: &Defect, seed: u64, bytes: &[u8]) -> String {
    let entry = u64::from_le_bytes(bytes[24..32].try_into().unwrap_or_default());
    format!(
        "{{\n  \"workload\": \"bad-elf\",\n  \"defect\": \"{}\",\n  \"seed\": {seed},\n  \"about\": \"{}\",\n  \
         \"rule\": {},\n  \"phdr\": {},\n  \"errno\": {},\n  \"stage\": \"{}\",\n  \"signal\": {},\n  \
         \"si_code\": {},\n  \"exit_code\": {},\n  \"entry\": \"{entry:#x}\",\n  \"size\": {}\n}}",
        d.name,
        d.about.replace('\\', "\\\\"),
        opt(d.rule),
        d.phdr.map_or("null".into(), |i| i.to_string()),
        opt(d.errno),
        d.stage,
        opt(d.signal),
        opt(d.si_code),
        d.exit_code.map_or("null".into(), |c| c.to_string()),
        bytes.len()
    )
}

const USAGE: &str = "usage: bad-elf [DEFECT] [--seed S] [-o PATH] [--describe] [--list]\n\
    Writes a small static x86-64 ELF executable with one loader defect\n\
    (default: congruence) to PATH (default ./bad-elf-DEFECT), marked executable.\n\
    --describe prints the ground truth as JSON instead; --list lists the defects.";

fn main() -> ExitCode {
    let mut defect = "congruence".to_string();
    let mut seed = 0u64;
    let mut out = None;
    let mut describe_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--list" => {
                for d in DEFECTS {
                    println!("{:<16} {}", d.name, d.about);
                }
                return ExitCode::SUCCESS;
            }
            "--describe" => describe_only = true,
            "--seed" => match args.next().and_then(|s| s.parse().ok()) {
                Some(s) => seed = s,
                None => return usage("--seed needs a number"),
            },
            "-o" | "--output" => match args.next() {
                Some(p) => out = Some(p),
                None => return usage("-o needs a path"),
            },
            s if s.starts_with('-') => return usage(&format!("unknown option {s}")),
            s => defect = s.to_string(),
        }
    }
    let Some(d) = DEFECTS.iter().find(|d| d.name == defect) else {
        return usage(&format!("unknown defect {defect:?} (see --list)"));
    };
    let bytes = build(d.name, seed);
    if describe_only {
        println!("{}", describe(d, seed, &bytes));
        return ExitCode::SUCCESS;
    }
    let path = out.unwrap_or_else(|| format!("./bad-elf-{}", d.name));
    let written = fs::write(&path, &bytes)
        .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o755)));
    if let Err(e) = written {
        eprintln!("bad-elf: cannot write {path}: {e}");
        return ExitCode::FAILURE;
    }
    println!("{path}");
    ExitCode::SUCCESS
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("bad-elf: {msg}\n{USAGE}");
    ExitCode::from(2)
}
