//! Whether this run is CI.

/// Whether `CI` says this is a CI run, read as `scripts/test.sh` reads it (`true`,
/// `TRUE`, `True`, `1`, `yes`). Where a test or bench could skip for want of something
/// (a database, an agent, a built binary), under CI it must fail instead.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| is_ci_value(&v))
}

/// A test or bench that cannot run here for want of `why` says so on stderr, and the
/// caller returns; under CI ([`in_ci`]) a skipped check is a failed one, so this
/// panics instead. `what` names the check ("the Claude ACP end-to-end test").
pub fn skip_unless_ci(what: &str, why: impl std::fmt::Display) {
    assert!(!in_ci(), "CI=true: {what} must run, and cannot: {why}");
    eprintln!("skipping {what}: {why}");
}

fn is_ci_value(value: &str) -> bool {
    matches!(value, "true" | "TRUE" | "True" | "1" | "yes")
}

#[cfg(test)]
mod tests {
    use super::is_ci_value;

    #[test]
    fn reads_ci_as_test_sh_does() {
        for yes in ["true", "TRUE", "True", "1", "yes"] {
            assert!(is_ci_value(yes), "{yes}");
        }
        for no in ["", "false", "0", "no", "tRuE", " true"] {
            assert!(!is_ci_value(no), "{no:?}");
        }
    }
}
