//! Terminal names from the kernel's tty_nr, as ps prints them.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// Names tty_nr values, caching what it looked up in /dev.
#[derive(Debug, Default)]
pub struct TtyNames {
    dev: Option<HashMap<u64, String>>,
}

impl TtyNames {
    pub fn name(&mut self, tty_nr: u32) -> String {
        if tty_nr == 0 {
            return "?".into();
        }
        if let Some(n) = well_known(tty_nr) {
            return n;
        }
        // Rare terminals (USB serial, virtual consoles of other drivers): find
        // the device node once.
        let dev = self.dev.get_or_insert_with(scan_dev);
        let (major, minor) = split(tty_nr);
        dev.get(&libc::makedev(major, minor))
            .cloned()
            .unwrap_or_else(|| format!("{major},{minor}"))
    }
}

fn split(tty_nr: u32) -> (u32, u32) {
    let major = (tty_nr >> 8) & 0xfff;
    let minor = (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00);
    (major, minor)
}

/// The majors every Linux system assigns the same way (devices.txt).
fn well_known(tty_nr: u32) -> Option<String> {
    let (major, minor) = split(tty_nr);
    Some(match major {
        136..=143 => format!("pts/{}", (major - 136) * 256 + minor),
        4 if minor < 64 => format!("tty{minor}"),
        4 => format!("ttyS{}", minor - 64),
        5 if minor == 0 => "tty".into(),
        5 if minor == 1 => "console".into(),
        _ => return None,
    })
}

fn scan_dev() -> HashMap<u64, String> {
    let mut map = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/dev") else {
        return map;
    };
    for e in dir.flatten() {
        if let Ok(m) = e.metadata()
            && m.file_type().is_char_device()
        {
            map.entry(m.rdev())
                .or_insert_with(|| e.file_name().to_string_lossy().into_owned());
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_like_procps() {
        let mut t = TtyNames::default();
        assert_eq!(t.name(0), "?");
        assert_eq!(t.name(34816), "pts/0"); // 136:0
        assert_eq!(t.name(34816 + 5), "pts/5");
        assert_eq!(t.name((137 << 8) | 2), "pts/258");
        assert_eq!(t.name(1025), "tty1"); // 4:1
        assert_eq!(t.name((4 << 8) | 64), "ttyS0");
        // Minor numbers above 255 live in the high bits.
        assert_eq!(t.name((136 << 8) | (1 << 20) | 4), "pts/260");
    }
}
