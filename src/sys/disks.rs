//! Block device names: /proc/partitions and /sys/dev/block, and resolving a
//! user's `-d` (a name, /dev/name, or major,minor) to a device number.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;

use crate::model::block::DevId;

/// A block device known to the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub dev: DevId,
    pub name: String,
}

/// The devices in /proc/partitions.
pub fn list() -> anyhow::Result<Vec<Disk>> {
    let text = std::fs::read_to_string("/proc/partitions").context("reading /proc/partitions")?;
    Ok(parse_partitions(&text))
}

/// Device names by number, for labelling requests.
pub fn names() -> HashMap<DevId, String> {
    list()
        .unwrap_or_default()
        .into_iter()
        .map(|d| (d.dev, d.name))
        .collect()
}

/// Parse /proc/partitions: a header line, then `major minor #blocks name`.
pub fn parse_partitions(text: &str) -> Vec<Disk> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let major = f.next()?.parse().ok()?;
            let minor = f.next()?.parse().ok()?;
            let _blocks = f.next()?;
            let name = f.next()?.to_string();
            Some(Disk {
                dev: DevId::new(major, minor),
                name,
            })
        })
        .collect()
}

/// What `-d` named: the device the block tracepoints report, which is the
/// whole disk (requests to a partition are traced on its disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub dev: DevId,
    pub name: String,
    /// Set when the user named a partition: its name.
    pub partition: Option<String>,
}

/// Resolve `spec` (vda, /dev/vda, 254,0 or 254:0) against `disks`.
pub fn resolve(spec: &str, disks: &[Disk]) -> anyhow::Result<Resolved> {
    let name = spec.strip_prefix("/dev/").unwrap_or(spec);
    let by_number = name
        .split_once([',', ':'])
        .and_then(|(a, b)| Some(DevId::new(a.trim().parse().ok()?, b.trim().parse().ok()?)));
    let found = match by_number {
        Some(dev) => disks.iter().find(|d| d.dev == dev),
        None => disks.iter().find(|d| d.name == name),
    };
    let Some(disk) = found else {
        let known: Vec<String> = disks
            .iter()
            .map(|d| format!("{} ({})", d.name, d.dev))
            .collect();
        anyhow::bail!(
            "no block device `{spec}`; this machine has: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    };
    Ok(
        match whole_disk(disk.dev).and_then(|p| disks.iter().find(|d| d.name == p)) {
            Some(parent) if parent.dev != disk.dev => Resolved {
                dev: parent.dev,
                name: parent.name.clone(),
                partition: Some(disk.name.clone()),
            },
            _ => Resolved {
                dev: disk.dev,
                name: disk.name.clone(),
                partition: None,
            },
        },
    )
}

/// For a partition, the name of its disk: /sys/dev/block/M:m links to
/// .../block/<disk>/<partition>.
fn whole_disk(dev: DevId) -> Option<String> {
    let link = Path::new("/sys/dev/block").join(format!("{}:{}", dev.major, dev.minor));
    if !link.join("partition").exists() {
        return None;
    }
    let target = std::fs::canonicalize(&link).ok()?;
    Some(target.parent()?.file_name()?.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARTITIONS: &str = "major minor  #blocks  name

 254        0  268435456 vda
 254        1  268434432 vda1
   7        0      65536 loop0
";

    #[test]
    fn parses_proc_partitions() {
        let d = parse_partitions(PARTITIONS);
        assert_eq!(d.len(), 3);
        assert_eq!(
            d[1],
            Disk {
                dev: DevId::new(254, 1),
                name: "vda1".into()
            }
        );
    }

    #[test]
    fn resolves_names_and_numbers() {
        let d = parse_partitions(PARTITIONS);
        for spec in ["vda", "/dev/vda", "254,0", "254:0"] {
            assert_eq!(resolve(spec, &d).unwrap().dev, DevId::new(254, 0), "{spec}");
        }
        assert_eq!(resolve("7,0", &d).unwrap().name, "loop0");
    }

    #[test]
    fn unknown_device_lists_the_real_ones() {
        let d = parse_partitions(PARTITIONS);
        let err = resolve("sdz", &d).unwrap_err().to_string();
        assert!(err.contains("no block device `sdz`"), "{err}");
        assert!(
            err.contains("vda (254,0)") && err.contains("loop0 (7,0)"),
            "{err}"
        );
        assert!(resolve("9,9", &d).is_err());
    }
}
