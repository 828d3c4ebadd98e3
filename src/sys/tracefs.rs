//! tracefs: finding (or mounting) it, and tracepoint formats read at run time.
//!
//! Tracepoint layouts drift between kernels (ioprio added to the block events,
//! comms turned into `__data_loc` strings), so every field is looked up by name
//! in the event's `format` file and decoded from the raw record with the
//! offset, size and signedness found there. Never by position.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Where tracefs is usually found; the first is the modern mount point.
const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A located tracefs mount.
#[derive(Debug, Clone)]
pub struct Tracefs {
    root: PathBuf,
    /// Whether this call mounted it (doctor reports that).
    mounted_now: bool,
}

impl Tracefs {
    /// Find tracefs, mounting it at /sys/kernel/tracing when it is not mounted
    /// yet (as perf does). The mount is ordinary system state, not ours to undo.
    pub fn open() -> anyhow::Result<Tracefs> {
        if let Some(found) = Self::find() {
            return Ok(found);
        }
        if !crate::sys::process::privilege::is_root() {
            return Err(crate::error::needs_privilege("reading tracepoints"));
        }
        mount_tracefs(Path::new(CANDIDATES[0]))?;
        Self::find()
            .context("tracefs was mounted at /sys/kernel/tracing but has no events/ directory")
    }

    /// Find an already mounted tracefs.
    pub fn find() -> Option<Tracefs> {
        CANDIDATES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("events").is_dir())
            .map(|root| Tracefs {
                root,
                mounted_now: false,
            })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `open` had to mount tracefs.
    pub fn mounted_now(&self) -> bool {
        self.mounted_now
    }

    /// Whether the tracepoint `system:name` exists on this kernel.
    pub fn has_event(&self, system: &str, name: &str) -> bool {
        self.event_dir(system, name).join("format").exists()
    }

    /// The format of tracepoint `system:name`.
    pub fn event(&self, system: &str, name: &str) -> anyhow::Result<EventFormat> {
        let path = self.event_dir(system, name).join("format");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(crate::error::Unavailable::Feature(format!(
                    "this kernel has no tracepoint {system}:{name} (no {})",
                    path.display()
                ))
                .into());
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(crate::error::needs_privilege(&format!(
                    "the tracepoint {system}:{name}"
                )));
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        EventFormat::parse(system, &text).with_context(|| format!("parsing {}", path.display()))
    }

    fn event_dir(&self, system: &str, name: &str) -> PathBuf {
        self.root.join("events").join(system).join(name)
    }
}

fn mount_tracefs(at: &Path) -> anyhow::Result<()> {
    use std::ffi::CString;
    let target = CString::new(at.as_os_str().as_encoded_bytes())?;
    let fstype = c"tracefs";
    // SAFETY: all pointers are valid NUL-terminated strings; data may be null.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        bail!(
            "tracefs is not mounted and mounting it at {} failed: {err}; \
             mount it with `sudo mount -t tracefs nodev {}`",
            at.display(),
            at.display()
        );
    }
    Ok(())
}

/// How a field's bytes are laid out in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of 1, 2, 4 or 8 bytes.
    Scalar,
    /// A fixed array, e.g. `char comm[16]`.
    Array,
    /// `__data_loc`: a u32 whose low 16 bits are the offset of the data from
    /// the start of the record and high 16 bits its length.
    DataLoc,
    /// `__rel_loc`: like `__data_loc`, offset counted from the end of the field.
    RelLoc,
}

/// One field of a tracepoint record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: FieldKind,
}

impl Field {
    /// The field's own bytes (for dynamic fields, the data they point to).
    pub fn bytes<'a>(&self, record: &'a [u8]) -> Option<&'a [u8]> {
        let own = record.get(self.offset..self.offset + self.size)?;
        match self.kind {
            FieldKind::Scalar | FieldKind::Array => Some(own),
            FieldKind::DataLoc | FieldKind::RelLoc => {
                let loc = u32::from_ne_bytes(own.get(..4)?.try_into().ok()?);
                let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
                let base = if self.kind == FieldKind::RelLoc {
                    self.offset + self.size
                } else {
                    0
                };
                record.get(base + off..base + off + len)
            }
        }
    }

    /// The field as an unsigned integer (zero-extended).
    pub fn u64(&self, record: &[u8]) -> Option<u64> {
        let b = record.get(self.offset..self.offset + self.size)?;
        Some(match b.len() {
            1 => b[0] as u64,
            2 => u16::from_ne_bytes(b.try_into().ok()?) as u64,
            4 => u32::from_ne_bytes(b.try_into().ok()?) as u64,
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// The field as a signed integer (sign-extended from its size).
    pub fn i64(&self, record: &[u8]) -> Option<i64> {
        let v = self.u64(record)?;
        let bits = self.size as u32 * 8;
        Some(if bits < 64 {
            ((v << (64 - bits)) as i64) >> (64 - bits)
        } else {
            v as i64
        })
    }

    /// The field as text: a char array or dynamic string, up to its first NUL.
    pub fn str<'a>(&self, record: &'a [u8]) -> Option<Cow<'a, str>> {
        let b = self.bytes(record)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Some(String::from_utf8_lossy(&b[..end]))
    }
}

/// The parsed `format` file of one tracepoint.
#[derive(Debug, Clone)]
pub struct EventFormat {
    pub system: String,
    pub name: String,
    /// The id perf_event_open takes as `config` (and records carry as `common_type`).
    pub id: u64,
    pub fields: Vec<Field>,
}

impl EventFormat {
    /// Parse the text of a `format` file.
    pub fn parse(system: &str, text: &str) -> anyhow::Result<EventFormat> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("name:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("ID:") {
                id = Some(v.trim().parse::<u64>().context("bad ID line")?);
            } else if line.starts_with("field:") {
                fields.push(parse_field(line).with_context(|| format!("bad field line: {line}"))?);
            }
        }
        Ok(EventFormat {
            system: system.to_string(),
            name: name.context("no name: line")?,
            id: id.context("no ID: line")?,
            fields,
        })
    }

    /// The field called `name`, or an error naming the event and the field.
    pub fn field(&self, name: &str) -> anyhow::Result<Field> {
        self.try_field(name).cloned().with_context(|| {
            format!(
                "tracepoint {}:{} has no field `{name}` on this kernel",
                self.system, self.name
            )
        })
    }

    /// The field called `name`, if this kernel's layout has it.
    pub fn try_field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parse `field:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:B;`.
fn parse_field(line: &str) -> anyhow::Result<Field> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').context("missing ':'")?;
        match key.trim() {
            "field" => decl = Some(value.trim()),
            "offset" => offset = Some(value.trim().parse()?),
            "size" => size = Some(value.trim().parse()?),
            "signed" => signed = value.trim() == "1",
            _ => {}
        }
    }
    let decl = decl.context("no declaration")?;
    let kind = if decl.starts_with("__data_loc") {
        FieldKind::DataLoc
    } else if decl.starts_with("__rel_loc") {
        FieldKind::RelLoc
    } else if decl.ends_with(']') {
        FieldKind::Array
    } else {
        FieldKind::Scalar
    };
    // The name is the last identifier, before any `[N]`.
    let last = decl.rsplit(' ').next().unwrap_or(decl);
    let name = last.split('[').next().unwrap_or(last).to_string();
    Ok(Field {
        name,
        offset: offset.context("no offset")?,
        size: size.context("no size")?,
        signed,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK_IO_START: &str = "name: block_io_start
ID: 2102
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;
\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;

print fmt: \"%d,%d %s %u (%s) %llu + %u %s,%u,%u [%s]\", REC->comm
";

    fn record() -> Vec<u8> {
        let mut r = vec![0u8; 72];
        r[0..2].copy_from_slice(&2102u16.to_ne_bytes());
        r[4..8].copy_from_slice(&(-7i32).to_ne_bytes());
        r[8..12].copy_from_slice(&((254u32 << 20) | 16).to_ne_bytes());
        r[16..24].copy_from_slice(&4800512u64.to_ne_bytes());
        r[24..28].copy_from_slice(&2560u32.to_ne_bytes());
        r[34..36].copy_from_slice(b"WS");
        r[44..50].copy_from_slice(b"io-app");
        // cmd: 3 bytes "ab\0" at offset 64.
        r[60..64].copy_from_slice(&((3u32 << 16) | 64).to_ne_bytes());
        r[64..67].copy_from_slice(b"ab\0");
        r
    }

    #[test]
    fn parses_fields_by_name() {
        let f = EventFormat::parse("block", BLOCK_IO_START).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("block_io_start", 2102));
        assert_eq!(f.fields.len(), 12);
        let rwbs = f.field("rwbs").unwrap();
        assert_eq!(
            (rwbs.offset, rwbs.size, rwbs.kind),
            (34, 10, FieldKind::Array)
        );
        assert_eq!(f.field("cmd").unwrap().kind, FieldKind::DataLoc);
        assert!(f.field("common_pid").unwrap().signed);
        let err = f.field("request").unwrap_err().to_string();
        assert!(
            err.contains("block:block_io_start has no field `request`"),
            "{err}"
        );
    }

    #[test]
    fn decodes_a_record() {
        let f = EventFormat::parse("block", BLOCK_IO_START).unwrap();
        let r = record();
        assert_eq!(f.field("common_type").unwrap().u64(&r), Some(2102));
        assert_eq!(f.field("common_pid").unwrap().i64(&r), Some(-7));
        let dev = f.field("dev").unwrap().u64(&r).unwrap();
        assert_eq!((dev >> 20, dev & 0xfffff), (254, 16));
        assert_eq!(f.field("sector").unwrap().u64(&r), Some(4800512));
        assert_eq!(f.field("rwbs").unwrap().str(&r).as_deref(), Some("WS"));
        assert_eq!(f.field("comm").unwrap().str(&r).as_deref(), Some("io-app"));
        assert_eq!(f.field("cmd").unwrap().str(&r).as_deref(), Some("ab"));
        // A record cut short decodes to None, never a panic.
        assert_eq!(f.field("cmd").unwrap().str(&r[..40]), None);
        assert_eq!(f.field("sector").unwrap().u64(&r[..20]), None);
    }

    #[test]
    fn reads_this_kernels_formats() {
        if !crate::testing::require_root("reads_this_kernels_formats") {
            return;
        }
        let fs = Tracefs::open().unwrap();
        let exec = fs.event("sched", "sched_process_exec").unwrap();
        assert_eq!(exec.field("filename").unwrap().kind, FieldKind::DataLoc);
        assert!(fs.has_event("block", "block_rq_complete"));
        let err = fs.event("block", "no_such_event").unwrap_err().to_string();
        assert!(err.contains("no tracepoint block:no_such_event"), "{err}");
    }
}
