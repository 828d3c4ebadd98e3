//! The mmap ring buffer of one perf event: the kernel writes records at
//! `data_head`, we read from `data_tail` and hand the space back by advancing
//! it.
//!
//! Ordering: `data_head` is read with Acquire so the record bytes it covers are
//! visible; `data_tail` is written with Release so the kernel cannot reuse the
//! space before we are done reading it. Records that wrap around the end of
//! the buffer are copied into a scratch buffer so callers always see one
//! contiguous slice.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

pub struct Ring {
    base: *mut u8,
    map_len: usize,
    data: *const u8,
    size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value; the kernel is the only other
// writer, and it synchronises through data_head / data_tail.
unsafe impl Send for Ring {}

impl Ring {
    /// Map `1 + data_pages` pages of the event `fd`. `data_pages` must be a
    /// power of two.
    pub fn map(fd: BorrowedFd<'_>, data_pages: usize) -> std::io::Result<Ring> {
        debug_assert!(data_pages.is_power_of_two());
        let page = crate::sys::page_size() as usize;
        let map_len = (1 + data_pages) * page;
        // SAFETY: mapping a perf fd is the documented way to get its ring;
        // the result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = base.cast::<u8>();
        let meta = base.cast::<perf_event_mmap_page>();
        // SAFETY: the first page is the metadata page the kernel filled in.
        let (offset, size) = unsafe {
            let off = (*meta).data_offset as usize;
            let size = (*meta).data_size as usize;
            // Kernels before 4.1 leave these zero: data follows the first page.
            if size == 0 {
                (page, data_pages * page)
            } else {
                (off, size)
            }
        };
        // SAFETY: offset lies within the mapping.
        let data = unsafe { base.add(offset) };
        Ok(Ring {
            base,
            map_len,
            data,
            size,
            scratch: Vec::new(),
        })
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is an aligned u64 in the live metadata page.
        unsafe {
            AtomicU64::from_ptr(&raw mut (*self.base.cast::<perf_event_mmap_page>()).data_head)
        }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: data_tail is an aligned u64 in the live metadata page.
        unsafe {
            AtomicU64::from_ptr(&raw mut (*self.base.cast::<perf_event_mmap_page>()).data_tail)
        }
    }

    /// Whether records are waiting.
    pub fn has_data(&self) -> bool {
        self.head().load(Ordering::Acquire) != self.tail().load(Ordering::Relaxed)
    }

    /// Call `f(type, misc, body)` for every complete record, then release the
    /// space. `body` excludes the 8-byte header.
    pub fn drain(&mut self, mut f: impl FnMut(u32, u16, &[u8])) {
        let head = self.head().load(Ordering::Acquire);
        let mut tail = self.tail().load(Ordering::Relaxed);
        let mask = self.size as u64 - 1;
        while tail + 8 <= head {
            let start = (tail & mask) as usize;
            let header = self.read(start, 8);
            let kind = u32::from_ne_bytes(header[0..4].try_into().unwrap());
            let misc = u16::from_ne_bytes(header[4..6].try_into().unwrap());
            let size = u16::from_ne_bytes(header[6..8].try_into().unwrap()) as usize;
            if size < 8 || tail + size as u64 > head {
                break; // A torn or corrupt header: stop, never read garbage.
            }
            let body_start = (start + 8) & mask as usize;
            let body = self.read(body_start, size - 8);
            f(kind, misc, body);
            tail += size as u64;
        }
        self.tail().store(tail, Ordering::Release);
    }

    /// `len` bytes at `start`, copied into scratch when they wrap.
    fn read(&mut self, start: usize, len: usize) -> &[u8] {
        if start + len <= self.size {
            // SAFETY: the range is inside the data area and covered by head.
            unsafe { std::slice::from_raw_parts(self.data.add(start), len) }
        } else {
            let first = self.size - start;
            self.scratch.clear();
            // SAFETY: both ranges are inside the data area.
            unsafe {
                self.scratch
                    .extend_from_slice(std::slice::from_raw_parts(self.data.add(start), first));
                self.scratch
                    .extend_from_slice(std::slice::from_raw_parts(self.data, len - first));
            }
            &self.scratch
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base and map_len are exactly what mmap returned.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}
