//! bad-elf: writes a small static x86-64 ELF executable with one chosen
//! loader defect, for lab 5-bad-elf and the elf-check / exec-trace tests.
//!
//!   bad-elf [DEFECT] [--seed TOKEN] [-o PATH] [--describe] [--list]
//!   bad-elf [DEFECT] [--seed TOKEN] --duration D [--scratch DIR]
//!
//! The file is deterministic for a defect and seed. The seed moves the load
//! address, the code's offset and the defective segment, adds up to three
//! sound PT_LOADs before it (so which program header is broken varies), and
//! when no DEFECT is named picks how it is broken among the lab's family
//! (after the point of no return: congruence, filesz-gt-memsz, huge-memsz).
//! `--describe` prints the ground truth (expected errno, signal, program
//! header, rule id, the broken fields) as JSON instead of writing the file.
//!
//! With `--duration` (0: until SIGTERM) it is a service instead, for the
//! lab: it writes the file into its scratch directory and, like a
//! supervisor whose service crash-loops, starts it every two seconds and
//! logs how it ended, until the duration ends; the directory goes with it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use crate::seed::{COURSE_REFUSAL, Rng, Seed};
use crate::{Json, Scratch, Storage};

/// One defect: name, what it breaks, and what the kernel does about it.
pub struct Defect {
    name: &'static str,
    about: &'static str,
    /// Rule id of `kdiag elf-check`.
    rule: Option<&'static str>,
    errno: Option<&'static str>,
    /// "before-point-of-no-return", "after-point-of-no-return", "after-exec", "none".
    stage: &'static str,
    signal: Option<&'static str>,
    si_code: Option<&'static str>,
    exit_code: Option<i32>,
}

pub const DEFECTS: &[Defect] = &[
    Defect {
        name: "congruence",
        about: "the data PT_LOAD (the last one): p_offset and p_vaddr differ modulo the page size, p_align 0x20 hides it (the lab's bad_elf)",
        rule: Some("load-congruence"),
        errno: Some("EINVAL"),
        stage: "after-point-of-no-return",
        signal: Some("SIGSEGV"),
        si_code: Some("SI_KERNEL"),
        exit_code: None,
    },
    Defect {
        name: "filesz-gt-memsz",
        about: "the data PT_LOAD (the last one): p_filesz larger than p_memsz",
        rule: Some("load-filesz-gt-memsz"),
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
        errno: Some("EINVAL"),
        stage: "after-point-of-no-return",
        signal: Some("SIGSEGV"),
        si_code: Some("SI_KERNEL"),
        exit_code: None,
    },
    Defect {
        name: "huge-memsz",
        about: "the data PT_LOAD (the last one): p_memsz so large the zero-filled part ends past TASK_SIZE",
        rule: Some("load-bss-beyond-task-size"),
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

/// A generated file and where its defect is.
pub struct Built {
    pub bytes: Vec<u8>,
    phdrs: Vec<Phdr>,
    entry: u64,
    /// Index of the defective program header, if one is.
    broken: Option<usize>,
}

/// Defects a seed picks when none is named: the lab's family, a PT_LOAD
/// that fails after the point of no return.
const SEEDED: [&str; 3] = ["congruence", "filesz-gt-memsz", "huge-memsz"];

/// Build `defect`'s file for `seed`.
pub fn build(defect: &str, seed: &Seed) -> Built {
    // The default seed gives the classic layout (byte for byte the same as
    // earlier versions); others vary address, offsets and header count.
    let mut rng = if seed.is_default() {
        Rng::from_state(0)
    } else {
        seed.rng("bad-elf")
    };
    let (base, pad, extra) = if seed.is_default() {
        (0x40_0000, 0, 0)
    } else {
        (
            0x40_0000 + rng.below(0x100) * 0x1_0000,
            rng.below(8) * 0x10,
            rng.below(4) as usize,
        )
    };
    let has_data = SEEDED.contains(&defect);
    let extra = if has_data { extra } else { 0 };
    let nph = extra
        + match defect {
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
    // Sound PT_LOADs of 0x20 bytes, one page each, right after the code.
    let mut at = round_up(text_end, 0x20);
    for k in 0..extra {
        img.body.resize((at - body_at as u64) as usize, 0);
        img.body.extend((0..0x20u64).map(|i| (i + k as u64) as u8));
        img.phdrs.insert(
            1 + k,
            Phdr {
                p_type: PT_LOAD,
                flags: R | W,
                offset: at,
                vaddr: base + PAGE * (1 + k as u64) + at % PAGE,
                filesz: 0x20,
                memsz: 0x20,
                align: PAGE,
            },
        );
        at += 0x20;
    }
    // The defective PT_LOAD for data, 0x20-aligned in the file after them.
    let data_at = at + 0x20 * rng.below(4);
    let data_page = base + PAGE * (1 + extra as u64 + rng.below(4));
    let broken = 1 + extra;
    let data = |img: &mut Image, vaddr: u64, filesz: u64, memsz: u64, align: u64| {
        img.body.resize((data_at - body_at as u64) as usize, 0);
        img.body.extend((0..filesz).map(|i| i as u8));
        img.phdrs.insert(
            broken,
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
    let broken = match defect {
        _ if has_data => Some(broken),
        "bad-interp" => Some(0),
        _ => None,
    };
    Built {
        bytes: write_elf(&img),
        phdrs: img.phdrs,
        entry: img.entry,
        broken,
    }
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

/// What the broken header gets wrong: the fields to compare.
fn broken_fields(defect: &str) -> &'static [&'static str] {
    match defect {
        "congruence" => &["p_offset", "p_vaddr", "p_align"],
        "filesz-gt-memsz" => &["p_filesz", "p_memsz"],
        "huge-memsz" => &["p_memsz"],
        "entry-in-kernel" => &["e_entry"],
        "bad-interp" => &["PT_INTERP"],
        "bad-magic" => &["e_ident"],
        "no-load" => &["PT_LOAD"],
        _ => &[],
    }
}

/// The fields whose change alone fixes it (p_align hides a congruence
/// defect from readelf, but the kernel never reads it).
fn fix_fields(defect: &str) -> &'static [&'static str] {
    match defect {
        "congruence" => &["p_offset", "p_vaddr"],
        other => broken_fields(other),
    }
}

/// The command line of bad-elf (also what `describe` parses).
#[derive(Debug, Default)]
struct Args {
    defect: Option<String>,
    seed: Seed,
    out: Option<String>,
    describe: bool,
    list: bool,
    help: bool,
    /// Service mode: run for this long (zero: until a signal).
    duration: Option<Duration>,
    scratch: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => a.help = true,
            "--list" => a.list = true,
            "--describe" => a.describe = true,
            "--seed" => a.seed = Seed::parse(it.next().ok_or("--seed needs a token")?)?,
            s if s.starts_with("--seed=") => a.seed = Seed::parse(&s["--seed=".len()..])?,
            "-o" | "--output" => a.out = Some(it.next().ok_or("-o needs a path")?.clone()),
            "--duration" => a.duration = Some(duration(it.next().ok_or("--duration needs D")?)?),
            s if s.starts_with("--duration=") => {
                a.duration = Some(duration(&s["--duration=".len()..])?)
            }
            "--scratch" => a.scratch = Some(it.next().ok_or("--scratch needs a DIR")?.into()),
            s if s.starts_with("--scratch=") => a.scratch = Some(s["--scratch=".len()..].into()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s => a.defect = Some(s.to_string()),
        }
    }
    Ok(a)
}

fn duration(v: &str) -> Result<Duration, String> {
    crate::cli::parse_duration(v).ok_or(format!(
        "--duration: bad value {v:?} (e.g. 30, 30s, 500ms, 2m)"
    ))
}

impl Args {
    /// The named defect; without one, the default seed's is the lab's
    /// (congruence) and other seeds pick among the lab's family.
    fn defect(&self) -> Result<&'static Defect, String> {
        let name = match &self.defect {
            Some(d) => d.as_str(),
            None if self.seed.is_default() => "congruence",
            None => self.seed.rng("bad-elf-defect").pick(&SEEDED),
        };
        DEFECTS
            .iter()
            .find(|d| d.name == name)
            .ok_or(format!("unknown defect {name:?} (see --list)"))
    }
}

fn hex(v: u64) -> Json {
    Json::str(format!("{v:#x}"))
}

/// The `--describe` document for bad-elf's arguments.
pub(crate) fn document(args: &[String]) -> Result<Json, String> {
    let a = parse(args)?;
    let d = a.defect()?;
    let built = build(d.name, &a.seed);
    let opt = |v: Option<&str>| v.map_or(Json::Null, Json::str);
    let mut workload = crate::header("bad-elf", a.seed.token(), args, Storage::None);
    workload.push(("defect", Json::str(d.name)));
    let phdr_values = built.broken.map_or(Json::Null, |i| {
        let p = &built.phdrs[i];
        Json::obj([
            (
                "p_type",
                Json::str(if p.p_type == PT_INTERP {
                    "PT_INTERP"
                } else {
                    "PT_LOAD"
                }),
            ),
            ("p_offset", hex(p.offset)),
            ("p_vaddr", hex(p.vaddr)),
            ("p_filesz", hex(p.filesz)),
            ("p_memsz", hex(p.memsz)),
            ("p_align", hex(p.align)),
        ])
    });
    let expect = Json::obj([
        ("class", Json::str("exec")),
        ("summary", Json::str(d.about)),
        ("defect", Json::str(d.name)),
        ("about", Json::str(d.about)),
        ("rule", opt(d.rule)),
        (
            "phdr",
            built.broken.map_or(Json::Null, |i| Json::Int(i as i64)),
        ),
        ("phnum", Json::Int(built.phdrs.len() as i64)),
        ("broken_fields", Json::strs(broken_fields(d.name))),
        ("fix_fields", Json::strs(fix_fields(d.name))),
        ("phdr_values", phdr_values),
        ("errno", opt(d.errno)),
        ("stage", Json::str(d.stage)),
        ("signal", opt(d.signal)),
        ("si_code", opt(d.si_code)),
        (
            "exit_code",
            d.exit_code.map_or(Json::Null, |c| Json::Int(c as i64)),
        ),
        ("entry", hex(built.entry)),
        ("size", Json::Int(built.bytes.len() as i64)),
    ]);
    Ok(crate::envelope(workload, expect))
}

const USAGE: &str = "usage: bad-elf [DEFECT] [--seed TOKEN] [-o PATH] [--describe] [--list]\n\
    \x20      bad-elf [DEFECT] [--seed TOKEN] --duration D [--scratch DIR]\n\
    Writes a small static x86-64 ELF executable with one loader defect\n\
    (default: congruence; a --seed picks among congruence, filesz-gt-memsz\n\
    and huge-memsz) to PATH (default ./bad-elf-DEFECT, or ./bad_elf for a\n\
    seed-picked defect), marked executable.\n\
    --describe prints the ground truth as JSON instead; --list lists the defects.\n\
    With --duration D (0 = until SIGTERM) it runs as a crash-looping service\n\
    instead: it writes the file into its scratch directory (--scratch DIR,\n\
    removed on exit), starts it every 2 s and logs how it ended.";

/// The bad-elf binary.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = match parse(&args) {
        Ok(a) => a,
        Err(msg) => return usage(&msg),
    };
    if a.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if a.list {
        for d in DEFECTS {
            println!("{:<16} {}", d.name, d.about);
        }
        return ExitCode::SUCCESS;
    }
    let d = match a.defect() {
        Ok(d) => d,
        Err(msg) => return usage(&msg),
    };
    if a.describe {
        if a.seed.is_course() {
            return usage(COURSE_REFUSAL);
        }
        return match document(&args) {
            Ok(doc) => {
                println!("{}", doc.pretty());
                ExitCode::SUCCESS
            }
            Err(msg) => usage(&msg),
        };
    }
    let bytes = build(d.name, &a.seed).bytes;
    if let Some(duration) = a.duration {
        return match serve(&a, &bytes, duration) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                eprintln!("bad-elf: error: {msg}");
                ExitCode::FAILURE
            }
        };
    }
    // A seed-picked defect stays unnamed: the file name would give it away.
    let path = a.out.unwrap_or_else(|| match a.defect {
        None if !a.seed.is_default() => "./bad_elf".to_string(),
        _ => format!("./bad-elf-{}", d.name),
    });
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
    eprintln!("bad-elf: error: {msg}\n{USAGE}");
    ExitCode::from(2)
}

/// Seconds between two starts of the service.
const RESTART: Duration = Duration::from_secs(2);
/// The service's file in the scratch directory.
const SERVICE: &str = "bad_elf";

/// Service mode: write `bytes` into a scratch directory and start it every
/// [`RESTART`], logging how each attempt ended, for `duration` (zero: until
/// a signal, on which the scratch directory is removed).
fn serve(a: &Args, bytes: &[u8], duration: Duration) -> Result<(), String> {
    // One directory per run (the default): labs may run side by side.
    let dir = a.scratch.clone().unwrap_or_else(|| {
        crate::scratch::base(Storage::Any).join(format!("bad-elf-{}", std::process::id()))
    });
    let scratch = Scratch::create(dir, Storage::Any, 1 << 20, a.scratch.is_none())?;
    let path = scratch.file(SERVICE);
    scratch.reserve(bytes.len() as u64)?;
    fs::write(&path, bytes)
        .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o755)))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let deadline = (!duration.is_zero()).then(|| Instant::now() + duration);
    let running = || deadline.is_none_or(|d| Instant::now() < d);
    eprintln!(
        "bad-elf: pid {}: starting {} every {} s",
        std::process::id(),
        path.display(),
        RESTART.as_secs()
    );
    let mut attempt = 0u64;
    while running() {
        attempt += 1;
        eprintln!("bad-elf: attempt {attempt}: {}", start(&path));
        let rest = deadline.map_or(RESTART, |d| {
            RESTART.min(d.saturating_duration_since(Instant::now()))
        });
        std::thread::sleep(rest);
    }
    // scratch (the directory and the file) is removed on drop.
    Ok(())
}

/// Start the service once and say how it ended.
fn start(path: &Path) -> String {
    let status = match Command::new(path).status() {
        Ok(status) => status,
        Err(e) => {
            return format!(
                "cannot start {}: {e} (a file system mounted noexec? pass --scratch DIR)",
                path.display()
            );
        }
    };
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("{} exited with status {code}", path.display()),
        (None, Some(sig)) => format!(
            "{} was killed by signal {sig} ({}){}",
            path.display(),
            signal_name(sig),
            if status.core_dumped() {
                ", core dumped"
            } else {
                ""
            }
        ),
        _ => format!("{} ended: {status}", path.display()),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGKILL => "SIGKILL",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        _ => "another signal",
    }
}
