//! Heap buffers aligned for direct I/O.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Alignment of direct-I/O offsets, lengths and buffers. 4 KiB covers every
/// logical block size in common use (512 B and 4 KiB sectors) and the page
/// size, which is what `O_DIRECT` asks of buffers on Linux.
pub const DIRECT_ALIGN: usize = 4096;

/// `x` rounded down / up to a multiple of [`DIRECT_ALIGN`].
pub fn align_down(x: u64) -> u64 {
    x & !(DIRECT_ALIGN as u64 - 1)
}

pub fn align_up(x: u64) -> u64 {
    align_down(x + DIRECT_ALIGN as u64 - 1)
}

/// A zero-initialised heap buffer whose start is [`DIRECT_ALIGN`]-aligned.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is uniquely owned heap memory, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only read it (mutation needs &mut or the unsafe
// `slot_mut`, whose callers guarantee exclusive use).
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `None` when the allocation fails (so callers can report it instead of
    /// aborting the process).
    pub fn new(len: usize) -> Option<AlignedBuf> {
        let layout = Self::layout(len)?;
        // SAFETY: the layout has non-zero size (at least one alignment unit).
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(AlignedBuf { ptr, len })
    }

    fn layout(len: usize) -> Option<Layout> {
        Layout::from_size_align(len.max(1).checked_next_multiple_of(DIRECT_ALIGN)?, DIRECT_ALIGN).ok()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr holds len initialised (zeroed at allocation) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The buffer as a mutable slice through a shared reference: for a ring
    /// whose slots are handed to one thread at a time.
    ///
    /// # Safety
    /// No other reference to the buffer's bytes may be alive while the
    /// returned slice is.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slot_mut(&self) -> &mut [u8] {
        // SAFETY: `len` bytes allocated at `ptr` live as long as `self`; the
        // caller guarantees no other reference to them is alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Self::layout(self.len).expect("the layout was valid at allocation");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 4095, 4096, 4097, 1 << 20] {
            let mut b = AlignedBuf::new(len).unwrap();
            assert_eq!(b.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
            assert_eq!(b.len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice().fill(7);
        }
        assert!(AlignedBuf::new(usize::MAX).is_none());
        assert!(AlignedBuf::new(usize::MAX / 2).is_none());
    }

    #[test]
    fn rounding() {
        assert_eq!(align_down(4097), 4096);
        assert_eq!(align_up(4097), 8192);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(0), 0);
    }
}
