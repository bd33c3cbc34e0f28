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

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    fn resident_kib() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn touched(bytes: usize) -> Vec<u8> {
        std::hint::black_box(vec![1u8; bytes])
    }

    #[test]
    fn a_large_block_goes_back_to_the_system_after_a_larger_one_was_freed() {
        give_back_large_blocks();
        // Without a fixed threshold, freeing 30 MiB would raise it past the next block's size.
        drop(touched(30 << 20));
        let block = touched(24 << 20);
        let holding = resident_kib();
        drop(block);
        let freed = holding.saturating_sub(resident_kib());
        assert!(freed > 16 * 1024, "only {freed} KiB went back");
    }
}
