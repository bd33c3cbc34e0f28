//! Memory given back. Request bodies of many megabytes are allocated and freed all day. glibc
//! raises its mmap threshold to the largest block freed (up to 32 MiB), and blocks under the
//! threshold come from heaps that keep their pages once freed: a burst of large bodies would
//! leave the API at its peak for good. A fixed threshold keeps every large block a mapping of
//! its own, unmapped when it is freed.

/// Blocks from this size up are mapped on their own (glibc's initial threshold).
const LARGE_BLOCK: usize = 128 * 1024;

/// Sets the allocator so that large blocks go back to the system when freed.
pub fn give_back_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of the allocator; any value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK as libc::c_int);
    }
}
