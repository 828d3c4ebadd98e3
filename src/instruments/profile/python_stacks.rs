//! CPython 3.11's Python stacks, read from outside the process as py-spy
//! --nonblocking does: its `_PyRuntime` found from the interpreter's ELF
//! dynamic symbols and its load address, then interpreters.head →
//! threads → cframe → current_frame → f_code (co_qualname, co_filename,
//! the line from co_linetable), read through /proc/PID/mem
//! (never stopped). Its threads' innermost Python functions a few times a
//! second: what CPython's `_PyEval_EvalFrameDefault` hides from a native
//! profile. Read only where kdiag may: root within the run's `Scope` (a
//! learner reads only their own), or the process's own user. What is read
//! is checked (the thread ids are the process's, each code object is a
//! PyCode_Type) or nothing is named.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::instruments::target::Scope;
use crate::model::drill::{PyFunction, PythonStacks};

/// Offsets in CPython 3.11's structs on x86_64, from its internal headers
/// (tests/data/cpython311_offsets.c prints them; a test compares).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    pub runtime_interpreters_head: u64,
    pub interp_threads_head: u64,
    pub thread_next: u64,
    pub thread_cframe: u64,
    pub thread_native_thread_id: u64,
    pub cframe_current_frame: u64,
    pub frame_f_code: u64,
    pub frame_previous: u64,
    pub frame_prev_instr: u64,
    pub object_ob_type: u64,
    pub code_co_filename: u64,
    pub code_co_qualname: u64,
    pub code_co_firstlineno: u64,
    pub code_co_linetable: u64,
    pub code_co_code_adaptive: u64,
    pub bytes_ob_size: u64,
    pub bytes_ob_sval: u64,
    pub unicode_length: u64,
    pub unicode_state: u64,
    /// sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject): where a
    /// compact string's characters start, ASCII or not.
    pub unicode_ascii_data: u64,
    pub unicode_compact_data: u64,
    /// The `state` bit field's word with only `ascii` set, and only
    /// `compact`; `kind` is the 3 bits above `interned`'s 2.
    pub unicode_state_ascii: u32,
    pub unicode_state_compact: u32,
}

pub const PY311: Layout = Layout {
    runtime_interpreters_head: 40,
    interp_threads_head: 16,
    thread_next: 8,
    thread_cframe: 56,
    thread_native_thread_id: 160,
    cframe_current_frame: 8,
    frame_f_code: 32,
    frame_previous: 48,
    frame_prev_instr: 56,
    object_ob_type: 8,
    code_co_filename: 112,
    code_co_qualname: 128,
    code_co_firstlineno: 72,
    code_co_linetable: 136,
    code_co_code_adaptive: 184,
    bytes_ob_size: 16,
    bytes_ob_sval: 32,
    unicode_length: 16,
    unicode_state: 32,
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
    unicode_state_ascii: 0x40,
    unicode_state_compact: 0x20,
};

/// Stack samples a second: enough for `HOT_MIN_SAMPLES` of a busy
/// function in a 3 s drill-down, a few hundred small reads each.
pub const HZ: u64 = 10;
/// The most threads one sample walks.
const MOST_THREADS: usize = 256;
/// The functions kept, the most sampled first.
const TOP: usize = 5;

/// A CPython 3.11 process's memory, and where its runtime state is.
struct Reader {
    mem: File,
    runtime: u64,
    code_type: u64,
    /// Code objects already read: (qualname, file, first line, line table).
    code: HashMap<u64, (String, String, u32, Vec<u8>)>,
}

/// Each innermost Python function of `pid`'s threads sampled at `HZ` for
/// `window`; None when `pid` runs no CPython, else what was read or why
/// not.
pub fn record(pid: i32, scope: Scope, window: Duration, stop: &AtomicBool) -> Option<PythonStacks> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe = exe.to_string_lossy();
    let base_name = exe.rsplit('/').next().unwrap_or_default();
    if !base_name.starts_with("python3") && !maps.contains("/libpython3") {
        return None;
    }
    let mut found = PythonStacks {
        pid,
        hz: HZ,
        ..Default::default()
    };
    let uid = crate::sys::procfs::real_uid(pid as u32);
    let allowed = uid
        .ok_or_else(|| "its user is unknown".to_string())
        .and_then(|uid| scope.may_act_on(uid, "read its memory"));
    let mut reader = match allowed.and_then(|()| Reader::open(pid, &maps, &exe)) {
        Ok(r) => r,
        Err(why) => {
            found.why_not = Some(why);
            return Some(found);
        }
    };
    // The first sample is checked whole: a layout that is not 3.11's
    // names nothing rather than something false.
    let tids = crate::sys::procfs::tids(pid);
    match reader.sample() {
        Some(first) if !first.is_empty() && first.iter().all(|(t, _)| tids.contains(t)) => {}
        _ => {
            found.why_not = Some("not named: CPython layout not recognised".into());
            return Some(found);
        }
    }
    let mut by_function: BTreeMap<(String, String), BTreeMap<u32, u64>> = BTreeMap::new();
    let period = Duration::from_nanos(1_000_000_000 / HZ);
    let start = Instant::now();
    let mut next = start;
    while start.elapsed() < window && !stop.load(Ordering::Relaxed) {
        found.rounds += 1;
        // A stack torn by the running target is left out, not guessed.
        for (_, innermost) in reader.sample().unwrap_or_default() {
            found.threads_sampled += 1;
            if let Some((name, file, line)) = innermost {
                found.samples += 1;
                *by_function
                    .entry((name, file))
                    .or_default()
                    .entry(line)
                    .or_default() += 1;
            }
        }
        next += period;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let mut functions: Vec<PyFunction> = by_function
        .into_iter()
        .map(|((name, file), lines)| {
            let (&line, _) = lines
                .iter()
                .max_by_key(|(l, n)| (**n, std::cmp::Reverse(**l)))
                .unwrap_or((&0, &0));
            PyFunction {
                name,
                file,
                line,
                samples: lines.values().sum(),
            }
        })
        .collect();
    functions.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
    functions.truncate(TOP);
    found.functions = functions;
    Some(found)
}

impl Reader {
    /// The interpreter's binary (the program, or its libpython) with the
    /// symbols, its load bias from the mapping of its first bytes.
    fn open(pid: i32, maps: &str, exe: &str) -> Result<Reader, String> {
        use object::{Object, ObjectSegment, ObjectSymbol};
        let mem = File::open(format!("/proc/{pid}/mem"))
            .map_err(|e| format!("its memory is unreadable ({e})"))?;
        let mut paths: Vec<&str> = vec![exe];
        paths.extend(
            maps.lines()
                .filter_map(|l| l.split_whitespace().nth(5))
                .filter(|p| p.contains("/libpython3")),
        );
        paths.dedup();
        for path in paths {
            let Ok(bytes) = std::fs::read(format!("/proc/{pid}/root{path}")) else {
                continue;
            };
            let Ok(elf) = object::File::parse(&*bytes) else {
                continue;
            };
            let symbol = |name: &str| {
                elf.dynamic_symbols()
                    .find(|s| s.name() == Ok(name))
                    .map(|s| s.address())
            };
            let (Some(runtime), Some(code_type), Some(version)) = (
                symbol("_PyRuntime"),
                symbol("PyCode_Type"),
                symbol("Py_Version"),
            ) else {
                continue;
            };
            let first = elf.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
            let loaded = maps.lines().find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.len() >= 6 && w[5] == path && u64::from_str_radix(w[2], 16) == Ok(0))
                    .then(|| u64::from_str_radix(w[0].split('-').next()?, 16).ok())
                    .flatten()
            });
            let Some(loaded) = loaded else { continue };
            let bias = loaded.wrapping_sub(first);
            let r = Reader {
                mem,
                runtime: runtime.wrapping_add(bias),
                code_type: code_type.wrapping_add(bias),
                code: HashMap::new(),
            };
            let v = r.u32(version.wrapping_add(bias)).unwrap_or(0);
            if v >> 16 != 0x030b {
                return Err(format!(
                    "not named: CPython {}.{} (kdiag reads 3.11's stacks)",
                    v >> 24,
                    v >> 16 & 0xff
                ));
            }
            return Ok(r);
        }
        Err("not named: no CPython runtime symbol (_PyRuntime) in its binaries".into())
    }

    fn read(&self, at: u64, buf: &mut [u8]) -> Option<()> {
        self.mem.read_exact_at(buf, at).ok()
    }

    fn u64(&self, at: u64) -> Option<u64> {
        let mut b = [0; 8];
        self.read(at, &mut b)?;
        Some(u64::from_le_bytes(b))
    }

    fn u32(&self, at: u64) -> Option<u32> {
        let mut b = [0; 4];
        self.read(at, &mut b)?;
        Some(u32::from_le_bytes(b))
    }

    /// Each thread's innermost Python frame, as (function, file, line),
    /// the only one kept; None when what was read is not a stack (a thread
    /// ended mid-read, or not 3.11's layout).
    fn sample(&mut self) -> Option<Vec<(i32, Option<(String, String, u32)>)>> {
        let l = PY311;
        let interp = self.u64(self.runtime + l.runtime_interpreters_head)?;
        let mut thread = self.u64(interp + l.interp_threads_head)?;
        let mut out = Vec::new();
        while thread != 0 && out.len() < MOST_THREADS {
            let tid = self.u64(thread + l.thread_native_thread_id)? as i32;
            let cframe = self.u64(thread + l.thread_cframe)?;
            let frame = match cframe {
                0 => 0,
                c => self.u64(c + l.cframe_current_frame)?,
            };
            let innermost = match frame {
                0 => None,
                f => {
                    let code = self.u64(f + l.frame_f_code)?;
                    let instr = self.u64(f + l.frame_prev_instr)?;
                    Some(self.function(code, instr)?)
                }
            };
            out.push((tid, innermost));
            thread = self.u64(thread + l.thread_next)?;
        }
        Some(out)
    }

    /// A code object's function, file and the line of `instr` in it.
    fn function(&mut self, code: u64, instr: u64) -> Option<(String, String, u32)> {
        let l = PY311;
        if !self.code.contains_key(&code) {
            if self.u64(code + l.object_ob_type)? != self.code_type {
                return None;
            }
            let name = self.string(self.u64(code + l.code_co_qualname)?)?;
            let file = self.string(self.u64(code + l.code_co_filename)?)?;
            let first = self.u32(code + l.code_co_firstlineno)?;
            let table = self.u64(code + l.code_co_linetable)?;
            let len = self.u64(table + l.bytes_ob_size)?.min(1 << 16);
            let mut bytes = vec![0; len as usize];
            self.read(table + l.bytes_ob_sval, &mut bytes)?;
            self.code.insert(code, (name, file, first, bytes));
        }
        let (name, file, first, table) = &self.code[&code];
        let unit = instr.wrapping_sub(code + l.code_co_code_adaptive) / 2;
        Some((name.clone(), file.clone(), line_of(table, *first, unit)))
    }

    /// A compact str object's text (names and paths are compact).
    fn string(&self, at: u64) -> Option<String> {
        let l = PY311;
        let len = self.u64(at + l.unicode_length)?.min(4096) as usize;
        let state = self.u32(at + l.unicode_state)?;
        if state & l.unicode_state_compact == 0 {
            return None;
        }
        if state & l.unicode_state_ascii != 0 {
            let mut b = vec![0; len];
            self.read(at + l.unicode_ascii_data, &mut b)?;
            return String::from_utf8(b).ok();
        }
        let kind = (state >> 2 & 7) as usize;
        let mut b = vec![0; len * kind];
        self.read(at + l.unicode_compact_data, &mut b)?;
        b.chunks(kind.max(1))
            .map(|c| {
                let mut v = [0; 4];
                v[..c.len()].copy_from_slice(c);
                char::from_u32(u32::from_le_bytes(v))
            })
            .collect()
    }
}

/// The line of code unit `unit` from a 3.11 location table
/// (Objects/locations.md): entries of a header byte (1, a 4-bit code, the
/// code units it covers less one) and the code's operands.
pub fn line_of(table: &[u8], first: u32, unit: u64) -> u32 {
    let mut i = 0;
    let mut line = first as i64;
    let mut at = 0u64;
    let varint = |i: &mut usize| {
        let (mut v, mut shift) = (0u64, 0);
        while let Some(&b) = table.get(*i) {
            *i += 1;
            v |= u64::from(b & 63) << shift;
            shift += 6;
            if b & 64 == 0 {
                break;
            }
        }
        v
    };
    while let Some(&h) = table.get(i) {
        i += 1;
        let code = h >> 3 & 15;
        let delta = match code {
            15 => 0,
            13 | 14 => {
                let v = varint(&mut i);
                if code == 14 {
                    varint(&mut i);
                    varint(&mut i);
                    varint(&mut i);
                }
                if v & 1 == 1 {
                    -((v >> 1) as i64)
                } else {
                    (v >> 1) as i64
                }
            }
            10..=12 => {
                i += 2;
                i64::from(code - 10)
            }
            _ => {
                i += 1;
                0
            }
        };
        line += delta;
        at += u64::from(h & 7) + 1;
        if unit < at {
            return line.max(0) as u32;
        }
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_table_gives_each_code_unit_its_line() {
        // Three entries: no column, line +1 for 2 units; one-line form
        // +1 for 3 units (two operand bytes); long form -1 (svarint 3) for
        // 1 unit with three more varints.
        let table = [
            0x80 | 13 << 3 | 1,
            2,
            0x80 | 11 << 3 | 2,
            4,
            9,
            0x80 | 14 << 3,
            3,
            0,
            1,
            2,
        ];
        let lines: Vec<u32> = (0..7).map(|u| line_of(&table, 10, u)).collect();
        assert_eq!(lines, [11, 11, 12, 12, 12, 11, 10]);
    }
}
