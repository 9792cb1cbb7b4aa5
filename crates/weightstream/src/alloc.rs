//! Large buffers whose size comes from a checkpoint: allocated so that
//! running out of host memory is an error, never an abort.

/// Types whose all-zero bit pattern is a valid value.
pub(crate) trait Zeroable: Copy {}
impl Zeroable for u8 {}
impl Zeroable for u16 {}

/// `vec![0; n]`, or `None` if the allocator refuses. Zeroed through calloc,
/// so pages are mapped lazily and the first real write is the first touch.
pub(crate) fn zeroed<T: Zeroable>(n: usize) -> Option<Vec<T>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    // SAFETY: the layout has a non-zero size; the result is zeroed memory for
    // n values of T, or null.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        return None;
    }
    // SAFETY: ptr comes from the global allocator with exactly this layout
    // (capacity n), and all n values are initialised: zero is a valid T.
    Some(unsafe { Vec::from_raw_parts(ptr, n, n) })
}
