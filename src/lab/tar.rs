//! Just enough of the tar format (POSIX ustar) for submissions: writing
//! regular files, and reading them back within limits. A submission is
//! learner input, so reading checks every header's checksum, refuses links
//! and devices, and stops at a total size and a number of files.

use std::collections::BTreeMap;

const BLOCK: usize = 512;

/// Limits on what an archive may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_files: usize,
    pub max_file_bytes: u64,
}

/// A tar archive of `files` (path, content), in the given order.
pub fn write(files: &[(String, Vec<u8>)], mtime: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for (name, data) in files {
        if name.len() > 100 || name.is_empty() || name.starts_with('/') {
            return Err(format!(
                "{name:?}: names in a submission are 1 to 100 bytes, relative"
            ));
        }
        let mut h = [0u8; BLOCK];
        h[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut h[100..108], 0o644);
        octal(&mut h[108..116], 0);
        octal(&mut h[116..124], 0);
        octal(&mut h[124..136], data.len() as u64);
        octal(&mut h[136..148], mtime);
        h[156] = b'0';
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        let sum = checksum(&h);
        // Six digits, NUL, space: the historical layout every reader takes.
        let digits = format!("{sum:06o}\0 ");
        h[148..156].copy_from_slice(digits.as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(BLOCK), 0);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    Ok(out)
}

/// The regular files of a tar archive, by path (`./` stripped). Folders
/// are skipped, as are pax headers; links, devices and FIFOs are refused.
pub fn read(data: &[u8], limits: &Limits) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut files = BTreeMap::new();
    let mut at = 0;
    let mut long_name: Option<String> = None;
    while at + BLOCK <= data.len() {
        let h = &data[at..at + BLOCK];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let stored = parse_octal(&h[148..156]).ok_or("not a tar archive (bad header)")?;
        if stored != checksum(h) {
            return Err("not a tar archive, or a damaged one (header checksum)".into());
        }
        let size = parse_octal(&h[124..136]).ok_or("a tar header has a bad size")?;
        if size > limits.max_file_bytes {
            return Err(format!(
                "a file in the archive has {size} bytes, over the limit of {}",
                limits.max_file_bytes
            ));
        }
        let start = at + BLOCK;
        let end = start
            .checked_add(size as usize)
            .filter(|&e| e <= data.len())
            .ok_or("the archive is cut short")?;
        let body = &data[start..end];
        let name = match long_name.take() {
            Some(n) => n,
            None => header_name(h),
        };
        match h[156] {
            b'0' | 0 | b'7' => {
                let name = name.trim_start_matches("./").to_string();
                if !name.is_empty() {
                    if files.len() >= limits.max_files {
                        return Err(format!(
                            "the archive holds more than {} files",
                            limits.max_files
                        ));
                    }
                    files.insert(name, body.to_vec());
                }
            }
            b'5' | b'x' | b'g' => {}
            b'L' => {
                long_name = Some(
                    String::from_utf8_lossy(body)
                        .trim_end_matches('\0')
                        .to_string(),
                );
            }
            other => {
                return Err(format!(
                    "{name}: the archive holds a link or a special file (type {:?}); \
                     a submission holds regular files only",
                    other as char
                ));
            }
        }
        at = start + (size as usize).next_multiple_of(BLOCK);
    }
    Ok(files)
}

fn header_name(h: &[u8]) -> String {
    let field = |b: &[u8]| {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let name = field(&h[..100]);
    let prefix = if &h[257..262] == b"ustar" {
        field(&h[345..500])
    } else {
        String::new()
    };
    if prefix.is_empty() {
        name
    } else {
        format!("{prefix}/{name}")
    }
}

/// Octal digits right-aligned with a NUL terminator, filling `field`.
fn octal(field: &mut [u8], v: u64) {
    let n = field.len() - 1;
    let digits = format!("{v:0n$o}");
    field[..n].copy_from_slice(digits.as_bytes());
    field[n] = 0;
}

fn parse_octal(field: &[u8]) -> Option<u64> {
    let s: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let s = s.trim();
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

/// The header's byte sum with the checksum field read as spaces.
fn checksum(h: &[u8]) -> u64 {
    h.iter()
        .enumerate()
        .map(|(i, &b)| if (148..156).contains(&i) { b' ' } else { b } as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_files: 8,
        max_file_bytes: 1 << 20,
    };

    #[test]
    fn round_trips_and_system_tar_agrees() {
        let files = vec![
            (
                "answers.toml".to_string(),
                b"[who]\ncomm = \"io-app\"\n".to_vec(),
            ),
            ("artifacts/profile.folded".to_string(), vec![b'x'; 1000]),
            ("empty".to_string(), vec![]),
        ];
        let data = write(&files, 1_700_000_000).unwrap();
        assert_eq!(data.len() % BLOCK, 0);
        let back = read(&data, &LIMITS).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back["artifacts/profile.folded"], vec![b'x'; 1000]);
        // The system's tar reads it too.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tar");
        std::fs::write(&path, &data).unwrap();
        let out = std::process::Command::new("tar")
            .arg("-tvf")
            .arg(&path)
            .output();
        if let Ok(out) = out {
            assert!(out.status.success(), "{out:?}");
            let list = String::from_utf8_lossy(&out.stdout);
            assert!(list.contains("artifacts/profile.folded"), "{list}");
        }
    }

    #[test]
    fn refuses_damage_links_and_excess() {
        let files = vec![("a".to_string(), b"1".to_vec())];
        let mut data = write(&files, 0).unwrap();
        data[0] = b'b';
        assert!(read(&data, &LIMITS).unwrap_err().contains("checksum"));
        assert!(
            read(b"not a tar archive at all, but long enough? no", &LIMITS)
                .unwrap()
                .is_empty()
        );
        let mut link = write(&files, 0).unwrap();
        link[156] = b'2';
        let sum = checksum(&link[..BLOCK]);
        link[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        assert!(
            read(&link, &LIMITS)
                .unwrap_err()
                .contains("regular files only")
        );
        let many: Vec<(String, Vec<u8>)> = (0..9).map(|i| (format!("f{i}"), vec![])).collect();
        assert!(
            read(&write(&many, 0).unwrap(), &LIMITS)
                .unwrap_err()
                .contains("more than 8")
        );
        let big = vec![("f".to_string(), vec![0u8; 2 << 20])];
        assert!(
            read(&write(&big, 0).unwrap(), &LIMITS)
                .unwrap_err()
                .contains("over the limit")
        );
        let cut = write(&[("f".to_string(), vec![1u8; 2000])], 0).unwrap();
        assert!(
            read(&cut[..1024], &LIMITS)
                .unwrap_err()
                .contains("cut short")
        );
    }
}
