//! The bench process's resident memory, as Linux's `/proc/self/status` states it: its peak is
//! reset before the run, so the peak after it is what the run's in-function recount, Scan and
//! repairs held at once (the emulator is another process). Freed memory the allocator reuses
//! does not show, so this is a lower bound.

/// Resets the peak to the resident memory now, and returns that (bytes); `None` where `/proc`
/// cannot say.
pub fn reset_peak() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    status("VmRSS:")
}

/// The peak resident memory since the last reset (bytes).
pub fn peak() -> Option<u64> {
    status("VmHWM:")
}

fn status(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|line| line.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}
