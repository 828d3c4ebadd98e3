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
/// asked (no BPF, no iterators before 5.8, no "%ps" before 5.13), for the
/// caller to fall back to /proc/kallsyms.
pub fn names(addrs: &[u64]) -> anyhow::Result<Vec<Option<String>>> {
    let mut loaded = super::load(KSYMS, "naming kernel frames")?;
    let btf = super::kernel_btf()?;
    let program: &mut Iter = loaded
        .program_mut("name_addresses")
        .context("the ksyms object has no name_addresses program")?
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
        let program: &mut Iter = loaded
            .program_mut("name_addresses")
            .context("the ksyms object has no name_addresses program")?
            .try_into()?;
        let link = program.attach()?;
        let mut text = String::new();
        program
            .take_link(link)?
            .into_file()?
            .read_to_string(&mut text)?;
        let lines: Vec<&str> = text.lines().collect();
        // A kernel without "%ps" in bpf_seq_printf prints nothing.
        anyhow::ensure!(
            lines.len() == chunk.len(),
            "the kernel named {} of {} addresses",
            lines.len(),
            chunk.len()
        );
        names.extend(lines.into_iter().map(symbol));
    }
    Ok(names)
}

/// One line of the iterator: "name", "name [module]", or "0x..." for an
/// address no symbol holds.
fn symbol(line: &str) -> Option<String> {
    let name = line.split(' ').next().unwrap_or("");
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
        let named = names(&addrs).unwrap();
        assert_eq!(named.len(), addrs.len());
        for (addr, name) in addrs.iter().zip(&named) {
            // The function starting a byte before, or an alias of it.
            let name = name
                .as_deref()
                .unwrap_or_else(|| panic!("{addr:#x} unnamed"));
            assert!(starts[name].contains(&(addr - 1)), "{addr:#x} named {name}");
        }
    }
}
