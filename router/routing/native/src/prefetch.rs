//! Asking the processor for a cache line before it is read. At 100,000 subscriptions the tables a record's
//! matches are looked up in (hundreds of megabytes) miss the caches on nearly every read, and each read waits
//! for memory; a batch knows which entries its later records will read, so it asks for them a few records
//! ahead and the waits overlap (docs/performance.md, "Reads asked for ahead").

/// How many records (or decisions) ahead a batch asks for what it will read: far enough that memory answers
/// before the read, near enough that the lines are still cached when it comes.
pub const AHEAD: usize = 8;

/// Asks for the cache line holding `address`. A hint only: it never faults, whatever the address, and changes
/// nothing the program can observe; a no-op where the target has no such instruction.
#[inline(always)]
pub fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads no memory architecturally and cannot fault, even on an invalid address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
