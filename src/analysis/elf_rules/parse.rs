//! Reading ELF headers as the kernel does, and naming their values.

use super::bytes::{FileBytes, byte};
use super::*;
use crate::model::elf::{ElfHeader, ProgramHeader};

/// Name of an e_machine value.
pub fn machine_name(m: u16) -> &'static str {
    match m {
        0 => "none",
        EM_386 => "Intel 80386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "IBM S/390",
        EM_ARM => "ARM",
        EM_X86_64 => "x86-64",
        EM_AARCH64 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        _ => "unknown",
    }
}

pub(super) fn type_name(t: u16) -> &'static str {
    match t {
        0 => "NONE",
        1 => "REL",
        ET_EXEC => "EXEC",
        ET_DYN => "DYN",
        4 => "CORE",
        _ => "unknown",
    }
}

pub(super) fn ptype_name(t: u32) -> String {
    match t {
        0 => "NULL".into(),
        PT_LOAD => "LOAD".into(),
        2 => "DYNAMIC".into(),
        PT_INTERP => "INTERP".into(),
        4 => "NOTE".into(),
        5 => "SHLIB".into(),
        6 => "PHDR".into(),
        7 => "TLS".into(),
        0x6474_e550 => "GNU_EH_FRAME".into(),
        PT_GNU_STACK => "GNU_STACK".into(),
        0x6474_e552 => "GNU_RELRO".into(),
        0x6474_e553 => "GNU_PROPERTY".into(),
        t => format!("0x{t:x}"),
    }
}

pub(super) fn flags_string(f: u32) -> String {
    let bit = |m: u32, c: char| if f & m != 0 { c } else { ' ' };
    [bit(PF_R, 'R'), bit(PF_W, 'W'), bit(PF_X, 'E')]
        .iter()
        .collect()
}

/// The interpreter of a `#!` line as binfmt_script reads it: after `#!` and
/// blanks, up to the next blank or newline, within the first 256 bytes.
pub(super) fn shebang(bytes: &[u8]) -> String {
    let line = bytes.get(2..).unwrap_or_default();
    let line = &line[..line.len().min(BINPRM_BUF_SIZE - 2)];
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let start = line
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(line.len());
    let rest = &line[start..];
    let end = rest
        .iter()
        .position(|&b| b == b' ' || b == b'\t' || b == 0)
        .unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

/// The PT_INTERP string without its NUL, if it lies in the file.
pub(super) fn interp_string(bytes: &dyn FileBytes, p: &ProgramHeader) -> Option<String> {
    let raw = bytes.at(p.offset, p.filesz.min(PATH_MAX))?;
    let raw = raw.split(|&b| b == 0).next().unwrap_or_default();
    Some(String::from_utf8_lossy(raw).into_owned())
}

/// How to read the file: word size and byte order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub(super) class: u8,
    pub(super) big: bool,
}

impl Layout {
    /// The layout the kernel reads, which e_ident does not decide: the
    /// native loader takes any file whose e_machine (read in the host's byte
    /// order) is the host's, as 64-bit; the compat loader takes the 32-bit
    /// machine (EM_386 on x86-64, EM_ARM on arm64) as 32-bit. EI_CLASS and
    /// EI_DATA are ignored (verified on 6.18: a file claiming ELFCLASS32 or
    /// big-endian with EM_X86_64 runs).
    pub(super) fn of(bytes: &dyn FileBytes, host: u16) -> Option<Layout> {
        if bytes.at(0, 4) != Some(b"\x7fELF") {
            return None;
        }
        let machine = u16::from_le_bytes(Self::raw::<2>(bytes, 18));
        let class = match (host, machine) {
            (EM_X86_64, EM_386) | (EM_AARCH64, EM_ARM) | (EM_386 | EM_ARM, _) => 1,
            _ => 2,
        };
        Some(Layout { class, big: false })
    }

    pub(super) fn phentsize(self) -> u16 {
        if self.class == 2 { 56 } else { 32 }
    }

    /// Read `N` bytes at `off`, zero past the end of the file (the kernel
    /// reads the header into a zeroed buffer).
    pub(super) fn raw<const N: usize>(bytes: &dyn FileBytes, off: u64) -> [u8; N] {
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            if let Some(v) = off.checked_add(i as u64).and_then(|o| byte(bytes, o)) {
                *b = v;
            }
        }
        out
    }

    pub(super) fn u16(self, bytes: &dyn FileBytes, off: u64) -> u16 {
        let r = Self::raw::<2>(bytes, off);
        if self.big {
            u16::from_be_bytes(r)
        } else {
            u16::from_le_bytes(r)
        }
    }

    pub(super) fn u32(self, bytes: &dyn FileBytes, off: u64) -> u32 {
        let r = Self::raw::<4>(bytes, off);
        if self.big {
            u32::from_be_bytes(r)
        } else {
            u32::from_le_bytes(r)
        }
    }

    pub(super) fn u64(self, bytes: &dyn FileBytes, off: u64) -> u64 {
        let r = Self::raw::<8>(bytes, off);
        if self.big {
            u64::from_be_bytes(r)
        } else {
            u64::from_le_bytes(r)
        }
    }

    /// A word: 4 bytes in ELF32, 8 in ELF64.
    pub(super) fn word(self, bytes: &dyn FileBytes, off: u64) -> u64 {
        if self.class == 2 {
            self.u64(bytes, off)
        } else {
            u64::from(self.u32(bytes, off))
        }
    }

    pub(super) fn header(self, bytes: &dyn FileBytes) -> Option<ElfHeader> {
        let w = if self.class == 2 { 8 } else { 4 };
        let e_type = self.u16(bytes, 16);
        let machine = self.u16(bytes, 18);
        let entry = self.word(bytes, 24);
        let phoff = self.word(bytes, 24 + w);
        // e_shoff, e_flags, e_ehsize precede e_phentsize.
        let phentsize = self.u16(bytes, 24 + 3 * w + 6);
        let phnum = self.u16(bytes, 24 + 3 * w + 8);
        Some(ElfHeader {
            class: match byte(bytes, 4) {
                Some(c @ (1 | 2)) => c * 32,
                _ => 0,
            },
            data: match byte(bytes, 5) {
                Some(1) => "little",
                Some(2) => "big",
                _ => "invalid",
            },
            e_type,
            type_name: type_name(e_type),
            machine,
            machine_name: machine_name(machine),
            entry,
            phoff,
            phentsize,
            phnum,
        })
    }

    /// The program headers that lie within the file, read with this
    /// layout's entry size (at most 65536 bytes of them, like the kernel).
    pub(super) fn phdrs(self, bytes: &dyn FileBytes, h: &ElfHeader) -> Vec<ProgramHeader> {
        let size = u64::from(self.phentsize());
        let max = (65536 / size).min(u64::from(h.phnum));
        let mut out = Vec::new();
        for i in 0..max {
            let Some(base) = i.checked_mul(size).and_then(|o| o.checked_add(h.phoff)) else {
                break;
            };
            if base.checked_add(size).is_none_or(|end| end > bytes.size()) {
                break;
            }
            let (p_type, p_flags, offset, vaddr, filesz, memsz, align) = if self.class == 2 {
                (
                    self.u32(bytes, base),
                    self.u32(bytes, base + 4),
                    self.u64(bytes, base + 8),
                    self.u64(bytes, base + 16),
                    self.u64(bytes, base + 32),
                    self.u64(bytes, base + 40),
                    self.u64(bytes, base + 48),
                )
            } else {
                (
                    self.u32(bytes, base),
                    self.u32(bytes, base + 24),
                    u64::from(self.u32(bytes, base + 4)),
                    u64::from(self.u32(bytes, base + 8)),
                    u64::from(self.u32(bytes, base + 16)),
                    u64::from(self.u32(bytes, base + 20)),
                    u64::from(self.u32(bytes, base + 28)),
                )
            };
            out.push(ProgramHeader {
                index: i as usize,
                p_type,
                type_name: ptype_name(p_type),
                flags: flags_string(p_flags),
                p_flags,
                offset,
                vaddr,
                filesz,
                memsz,
                align,
            });
        }
        out
    }
}
