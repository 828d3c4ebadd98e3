//! The course's answer-checking policy for the answers that name kernel
//! letters and names (docs/instructor.md, "How answers compare"): one rule
//! per kind of answer, applied by the checks engine to every lab, never
//! per lab. `forms.rs` routes the `rwbs`, `elf_field` and `prefix` forms
//! here; the check files only say which form an answer has.

/// The operation letters of a block request's rwbs string; the others
/// (S sync, M metadata, A readahead, F FUA/flush, E secure) are flags.
const RWBS_OPS: &[char] = &['R', 'W', 'D', 'N'];

/// A block request's type (`RS`, `WS`, `W`), as the kernel's rwbs letters:
/// upper case, each once, in the order the kernel writes them.
pub fn rwbs(s: &str) -> Option<String> {
    let mut letters: Vec<char> = Vec::new();
    for c in s.chars().filter(|c| !c.is_whitespace()) {
        let c = c.to_ascii_uppercase();
        if !"RWDNFSMAEB".contains(c) {
            return None;
        }
        if !letters.contains(&c) {
            letters.push(c);
        }
    }
    let order = "FRWDNEFSAMB";
    letters.sort_by_key(|c| order.find(*c));
    (!letters.is_empty()).then(|| letters.into_iter().collect())
}

/// The rule for types: the answer names the request's operation (R, W, D)
/// and no letter the requests lack; the flags it leaves out (S, M, A, F)
/// are not required, since which flags a request carries changes between
/// kernels and a question about one of them (0-demo's `what.sync`) asks
/// for it on its own. So `W` and `WS` are right for `WS`, `RS` is not.
pub fn rwbs_matches(answer: &str, expected: &str) -> bool {
    let (Some(a), Some(e)) = (rwbs(answer), rwbs(expected)) else {
        return false;
    };
    let ops = |s: &str| -> String { s.chars().filter(|c| RWBS_OPS.contains(c)).collect() };
    ops(&a) == ops(&e) && a.chars().all(|c| e.contains(c))
}

/// An ELF field by its elf(5) name, with or without its structure's prefix:
/// `memsz` = `p_memsz` = `P_MEMSZ`, `entry` = `e_entry`.
pub fn elf_field(s: &str) -> Option<String> {
    let s = s.trim().to_lowercase();
    let name = ["p_", "e_", "sh_"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .unwrap_or(&s);
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then(|| name.to_string())
}

/// A name prefix (threads' `cache-upd-`), with or without its trailing
/// separator: `cache-upd` = `cache-upd-`; case counts, as in the names.
pub fn prefix(s: &str) -> Option<String> {
    let p = s.trim().trim_end_matches(['-', '_', '.', ':', '/', ' ']);
    (!p.is_empty()).then(|| p.to_string())
}

/// Library functions that are the same call as a system call of another
/// name: glibc's `nanosleep()` (and `sleep`, `usleep`) enter the kernel
/// through `clock_nanosleep` on every architecture it supports since 2.31,
/// so a learner naming the call in the program's source names the one the
/// kernel shows.
pub const LIBC_SYSCALLS: &[(&str, &str)] = &[
    ("nanosleep", "clock_nanosleep"),
    ("usleep", "clock_nanosleep"),
    ("sleep", "clock_nanosleep"),
];

/// The system call a libc wrapper name stands for, or the name itself.
pub fn libc_syscall(name: &str) -> &str {
    LIBC_SYSCALLS
        .iter()
        .find(|(f, _)| *f == name)
        .map_or(name, |(_, s)| s)
}

/// A wrong answer's message, said once: check files write their `fail`
/// text starting with the answers key ("trend.pattern: one of ..." or
/// "why.x is not ..."), and every front end already puts the key before
/// the message.
pub fn fail_message(id: &str, fail: &str) -> String {
    let rest = fail.strip_prefix(id).map(str::trim_start);
    match rest {
        Some(r) if r.starts_with(':') => r[1..].trim_start().to_string(),
        Some(r) if !r.is_empty() => format!("this answer {r}"),
        _ => fail.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_types_name_the_operation_and_no_letter_they_lack() {
        for right in ["WS", "ws", "W", "S W", "w s"] {
            assert!(rwbs_matches(right, "WS"), "{right} for WS");
        }
        for right in ["RS", "R", "r", "SR"] {
            assert!(rwbs_matches(right, "RS"), "{right} for RS");
        }
        for wrong in ["RS", "R", "S", "WSM", "WR", "", "write"] {
            assert!(!rwbs_matches(wrong, "WS"), "{wrong} for WS");
        }
        assert!(!rwbs_matches("WS", "W"), "a flag the requests lack");
        assert_eq!(rwbs("sw").as_deref(), Some("WS"));
    }

    #[test]
    fn elf_fields_with_or_without_their_prefix() {
        for a in ["memsz", "p_memsz", "P_MEMSZ", " p_memsz "] {
            assert_eq!(elf_field(a).as_deref(), Some("memsz"), "{a}");
        }
        assert_eq!(elf_field("entry"), elf_field("e_entry"));
        assert_ne!(elf_field("filesz"), elf_field("p_memsz"));
        assert_eq!(elf_field("p_"), None);
    }

    #[test]
    fn prefixes_with_or_without_their_separator() {
        assert_eq!(prefix("cache-upd"), prefix("cache-upd-"));
        assert_eq!(prefix("bio_rd_"), prefix("bio_rd"));
        assert_ne!(prefix("cache"), prefix("cache-upd-"));
        assert_eq!(prefix("-"), None);
    }

    #[test]
    fn messages_do_not_repeat_the_key() {
        assert_eq!(
            fail_message(
                "trend.pattern",
                "trend.pattern: one of periodic, growing or one-off."
            ),
            "one of periodic, growing or one-off."
        );
        assert_eq!(
            fail_message("what.thread_name", "what.thread_name is not the prefix."),
            "this answer is not the prefix."
        );
        assert_eq!(fail_message("a.b", "Look again."), "Look again.");
        assert_eq!(libc_syscall("nanosleep"), "clock_nanosleep");
        assert_eq!(libc_syscall("write"), "write");
    }
}
