//! What every bench target reads of how it was started.

/// `cargo test` runs bench targets without `--bench`: then they run in a quick mode,
/// with tiny sizes and the same checks.
pub fn is_quick() -> bool {
    !std::env::args().any(|a| a == "--bench")
}

/// The size named by environment variable `var`, else `default`.
pub fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
