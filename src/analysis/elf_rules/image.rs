//! What the rules see of a file: its size and the bytes at given offsets.
//!
//! The rules read at most the first 256 bytes (BINPRM_BUF_SIZE: the ELF
//! header, a `#!` line), the program header table (at most 64 KiB, as the
//! kernel reads it) and the first PT_INTERP string (at most PATH_MAX). So
//! `Image::read` fetches just those parts, with pread, and elf-check costs
//! the same for a 2 GiB file as for a 2 KiB one. Tests and the fuzz target
//! hand in whole files as byte slices.

use std::io;

use super::bytes::{FileBytes, slice_at};
use super::parse::Layout;
use super::{BINPRM_BUF_SIZE, PATH_MAX, PT_INTERP};

/// The parts of a file the rules read, with the file's size.
#[derive(Debug, Clone, Default)]
pub struct Image {
    size: u64,
    /// (offset, bytes) of each part read; parts may overlap.
    parts: Vec<(u64, Vec<u8>)>,
}

impl Image {
    /// Read what the rules need from a file of `size` bytes: `read_at(off,
    /// n)` returns up to `n` bytes at `off` (fewer at the end of the file).
    pub fn read(
        size: u64,
        host_machine: u16,
        mut read_at: impl FnMut(u64, usize) -> io::Result<Vec<u8>>,
    ) -> io::Result<Image> {
        let mut image = Image {
            size,
            parts: Vec::new(),
        };
        image.load(0, BINPRM_BUF_SIZE as u64, &mut read_at)?;
        let Some(layout) = Layout::of(&image, host_machine) else {
            return Ok(image);
        };
        let Some(h) = layout.header(&image) else {
            return Ok(image);
        };
        let entsize = u64::from(layout.phentsize());
        let count = (65536 / entsize).min(u64::from(h.phnum));
        image.load(h.phoff, count * entsize, &mut read_at)?;
        let interp = layout
            .phdrs(&image, &h)
            .into_iter()
            .find(|p| p.p_type == PT_INTERP);
        if let Some(p) = interp {
            image.load(p.offset, p.filesz.min(PATH_MAX), &mut read_at)?;
        }
        Ok(image)
    }

    /// Read `len` bytes at `off`, clipped to the file.
    fn load(
        &mut self,
        off: u64,
        len: u64,
        read_at: &mut impl FnMut(u64, usize) -> io::Result<Vec<u8>>,
    ) -> io::Result<()> {
        if off >= self.size {
            return Ok(());
        }
        let len = len.min(self.size - off);
        if len == 0 {
            return Ok(());
        }
        // At most 64 KiB: the program header table's limit.
        let len = usize::try_from(len).unwrap_or(usize::MAX).min(65536);
        let data = read_at(off, len)?;
        self.parts.push((off, data));
        Ok(())
    }

    /// How many bytes were read in all.
    pub fn bytes_read(&self) -> usize {
        self.parts.iter().map(|(_, d)| d.len()).sum()
    }
}

impl FileBytes for Image {
    fn size(&self) -> u64 {
        self.size
    }

    fn at(&self, off: u64, n: u64) -> Option<&[u8]> {
        let end = off.checked_add(n)?;
        if end > self.size {
            return None;
        }
        self.parts.iter().find_map(|(start, data)| {
            let from = off.checked_sub(*start)?;
            slice_at(data, from, n)
        })
    }
}
