//! Answers in the forms people write them. Each form maps an answer to a
//! canonical text, and two answers are the same when their canonical texts
//! are: `10 MiB` = `10485760` = `10,485,760 bytes`; `ksys_write` =
//! `__x64_sys_write` = `write`; `EINVAL` = `22` = `Invalid argument`;
//! `SIGKILL` = `KILL` = `9`. Canonical texts also index answers when the
//! grader looks for copied variants.

use serde::Deserialize;

use super::policy;
use crate::model::errno::ERRNOS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// Case, surrounding space and quotes, inner runs of space and a
    /// trailing `/` do not count; yes/no/y/n/true/false are booleans.
    #[default]
    Text,
    /// A byte count, exact or with a unit (see [`bytes`]).
    Bytes,
    /// A file: its name, or any path ending in that name.
    File,
    /// A system call, by any of the kernel's names for its entry point.
    Syscall,
    /// A function as a profiler shows it: module path, Rust hash suffix,
    /// `+0x..` offset and `()` do not count.
    Function,
    /// An errno: name, number or message.
    Errno,
    /// A signal: name with or without SIG, or number.
    Signal,
    /// A plain number: `1,234.5` = `1234.50`.
    Number,
    /// A duration in seconds: a number, with an optional unit (`s`, `min`,
    /// `h`): `1.5 min` = `90 s` = `90`.
    Seconds,
    /// A block request's type, the kernel's rwbs letters (`policy::rwbs_matches`).
    Rwbs,
    /// An ELF field, with or without `p_`/`e_` (`policy::elf_field`).
    ElfField,
    /// A name prefix, with or without its trailing separator (`policy::prefix`).
    Prefix,
}

impl Form {
    /// Whether answers in this form are numbers, which a check may compare
    /// with a tolerance.
    pub fn numeric(self) -> bool {
        matches!(self, Form::Bytes | Form::Number | Form::Seconds)
    }
}

/// The canonical text of `answer` in `form`; None when it is not one
/// (e.g. `ten` as bytes).
pub fn canonical(form: Form, answer: &str) -> Option<String> {
    let s = answer.trim().trim_matches(['"', '\'', '`']).trim();
    if s.is_empty() {
        return None;
    }
    match form {
        Form::Text => Some(text(s)),
        Form::Bytes => bytes(s).map(|b| b.to_string()),
        Form::File => {
            let name = s.trim_end_matches('/').rsplit('/').next()?;
            (!name.is_empty()).then(|| name.to_string())
        }
        Form::Syscall => syscall(s),
        Form::Function => function(s),
        Form::Errno => errno(s).map(str::to_string),
        Form::Signal => signal(s).map(|n| n.to_string()),
        Form::Number => number(s).map(|n| n.to_string()),
        Form::Seconds => seconds(s).map(|n| n.to_string()),
        Form::Rwbs => policy::rwbs(s),
        Form::ElfField => policy::elf_field(s),
        Form::Prefix => policy::prefix(s),
    }
}

/// The value of a numeric form's answer (bytes, a number, seconds).
pub fn value(form: Form, answer: &str) -> Option<f64> {
    let s = answer.trim().trim_matches(['"', '\'', '`']).trim();
    match form {
        Form::Bytes => bytes(s).map(|b| b as f64),
        Form::Number => number(s),
        Form::Seconds => seconds(s),
        _ => None,
    }
}

/// Whether `answer` is within `tolerance` (relative: 0.2 is ±20%) of
/// `expected`, both read in `form`.
pub fn near(form: Form, tolerance: f64, answer: &str, expected: &str) -> bool {
    match (value(form, answer), value(form, expected)) {
        (Some(a), Some(e)) => (a - e).abs() <= tolerance * e.abs(),
        _ => false,
    }
}

/// A number: optional sign, digits (`,` `_` between groups allowed), an
/// optional fraction.
fn number(s: &str) -> Option<f64> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.trim_start_matches(['-', '+'])
            .starts_with(|c: char| c.is_ascii_digit())
        && s[1..]
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '_'));
    if !ok {
        return None;
    }
    let n: f64 = s.replace([',', '_'], "").parse().ok()?;
    n.is_finite().then_some(n)
}

/// Seconds: a number with an optional unit (s, sec, seconds, min,
/// minutes, h, hours; `m` is minutes).
fn seconds(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | ',' | '_' | '-' | '+')))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let scale = match unit.trim().trim_end_matches('.').to_lowercase().as_str() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hour" | "hours" => 3600.0,
        _ => return None,
    };
    number(num).map(|n| n * scale)
}

/// Whether two answers are the same in `form`.
pub fn same(form: Form, answer: &str, expected: &str) -> bool {
    if form == Form::Rwbs {
        return policy::rwbs_matches(answer, expected);
    }
    match (canonical(form, answer), canonical(form, expected)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn text(s: &str) -> String {
    let s = s.trim_end_matches('/').to_lowercase();
    match s.as_str() {
        "yes" | "y" | "true" => "true".into(),
        "no" | "n" | "false" => "false".into(),
        _ => s.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// A byte count: digits (`,` `_` and spaces between digit groups allowed),
/// an optional fraction, and an optional unit. Decimal units are powers of
/// 1000 (kB/KB, MB, GB, TB), binary ones powers of 1024 (KiB, MiB, GiB,
/// TiB); a bare K, M, G, T is binary, as `ls -h`, `dd` and kdiag's own
/// sizes use it. `B`, `bytes` or nothing mean bytes. The result is rounded
/// to a whole byte: `6.5 MiB` = 6815744, `10 MB` = 10000000 (not 10 MiB).
/// A rate's `/s` is allowed: `2 MiB/s` is 2097152 (bytes per second).
pub fn bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix("/s")
        .or_else(|| s.strip_suffix("/sec"))
        .unwrap_or(s)
        .trim_end();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | ',' | '_' | ' ')))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num: String = num
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    if num.is_empty() || num.starts_with('.') {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let unit = unit.trim().trim_end_matches('.');
    let mult: f64 = match unit {
        "" | "B" | "b" | "byte" | "bytes" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1024.0,
        "M" | "MiB" | "Mi" => 1024f64.powi(2),
        "G" | "GiB" | "Gi" => 1024f64.powi(3),
        "T" | "TiB" | "Ti" => 1024f64.powi(4),
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => match unit.to_lowercase().as_str() {
            "kib" => 1024.0,
            "mib" => 1024f64.powi(2),
            "gib" => 1024f64.powi(3),
            "kb" => 1e3,
            "mb" => 1e6,
            "gb" => 1e9,
            _ => return None,
        },
    };
    let v = n * mult;
    (v.is_finite() && v < 1.8e19).then(|| v.round() as u64)
}

/// Prefixes of the names one system call's entry point goes by: the
/// architecture wrappers a profile shows (`__x64_sys_write`), the generic
/// and pre-4.17 names (`sys_write`, `SyS_write`), the in-kernel helpers
/// that do the work (`ksys_write`, `__se_sys_`, `__do_sys_`).
const SYSCALL_PREFIXES: &[&str] = &[
    "__x64_sys_",
    "__ia32_sys_",
    "__arm64_sys_",
    "__riscv_sys_",
    "__s390x_sys_",
    "__se_sys_",
    "__do_sys_",
    "__sys_",
    "ksys_",
    "sys_",
];

fn syscall(s: &str) -> Option<String> {
    let s = s.to_lowercase();
    let s = s
        .trim_end_matches("(2)")
        .trim_end_matches("()")
        .trim_end_matches("(...)")
        .trim();
    let s = s.split('+').next()?.trim(); // a profile's `+0x1c`
    let name = SYSCALL_PREFIXES
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .unwrap_or(s);
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then(|| policy::libc_syscall(name).to_string())
}

fn function(s: &str) -> Option<String> {
    let s = s.split('+').next()?.trim();
    let s = s.trim_end_matches("()");
    let mut parts: Vec<&str> = s.split("::").collect();
    // Rust's legacy mangling ends a path with ::h<16 hex>.
    if parts.len() > 1
        && parts.last().is_some_and(|p| {
            p.len() == 17 && p.starts_with('h') && p[1..].bytes().all(|b| b.is_ascii_hexdigit())
        })
    {
        parts.pop();
    }
    let name = parts.last()?.trim();
    (!name.is_empty()).then(|| name.to_string())
}

fn errno(s: &str) -> Option<&'static str> {
    let number = s.trim_start_matches('-');
    if let Ok(n) = number.parse::<i32>() {
        return ERRNOS.iter().find(|e| e.0 == n).map(|e| e.1);
    }
    // "EINVAL (Invalid argument)", "EINVAL: ...": the name comes first.
    let first = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_uppercase();
    if let Some(e) = ERRNOS.iter().find(|e| e.1 == first) {
        return Some(e.1);
    }
    let msg = s.trim_end_matches('.').to_lowercase();
    ERRNOS
        .iter()
        .find(|e| e.2.to_lowercase() == msg)
        .map(|e| e.1)
}

fn signal(s: &str) -> Option<i32> {
    if let Ok(n) = s.trim_start_matches('-').parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let upper = s.to_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    crate::model::signal::signal_number(&format!("SIG{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_exact_or_with_units() {
        for same_as_10_mib in [
            "10485760",
            "10,485,760",
            "10 485 760 bytes",
            "10_485_760 B",
            "10 MiB",
            "10MiB",
            "10 M",
            "10240 KiB",
            "0.009765625 GiB",
        ] {
            assert_eq!(bytes(same_as_10_mib), Some(10485760), "{same_as_10_mib}");
        }
        assert_eq!(bytes("10 MB"), Some(10_000_000));
        assert_eq!(bytes("10000000"), Some(10_000_000));
        assert_eq!(bytes("6.5 MiB"), Some(6815744));
        assert_eq!(bytes("4 kB"), Some(4000));
        assert_eq!(bytes("4 KiB"), Some(4096));
        assert!(!same(Form::Bytes, "10 MB", "10485760"));
        for bad in ["ten", "", "MiB", "10 furlongs", ".5", "/s"] {
            assert_eq!(bytes(bad), None, "{bad}");
        }
        assert_eq!(bytes("2.25 MiB/s"), Some(2359296));
        assert_eq!(bytes("2304K/s"), Some(2359296));
    }

    #[test]
    fn numbers_seconds_and_tolerance() {
        assert_eq!(number("1,234.5"), Some(1234.5));
        assert_eq!(number("-3"), Some(-3.0));
        for bad in ["", "x1", "1x", "1 2", "."] {
            assert_eq!(number(bad), None, "{bad}");
        }
        assert!(same(Form::Number, "1,234.50", "1234.5"));
        assert_eq!(seconds("90"), Some(90.0));
        assert_eq!(seconds("90 s"), Some(90.0));
        assert_eq!(seconds("1.5 min"), Some(90.0));
        assert_eq!(seconds("2h"), Some(7200.0));
        assert_eq!(seconds("5 furlongs"), None);
        assert!(same(Form::Seconds, "1.5 minutes", "90"));
        // Relative tolerance, in the form's unit.
        assert!(near(Form::Bytes, 0.2, "2.2 MiB/s", "2359296"));
        assert!(near(Form::Bytes, 0.2, "2.7 MiB", "2359296"));
        assert!(!near(Form::Bytes, 0.2, "3 MiB", "2359296"));
        assert!(near(Form::Seconds, 0.1, "30 min", "1900"));
        assert!(!near(Form::Seconds, 0.1, "25 min", "1900"));
        assert!(near(Form::Number, 0.0, "7", "7"));
        assert!(!near(Form::Number, 0.5, "ten", "10"));
        assert!(!near(Form::Text, 0.5, "10", "10"), "text is not numeric");
    }

    #[test]
    fn system_calls_by_any_of_their_kernel_names() {
        for a in [
            "write",
            "WRITE",
            "write(2)",
            "write()",
            "sys_write",
            "SyS_write",
            "__x64_sys_write",
            "ksys_write",
            "__x64_sys_write+0x1c",
        ] {
            assert!(same(Form::Syscall, a, "write"), "{a}");
        }
        assert!(!same(Form::Syscall, "vfs_write", "write"));
        assert!(!same(Form::Syscall, "pwrite64", "write"));
        assert!(!same(Form::Syscall, "__x64_sys_read", "write"));
        // The libc wrapper that enters the kernel through it is the same call.
        assert!(same(Form::Syscall, "nanosleep", "clock_nanosleep"));
        assert!(same(Form::Syscall, "nanosleep()", "clock_nanosleep"));
        assert!(!same(Form::Syscall, "futex", "clock_nanosleep"));
        assert!(same(Form::Rwbs, "W", "WS"));
        assert!(same(Form::Rwbs, "R", "RS"));
        assert!(same(Form::ElfField, "memsz", "p_memsz"));
        assert!(same(Form::Prefix, "cache-upd", "cache-upd-"));
    }

    #[test]
    fn functions_files_errnos_and_signals() {
        assert!(same(
            Form::Function,
            "kdiag_workloads::io_app::pass::flush_ledger::h0123456789abcdef",
            "flush_ledger"
        ));
        assert!(same(Form::Function, "flush_ledger+0x2a", "flush_ledger"));
        assert!(same(Form::Function, "flush_ledger()", "flush_ledger"));
        assert!(!same(Form::Function, "flush", "flush_ledger"));

        assert!(same(
            Form::File,
            "/var/tmp/kdiag-io-app-1000/ledger-1a2b.dat",
            "ledger-1a2b.dat"
        ));
        assert!(same(Form::File, "ledger-1a2b.dat", "ledger-1a2b.dat"));
        assert!(!same(
            Form::File,
            "/var/tmp/ledger-1a2c.dat",
            "ledger-1a2b.dat"
        ));

        for a in [
            "EINVAL",
            "einval",
            "22",
            "-22",
            "Invalid argument",
            "EINVAL (Invalid argument)",
        ] {
            assert!(same(Form::Errno, a, "EINVAL"), "{a}");
        }
        assert!(!same(Form::Errno, "ENOENT", "EINVAL"));
        assert!(!same(Form::Errno, "9999", "EINVAL"));

        for a in ["SIGKILL", "sigkill", "KILL", "kill", "9", "-9"] {
            assert!(same(Form::Signal, a, "SIGKILL"), "{a}");
        }
        assert!(!same(Form::Signal, "SIGTERM", "9"));

        assert!(same(Form::Text, " Same  Range ", "same range"));
        assert!(same(Form::Text, "yes", "true"));
        assert!(same(Form::Text, "'WS'", "ws"));
        assert!(!same(Form::Text, "W", "WS"));
    }
}
