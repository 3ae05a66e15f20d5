//! Whether this run is CI.

/// Whether `CI` says this is a CI run, read as `scripts/test.sh` reads it (`true`,
/// `TRUE`, `True`, `1`, `yes`). Where a test or bench could skip for want of something
/// (a database, an agent, a built binary), under CI it must fail instead.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| is_ci_value(&v))
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
