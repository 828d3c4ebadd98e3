//! A file as the rules see it: its size and the bytes at given offsets,
//! from a whole file in memory (tests, the fuzz target) or from `Image`.

/// A file as the rules read it.
pub trait FileBytes {
    /// The file's size in bytes.
    fn size(&self) -> u64;
    /// `n` bytes at `off`; None when they run past the end of the file.
    fn at(&self, off: u64, n: u64) -> Option<&[u8]>;
}

/// `n` bytes at `off` of a slice.
pub(super) fn slice_at(s: &[u8], off: u64, n: u64) -> Option<&[u8]> {
    let start = usize::try_from(off).ok()?;
    let end = start.checked_add(usize::try_from(n).ok()?)?;
    s.get(start..end)
}

impl FileBytes for &[u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn at(&self, off: u64, n: u64) -> Option<&[u8]> {
        slice_at(self, off, n)
    }
}

impl FileBytes for Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn at(&self, off: u64, n: u64) -> Option<&[u8]> {
        slice_at(self, off, n)
    }
}

/// The byte at `off`, if within the file.
pub(super) fn byte(f: &dyn FileBytes, off: u64) -> Option<u8> {
    f.at(off, 1).map(|b| b[0])
}

/// The first `n` bytes, or the whole file when it is shorter.
pub(super) fn prefix(f: &dyn FileBytes, n: u64) -> &[u8] {
    f.at(0, n.min(f.size())).unwrap_or_default()
}
