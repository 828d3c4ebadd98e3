//! Kernel addresses named by the kernel itself, through the `ksyms` BPF
//! iterator: only the addresses asked for are looked up and formatted,
//! where reading /proc/kallsyms makes the kernel format every symbol it has.

use std::io::Read;

use anyhow::Context;
use aya::maps::Array;
use aya::programs::Iter;

use super::objects::KSYMS;

/// Addresses per read of the iterator: its source's `CHUNK`.
const CHUNK: usize = 128;

/// The symbol holding each of `addrs` (module symbols without their
/// "[module]"), `None` where none does; or why the kernel could not be
/// asked (no BPF, no iterators before 5.8), for the caller to fall back to
/// /proc/kallsyms.
pub fn names(addrs: &[u64]) -> anyhow::Result<Vec<Option<String>>> {
    let mut loaded = super::load(KSYMS, "naming kernel frames")?;
    let btf = super::kernel_btf()?;
    // "%ps" from 5.13 (before, the kernel prints nothing for it), else "%pB".
    names_by(&mut loaded, btf, "name_addresses", addrs).or_else(|ps| {
        names_by(&mut loaded, btf, "name_addresses_b", addrs)
            .map_err(|e| e.context(format!("{ps:#}")))
    })
}

/// `names`, by program `prog` of the loaded ksyms object.
fn names_by(
    loaded: &mut super::Loaded,
    btf: &aya::Btf,
    prog: &str,
    addrs: &[u64],
) -> anyhow::Result<Vec<Option<String>>> {
    let program: &mut Iter = loaded
        .program_mut(prog)
        .with_context(|| format!("the ksyms object has no {prog} program"))?
        .try_into()?;
    program.load("bpf_map", btf)?;
    let mut names = Vec::with_capacity(addrs.len());
    for chunk in addrs.chunks(CHUNK) {
        let mut slots: Array<_, u64> = Array::try_from(
            loaded
                .map_mut("addrs")
                .context("the ksyms object has no addrs map")?,
        )?;
        for (i, &addr) in chunk.iter().enumerate() {
            slots.set(i as u32, addr, 0)?;
        }
        // The program stops at the first 0.
        if chunk.len() < CHUNK {
            slots.set(chunk.len() as u32, 0, 0)?;
        }
        let program: &mut Iter = loaded.program_mut(prog).context("vanished")?.try_into()?;
        let link = program.attach()?;
        let mut text = String::new();
        program
            .take_link(link)?
            .into_file()?
            .read_to_string(&mut text)?;
        let lines: Vec<&str> = text.lines().collect();
        // A kernel refusing the format prints nothing.
        anyhow::ensure!(
            lines.len() == chunk.len(),
            "the kernel named {} of {} addresses ({prog})",
            lines.len(),
            chunk.len()
        );
        names.extend(lines.into_iter().map(symbol));
    }
    Ok(names)
}

/// One line of the iterator: "name", "name [module]" ("%pB": with
/// "+0x1a/0x40" after the name), or "0x..." for an address no symbol holds.
fn symbol(line: &str) -> Option<String> {
    // "%pB" adds the offset: "name+0x1a/0x40".
    let name = line.split([' ', '+']).next().unwrap_or("");
    (!name.is_empty() && !name.starts_with("0x")).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_names() {
        assert_eq!(symbol("__schedule"), Some("__schedule".into()));
        assert_eq!(
            symbol("kvm_vcpu_block [kvm]"),
            Some("kvm_vcpu_block".into())
        );
        assert_eq!(symbol("0xffffffffc0001234"), None);
        assert_eq!(
            symbol("do_nanosleep+0x6c/0x190"),
            Some("do_nanosleep".into())
        );
        assert_eq!(symbol("vcpu_run+0x1a/0x40 [kvm]"), Some("vcpu_run".into()));
        assert_eq!(symbol(""), None);
    }

    #[test]
    fn the_kernel_names_what_kallsyms_names() {
        if !crate::testing::require_root("the_kernel_names_what_kallsyms_names") {
            return;
        }
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let mut starts: std::collections::HashMap<&str, Vec<u64>> = Default::default();
        let mut functions = Vec::new();
        for line in text.lines().filter(|l| !l.contains('[')) {
            let mut f = line.split(' ');
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let addr = u64::from_str_radix(addr, 16).unwrap();
            starts.entry(name).or_default().push(addr);
            if kind == "T" {
                functions.push(addr);
            }
        }
        // A byte into a few hundred functions spread over the kernel:
        // more than one chunk.
        let addrs: Vec<u64> = functions.iter().step_by(200).map(|a| a + 1).collect();
        assert!(addrs.len() > CHUNK, "{} addresses", addrs.len());
        // Both programs: "%pB" (older kernels) names what "%ps" names.
        let mut loaded = crate::sys::bpf::load(KSYMS, "the test").unwrap();
        let btf = crate::sys::bpf::kernel_btf().unwrap();
        for prog in ["name_addresses", "name_addresses_b"] {
            let named = names_by(&mut loaded, btf, prog, &addrs).unwrap();
            assert_eq!(named.len(), addrs.len());
            for (addr, name) in addrs.iter().zip(&named) {
                // The function starting a byte before, or an alias of it.
                let name = name
                    .as_deref()
                    .unwrap_or_else(|| panic!("{prog}: {addr:#x} unnamed"));
                assert!(
                    starts[name].contains(&(addr - 1)),
                    "{prog}: {addr:#x} named {name}"
                );
            }
        }
    }
}
