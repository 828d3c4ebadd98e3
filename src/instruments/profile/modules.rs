//! What the unwinder needs to know about each mapped binary, read once per
//! file: its unwind tables (`.eh_frame` with `.eh_frame_hdr`, or
//! `.debug_frame`), its LOAD segments (to turn a mapping's file offset into
//! the binary's own addresses), and which of its functions keep a frame
//! pointer (for `--call-graph auto`).
//!
//! Frame-pointer detection: a function keeps a frame pointer when its code
//! starts with `push %rbp; mov %rsp,%rbp` (`55 48 89 e5`), optionally after
//! `endbr64`. That is the prologue gcc and clang emit with
//! `-fno-omit-frame-pointer` and rustc with `-C force-frame-pointers=yes`;
//! code built without them (gcc/clang `-O2`, Rust release, glibc) starts
//! otherwise. Functions come from `.symtab`, else `.dynsym`. It is a
//! per-function answer, so one binary can mix both (a Rust binary's own code
//! and the precompiled std), and an address in no known function counts as
//! "no frame pointer", which sends its sample to the DWARF unwinder.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

/// Section bytes, shared between every process that maps the file: a range
/// of the file mapped into kdiag (or of a copy, for the vDSO).
#[derive(Clone)]
pub struct Bytes {
    image: Arc<Image>,
    range: Range<usize>,
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.image.bytes()[self.range.clone()]
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({:?})", self.range)
    }
}

/// A whole binary: mapped from its file (reading 100 MB binaries such as
/// node into memory cost hundreds of ms; mapping touches only what the
/// unwinder reads), or owned.
enum Image {
    Mapped { ptr: *const u8, len: usize },
    Owned(Vec<u8>),
}

// SAFETY: the mapping is read-only and private, and unmapped only on drop.
unsafe impl Send for Image {}
// SAFETY: as above; nothing writes through it.
unsafe impl Sync for Image {}

impl Image {
    fn map(path: &str) -> Result<Image, String> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).map_err(|e| format!("unreadable ({e})"))?;
        let len = file
            .metadata()
            .map_err(|e| format!("unreadable ({e})"))?
            .len() as usize;
        if len == 0 {
            return Err("empty file".into());
        }
        // SAFETY: a fresh read-only private mapping of an open file, checked
        // before use. A binary truncated while mapped would fault on access;
        // binaries are replaced by rename, not rewritten in place (blazesym
        // maps them the same way).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!("cannot map ({})", std::io::Error::last_os_error()));
        }
        Ok(Image::Mapped {
            ptr: ptr.cast(),
            len,
        })
    }

    fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: ptr/len are a live mapping owned by self.
            Image::Mapped { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            Image::Owned(v) => v,
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if let Image::Mapped { ptr, len } = *self {
            // SAFETY: exactly the mapping made in `map`.
            unsafe { libc::munmap(ptr as *mut libc::c_void, len) };
        }
    }
}

/// One binary's unwind tables and layout.
#[derive(Debug)]
pub struct Binary {
    /// LOAD segments: (vaddr, file offset, file size).
    segments: Vec<(u64, u64, u64)>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Bytes)>,
    eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    debug_frame: Option<Bytes>,
    /// Functions sorted by start address: (start, end, keeps a frame pointer).
    functions: Vec<(u64, u64, bool)>,
}

/// `push %rbp; mov %rsp,%rbp`.
const FP_PROLOGUE: [u8; 4] = [0x55, 0x48, 0x89, 0xe5];
/// `endbr64`, which CET-enabled builds put first.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

impl Binary {
    /// Parse an ELF image (a file's, or the vDSO's); find which functions
    /// keep frame pointers when `functions` is set (for auto).
    fn parse(image: Image, functions: bool) -> Result<Binary, String> {
        let image = Arc::new(image);
        let data = image.bytes();
        let obj =
            object::File::parse(data).map_err(|e| format!("not a readable ELF file ({e})"))?;
        let section = |name: &str| {
            let s = obj.section_by_name(name)?;
            let range = s.address()..s.address() + s.size();
            // Compressed sections (a .debug_frame with SHF_COMPRESSED) are
            // left out: the unwinder reads sections as they are stored.
            let stored = s.compressed_file_range().ok()?;
            if stored.format != object::CompressionFormat::None {
                return None;
            }
            let (off, size) = (stored.offset as usize, stored.compressed_size as usize);
            data.get(off..off + size)?;
            let bytes = Bytes {
                image: image.clone(),
                range: off..off + size,
            };
            Some((range, bytes))
        };
        let range = |name: &str| {
            obj.section_by_name(name)
                .map(|s| s.address()..s.address() + s.size())
        };
        let segments = load_segments(&obj);
        let mut table: Vec<(u64, u64, bool)> = Vec::new();
        let symbols: Vec<_> = if !functions {
            Vec::new()
        } else if obj.symbols().next().is_some() {
            obj.symbols().collect()
        } else {
            obj.dynamic_symbols().collect()
        };
        for sym in symbols {
            if sym.kind() != SymbolKind::Text || sym.size() == 0 || sym.address() == 0 {
                continue;
            }
            let start = sym.address();
            let code = file_bytes(data, &segments, start, 8).unwrap_or(&[]);
            let fp = code.starts_with(&FP_PROLOGUE)
                || (code.starts_with(&ENDBR64) && code[4..].starts_with(&FP_PROLOGUE));
            table.push((start, start + sym.size(), fp));
        }
        table.sort_unstable();
        table.dedup_by_key(|f| f.0);
        Ok(Binary {
            segments,
            text: range(".text"),
            got: range(".got"),
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            debug_frame: section(".debug_frame").map(|(_, b)| b),
            functions: table,
        })
    }

    /// The load bias of a mapping of this file at `start` from file offset
    /// `pgoff`: what to add to the file's own addresses to get the process's.
    /// Through the LOAD segments, since a segment's vaddr and file offset
    /// can differ (rustc PIEs: p_offset 0x14df0, p_vaddr 0x15df0).
    pub fn bias(&self, start: u64, pgoff: u64) -> Option<u64> {
        let page = 4096;
        // A mapping starts at its segment's offset rounded down to a page,
        // which the previous segment's bytes may also cover: an exact start
        // decides first.
        let covers = |&&(_, off, size): &&(u64, u64, u64)| {
            off & !(page - 1) <= pgoff && pgoff < off + size.max(1)
        };
        let &(vaddr, off, _) = self
            .segments
            .iter()
            .find(|&&(_, off, _)| off & !(page - 1) == pgoff)
            .or_else(|| self.segments.iter().find(covers))?;
        // vaddr − off is the same for every byte of the segment.
        Some(
            start
                .wrapping_sub(vaddr.wrapping_sub(off))
                .wrapping_sub(pgoff),
        )
    }

    /// A framehop module for a mapping of this file at `avma` with `bias`.
    pub fn module(&self, name: &str, avma: Range<u64>, bias: u64) -> Module<Bytes> {
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: self.eh_frame.as_ref().map(|(_, b)| b.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|(_, b)| b.clone()),
            debug_frame: self.debug_frame.clone(),
            text: None,
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        };
        Module::new(name.to_string(), avma, bias, info)
    }

    /// Whether the function at `svma` (the file's own address) keeps a frame
    /// pointer; false when no known function covers it.
    pub fn keeps_frame_pointer(&self, svma: u64) -> bool {
        let i = self.functions.partition_point(|f| f.0 <= svma);
        i > 0 && {
            let (_, end, fp) = self.functions[i - 1];
            svma < end && fp
        }
    }

    /// Whether any unwind table was found.
    pub fn has_unwind_tables(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }
}

/// An ELF file's LOAD segments as (vaddr, file offset, file size): what
/// turns a file offset into the file's own address and back.
pub(super) fn load_segments<'d, R: object::ReadRef<'d>>(
    obj: &object::File<'d, R>,
) -> Vec<(u64, u64, u64)> {
    obj.segments()
        .map(|s| {
            let (off, size) = s.file_range();
            (s.address(), off, size)
        })
        .collect()
}

/// `len` bytes at the file address `addr`, through the LOAD segments.
fn file_bytes<'a>(
    data: &'a [u8],
    segments: &[(u64, u64, u64)],
    addr: u64,
    len: u64,
) -> Option<&'a [u8]> {
    let &(vaddr, off, size) = segments
        .iter()
        .find(|&&(v, _, s)| v <= addr && addr + len <= v + s)?;
    let _ = size;
    let at = (off + (addr - vaddr)) as usize;
    data.get(at..at + len as usize)
}

/// Binaries by path, each parsed once per recording. A file that cannot be
/// read is remembered with why.
#[derive(Debug, Default)]
pub struct Binaries {
    /// Whether to find which functions keep frame pointers (auto).
    functions: bool,
    by_path: HashMap<String, Result<Arc<Binary>, String>>,
}

impl Binaries {
    /// `functions`: also index functions by frame-pointer use (for auto).
    pub fn new(functions: bool) -> Self {
        Binaries {
            functions,
            by_path: HashMap::new(),
        }
    }

    pub fn get(&mut self, path: &str) -> Result<Arc<Binary>, String> {
        let functions = self.functions;
        self.by_path
            .entry(path.to_string())
            .or_insert_with(|| load(path, functions))
            .clone()
    }
}

fn load(path: &str, functions: bool) -> Result<Arc<Binary>, String> {
    let image = if path == "[vdso]" {
        Image::Owned(vdso_image().ok_or("the vDSO image could not be read")?)
    } else if path.ends_with(" (deleted)") {
        return Err("file deleted since it was mapped".into());
    } else {
        Image::map(path)?
    };
    Binary::parse(image, functions).map(Arc::new)
}

/// A copy of the vDSO as mapped in kdiag itself: the kernel maps the same
/// image into every process, so its unwind tables serve all of them.
fn vdso_image() -> Option<Vec<u8>> {
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base == 0 {
        return None;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (a, rest) = line.split_once('-')?;
    let b = rest.split(' ').next()?;
    let (start, end) = (
        u64::from_str_radix(a, 16).ok()?,
        u64::from_str_radix(b, 16).ok()?,
    );
    if start != base || end <= start {
        return None;
    }
    // SAFETY: [start, end) is our own vDSO mapping, readable and never unmapped.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) };
    Some(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::procfs::maps::parse_maps;

    fn own_maps() -> Vec<crate::sys::procfs::maps::Mapping> {
        parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap())
    }

    #[test]
    fn own_code_keeps_frame_pointers_and_libc_does_not() {
        // kdiag is built with -C force-frame-pointers=yes (.cargo/config.toml);
        // glibc is built without frame pointers.
        let ip = own_code_keeps_frame_pointers_and_libc_does_not as fn() as usize as u64;
        let maps = own_maps();
        let mut bins = Binaries::new(true);
        let own = maps.iter().find(|m| m.start <= ip && ip < m.end).unwrap();
        let bin = bins.get(&own.path).unwrap();
        let bias = bin.bias(own.start, own.pgoff).unwrap();
        assert!(bin.keeps_frame_pointer(ip - bias), "our own function");
        assert!(bin.has_unwind_tables());

        let getpid = libc::getpid as *const () as usize as u64;
        let libc_map = maps
            .iter()
            .find(|m| m.start <= getpid && getpid < m.end)
            .unwrap();
        let libc_bin = bins.get(&libc_map.path).unwrap();
        let bias = libc_bin.bias(libc_map.start, libc_map.pgoff).unwrap();
        assert!(
            !libc_bin.keeps_frame_pointer(getpid - bias),
            "glibc's getpid"
        );
        assert!(!libc_bin.keeps_frame_pointer(0), "no function there");
    }

    #[test]
    fn bias_follows_segment_offsets() {
        // A rustc PIE layout: r-x LOAD at offset 0x14df0, vaddr 0x15df0,
        // mapped from page offset 0x14000 at 0x5555_5556_8000.
        let bin = Binary {
            // The first (r--) segment's bytes reach into the page the r-x
            // mapping starts at.
            segments: vec![(0, 0, 0x14dec), (0x15df0, 0x14df0, 0x30000)],
            text: None,
            got: None,
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: None,
            functions: vec![],
        };
        let bias = bin.bias(0x5555_5556_8000, 0x14000).unwrap();
        // File offset 0x14df0 (vaddr 0x15df0) is mapped at map start + 0xdf0.
        assert_eq!(0x15df0 + bias, 0x5555_5556_8000 + 0xdf0);
    }

    #[test]
    fn vdso_has_unwind_tables() {
        let bin = Binaries::new(false).get("[vdso]").unwrap();
        assert!(bin.has_unwind_tables());
    }
}
