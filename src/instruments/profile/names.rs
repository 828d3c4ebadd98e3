//! Naming the frames of recorded stacks: kernel addresses from kallsyms,
//! user addresses by (file, offset) from ELF symbols or DWARF (blazesym),
//! JIT code from perf maps; what could not be named, and why. Also what
//! the recorder knows of each process's mappings (`Maps`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

use crate::instruments::profile::jitdump;
use crate::instruments::profile::perf_map::PerfMap;
use crate::model::profile::{Frame, Module};
use crate::sys::kallsyms;
use crate::sys::procfs::maps::Mapping;

/// What a process's memory looked like, as far as we know.
#[derive(Debug, Clone, Default)]
pub(super) struct Maps {
    /// In the order learnt: a later mapping over the same address wins
    /// (after an exec, or a remap).
    pub list: Vec<Mapping>,
    /// /proc/PID/maps could not be read (the process had exited) and no
    /// MMAP2 record told us more.
    pub unreadable: bool,
    /// The process's user (owner of /proc/PID), to check its perf map's owner.
    pub uid: Option<u32>,
}

impl Maps {
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        self.list
            .iter()
            .rev()
            .find(|m| m.start <= addr && addr < m.end)
    }
}

/// Where a user address lives.
pub(super) enum Place<'m> {
    /// At this offset of this file.
    File(&'m str, u64),
    /// A pseudo mapping with a name of its own (`[vdso]`, `[anon]`).
    Pseudo(&'m str),
    Unknown(&'static str),
}

/// Frame names, resolved in batches and then looked up. Each `[unknown]` or
/// `module+offset` frame counts one against its reason, once per stack.
pub(super) struct Names<'a> {
    maps: &'a HashMap<u32, Maps>,
    symbolizer: Symbolizer,
    kernel: HashMap<u64, Result<String, String>>,
    /// file → offset → symbol (Err: why not, the module+offset name is made later).
    files: HashMap<String, HashMap<u64, Result<String, String>>>,
    /// Each process's JIT names (perf map and jitdump), read when first needed.
    jit_names: HashMap<u32, Option<PerfMap>>,
    /// Binaries named in frames, in first-use order (`Frame::module`).
    module_index: HashMap<String, u32>,
    module_paths: Vec<String>,
    pub reasons: BTreeMap<String, u64>,
}

impl<'a> Names<'a> {
    pub(super) fn new(maps: &'a HashMap<u32, Maps>) -> Self {
        Names {
            maps,
            symbolizer: Symbolizer::builder()
                .enable_code_info(false)
                .enable_inlined_fns(false)
                .build(),
            kernel: HashMap::new(),
            files: HashMap::new(),
            jit_names: HashMap::new(),
            module_index: HashMap::new(),
            module_paths: Vec::new(),
            reasons: BTreeMap::new(),
        }
    }

    pub(super) fn place(&self, pid: u32, ip: u64) -> Place<'a> {
        let Some(maps) = self.maps.get(&pid) else {
            return Place::Unknown("process not seen alive (no memory map)");
        };
        match maps.find(ip) {
            None if maps.unreadable => {
                Place::Unknown("process exited before its memory map was read")
            }
            None => Place::Unknown("address outside every mapping (a broken frame-pointer chain?)"),
            Some(m) if m.path.is_empty() || m.path == "//anon" => Place::Pseudo("[anon]"),
            Some(m) if m.path.starts_with('[') => Place::Pseudo(&m.path),
            Some(m) => Place::File(&m.path, ip - m.start + m.pgoff),
        }
    }

    pub(super) fn note(&mut self, reason: &str) -> String {
        *self.reasons.entry(reason.to_string()).or_default() += 1;
        "[unknown]".into()
    }

    pub(super) fn resolve_kernel(&mut self, mut ips: Vec<u64>) {
        ips.sort_unstable();
        ips.dedup();
        // Read kallsyms only when there are kernel frames to name.
        if ips.is_empty() {
            return;
        }
        let names = kallsyms::name_each(&ips);
        self.kernel.extend(ips.into_iter().zip(names));
    }

    pub(super) fn resolve_file(&mut self, path: &str, mut offsets: Vec<u64>) {
        offsets.sort_unstable();
        offsets.dedup();
        let base = module_name(path);
        let lookup = |offsets: &[u64], debug_syms: bool| {
            let src = Source::Elf(Elf {
                debug_syms,
                ..Elf::new(path)
            });
            self.symbolizer
                .symbolize(&src, Input::FileOffset(offsets))
                .map_err(|e| format!("{base}: unreadable ({e})"))
        };
        let mut results = if path.ends_with(" (deleted)") {
            Err(format!("{base}: file deleted since it was mapped"))
        } else {
            // The ELF symbol table names functions as well as DWARF does
            // (no lines or inlines are shown) and is far quicker to load;
            // DWARF only for what it cannot name (a stripped binary with
            // separate debug info).
            lookup(&offsets, false)
        };
        if let Ok(syms) = &mut results {
            // A stripped binary's separate debug file (libc's) has a full
            // symbol table: it names those functions as its DWARF would,
            // without decompressing and parsing the DWARF.
            let missing = unnamed(syms);
            if !missing.is_empty()
                && let Some((debug, vaddrs)) = separate_symtab(path, &missing, &offsets)
            {
                let src = Source::Elf(Elf {
                    debug_syms: false,
                    ..Elf::new(debug)
                });
                if let Ok(found) = self.symbolizer.symbolize(&src, Input::VirtOffset(&vaddrs)) {
                    for (&i, sym) in missing.iter().zip(found) {
                        if sym.as_sym().is_some() {
                            syms[i] = sym;
                        }
                    }
                }
            }
            // DWARF has the last word, its reason too when it names nothing.
            let missing = unnamed(syms);
            if !missing.is_empty() {
                let retry: Vec<u64> = missing.iter().map(|&i| offsets[i]).collect();
                if let Ok(found) = lookup(&retry, true) {
                    for (i, sym) in missing.into_iter().zip(found) {
                        syms[i] = sym;
                    }
                }
            }
        }
        let named = offsets
            .iter()
            .enumerate()
            .map(|(i, off)| {
                let name = match &results {
                    Ok(syms) => match &syms[i] {
                        Symbolized::Sym(s) => Ok(s.name.to_string()),
                        Symbolized::Unknown(reason) => Err(format!("{base}: {reason}")),
                    },
                    Err(why) => Err(why.clone()),
                };
                (*off, name)
            })
            .collect();
        self.files.insert(path.to_string(), named);
    }

    pub(super) fn kernel(&mut self, ip: u64) -> String {
        match self.kernel.get(&ip).cloned() {
            Some(Ok(name)) => name,
            Some(Err(why)) => self.note(&why),
            None => self.note("kernel address not resolved"),
        }
    }

    pub(super) fn user(&mut self, pid: u32, ip: u64) -> Frame {
        let place = self.place(pid, ip);
        if matches!(place, Place::Pseudo("[anon]") | Place::Unknown(_))
            && let Some(name) = self.jit_name(pid, ip)
        {
            return Frame::user(name);
        }
        let name = match place {
            Place::Pseudo(name) => name.to_string(),
            Place::Unknown(why) => self.note(why),
            Place::File(path, off) => {
                let name = match self.files.get(path).and_then(|f| f.get(&off)).cloned() {
                    Some(Ok(name)) => name,
                    Some(Err(why)) => {
                        self.note(&why);
                        format!("{}+{off:#x}", module_name(path))
                    }
                    None => {
                        self.note("not resolved");
                        format!("{}+{off:#x}", module_name(path))
                    }
                };
                return Frame {
                    module: Some(self.module(path)),
                    ..Frame::user(name)
                };
            }
        };
        Frame::user(name)
    }

    /// The name a perf map or jitdump gives the code at `ip`, reading
    /// them once per process. A jitdump's names win over a perf map's.
    pub(super) fn jit_name(&mut self, pid: u32, ip: u64) -> Option<String> {
        if !self.jit_names.contains_key(&pid) {
            let maps = self.maps.get(&pid);
            let uid = maps.and_then(|m| m.uid);
            let perf_map = PerfMap::load(pid, uid);
            let dump = match maps.and_then(|m| jitdump_path(m, pid)) {
                Some(path) => jitdump::load(&path, uid),
                None => Ok(None),
            };
            let names = match (self.loaded(perf_map), self.loaded(dump)) {
                (Some(map), Some(dump)) => Some(map.then(dump)),
                (map, dump) => map.or(dump),
            };
            self.jit_names.insert(pid, names);
        }
        self.jit_names[&pid]
            .as_ref()?
            .lookup(ip)
            .map(str::to_string)
    }

    /// A JIT name table that was read, or None; why not is counted.
    fn loaded(&mut self, read: Result<Option<PerfMap>, String>) -> Option<PerfMap> {
        read.unwrap_or_else(|why| {
            self.note(&why);
            None
        })
    }

    pub(super) fn module(&mut self, path: &str) -> u32 {
        if let Some(&i) = self.module_index.get(path) {
            return i;
        }
        let i = self.module_paths.len() as u32;
        self.module_paths.push(path.to_string());
        self.module_index.insert(path.to_string(), i);
        i
    }

    /// The binaries named in frames, with their build ids.
    pub(super) fn modules(&self) -> Vec<Module> {
        self.module_paths
            .iter()
            .map(|path| Module {
                path: path.clone(),
                build_id: build_id(path),
            })
            .collect()
    }
}

/// Where the process mapped its jitdump (the runtime maps it so that
/// profilers find it), if it did.
fn jitdump_path(maps: &Maps, pid: u32) -> Option<String> {
    let name = jitdump::file_name(pid);
    maps.list
        .iter()
        .rev()
        .map(|m| m.path.as_str())
        .find(|p| p.starts_with('/') && Path::new(p).file_name().is_some_and(|n| *n == *name))
        .map(str::to_string)
}

/// The indices of the symbols not named.
fn unnamed(syms: &[Symbolized<'_>]) -> Vec<usize> {
    (0..syms.len())
        .filter(|&i| syms[i].as_sym().is_none())
        .collect()
}

/// Where `path`'s separate debug file is (found by build id, as gdb finds
/// it, and checked by build id when found by its .gnu_debuglink name), and
/// the `wanted` file offsets as the file's own addresses, which the debug
/// file's symbols use. None: no debug file, or an offset in no segment.
fn separate_symtab(path: &str, wanted: &[usize], offsets: &[u64]) -> Option<(String, Vec<u64>)> {
    use object::{Object, ObjectSection, ReadCache};
    const DIRS: [&str; 2] = ["/usr/lib/debug", "/lib/debug"];
    let file = std::fs::File::open(path).ok()?;
    let cache = ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    let id = obj.build_id().ok()??.to_vec();
    let hex = hex(&id);
    let mut candidates: Vec<String> = DIRS
        .iter()
        .map(|d| format!("{d}/.build-id/{}/{}.debug", &hex[..2], &hex[2..]))
        .collect();
    if let Some(name) = obj
        .section_by_name(".gnu_debuglink")
        .and_then(|s| s.data().ok())
        .and_then(|d| std::ffi::CStr::from_bytes_until_nul(d).ok())
        .and_then(|c| c.to_str().ok())
    {
        let dir = Path::new(path)
            .parent()
            .and_then(|d| d.to_str())
            .unwrap_or("");
        candidates.push(format!("{dir}/{name}"));
        candidates.push(format!("{dir}/.debug/{name}"));
        candidates.extend(DIRS.iter().map(|d| format!("{d}{dir}/{name}")));
    }
    let debug = candidates.into_iter().find(|c| {
        let same = || {
            let f = std::fs::File::open(c).ok()?;
            let cache = ReadCache::new(f);
            let dbg = object::File::parse(&cache).ok()?;
            let same = dbg.build_id().ok()?? == id.as_slice() && dbg.symbols().next().is_some();
            Some(same)
        };
        same() == Some(true)
    })?;
    let segments = crate::instruments::profile::modules::load_segments(&obj);
    let vaddrs = wanted
        .iter()
        .map(|&i| {
            let off = offsets[i];
            segments
                .iter()
                .find(|&&(_, start, size)| start <= off && off < start + size)
                .map(|&(vaddr, start, _)| vaddr + (off - start))
        })
        .collect::<Option<Vec<u64>>>()?;
    Some((debug, vaddrs))
}

/// The GNU build id of an ELF file, in hex.
fn build_id(path: &str) -> Option<String> {
    use object::{Object, ReadCache};
    let file = std::fs::File::open(path).ok()?;
    let cache = ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    Some(hex(obj.build_id().ok()??))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `libc.so.6` for `/usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)`.
fn module_name(path: &str) -> String {
    let path = path.trim_end_matches(" (deleted)");
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}
