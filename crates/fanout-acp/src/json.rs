//! Lenient accessors over untyped JSON: a missing key and a wrong type both read as "absent".

use serde_json::{Map, Value};

/// A non-empty string, or `None` for absent, empty or non-string values.
pub(crate) fn text(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// `value[key]` as a non-empty string.
pub(crate) fn text_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    text(value.get(key))
}

/// `value[key]` as an object.
pub(crate) fn object_at<'a>(value: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    value.get(key).and_then(Value::as_object)
}

/// `value[key]` unless absent or `null`.
pub(crate) fn present_at<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.get(key).filter(|v| !v.is_null())
}

/// A metric as reported: JSON numbers truncated to `i64` (saturating), anything else absent.
pub(crate) fn metric(value: Option<&Value>) -> Option<i64> {
    let number = value?.as_number()?;
    if let Some(n) = number.as_i64() {
        return Some(n);
    }
    if number.as_u64().is_some() {
        return Some(i64::MAX);
    }
    // `as` truncates toward zero and saturates, which is the documented rule.
    number.as_f64().map(|f| f as i64)
}

/// `true` only for the JSON literal `true`.
pub(crate) fn is_true(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::Bool(true)))
}

/// The first non-empty string of a JSON array.
pub(crate) fn first_text(value: Option<&Value>) -> Option<&str> {
    value?
        .as_array()?
        .iter()
        .find_map(|item| item.as_str().filter(|s| !s.is_empty()))
}

/// URL-safe base64 without padding; used to build collision-free synthesized ids.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b0 = chunk.first().copied().unwrap_or(0);
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(b0) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        let sextets = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for sextet in sextets.iter().take(chunk.len() + 1) {
            out.push(char::from(ALPHABET[*sextet as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metric_truncates_numbers_and_ignores_other_types() {
        assert_eq!(metric(Some(&json!(12))), Some(12));
        assert_eq!(metric(Some(&json!(-3))), Some(-3));
        assert_eq!(metric(Some(&json!(12.9))), Some(12));
        assert_eq!(metric(Some(&json!(-12.9))), Some(-12));
        assert_eq!(metric(Some(&json!(1e300))), Some(i64::MAX));
        assert_eq!(metric(Some(&json!(u64::MAX))), Some(i64::MAX));
        assert_eq!(metric(Some(&json!("12"))), None);
        assert_eq!(metric(Some(&json!(null))), None);
        assert_eq!(metric(Some(&json!(true))), None);
        assert_eq!(metric(None), None);
    }

    #[test]
    fn text_rejects_empty_and_wrong_types() {
        let v = json!({"a": "x", "b": "", "c": 3});
        assert_eq!(text_at(&v, "a"), Some("x"));
        assert_eq!(text_at(&v, "b"), None);
        assert_eq!(text_at(&v, "c"), None);
        assert_eq!(text_at(&json!([1]), "a"), None);
    }

    #[test]
    fn first_text_skips_non_strings() {
        assert_eq!(first_text(Some(&json!([1, "", "t1", "t2"]))), Some("t1"));
        assert_eq!(first_text(Some(&json!("t1"))), None);
        assert_eq!(first_text(Some(&json!([]))), None);
    }

    #[test]
    fn base64url_matches_rfc4648_without_padding() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foob"), "Zm9vYg");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
