//! The fast parse path's building blocks: serde types that borrow from the line and
//! never fail on a value of an unexpected type. A history record is parsed in one pass
//! straight into the few fields the importers read (no JSON tree per record); every
//! other key is skipped by serde without being built, and a field whose value has
//! another type than expected reads as absent (a number field remembers that it was
//! present but not a number, so the importer can name it). Only a line that is not JSON
//! at all fails.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Visitor methods giving `$absent` for the JSON values a lenient type does not read,
/// by kind: `map` and `seq` are skipped whole, `bool`, `numbers`, `null` and `str` are
/// scalars. A visitor lists the kinds it does not define itself.
macro_rules! absent {
    ($absent:expr; $($kind:ident),+) => {
        $(absent!(@ $kind $absent);)+
    };
    (@ map $absent:expr) => {
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok($absent)
        }
    };
    (@ seq $absent:expr) => {
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok($absent)
        }
    };
    (@ bool $absent:expr) => {
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
    (@ numbers $absent:expr) => {
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
    (@ null $absent:expr) => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
    (@ str $absent:expr) => {
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
}
pub(super) use absent;

/// A string, borrowed from the line when it has no escapes; anything else is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Text<'a>(pub(super) Option<Cow<'a, str>>);

impl<'a> Text<'a> {
    /// The string when present and non-empty.
    pub(super) fn get(&self) -> Option<&str> {
        self.0.as_deref().filter(|s| !s.is_empty())
    }

    /// [`Text::get`], owned.
    pub(super) fn owned(&self) -> Option<String> {
        self.get().map(str::to_owned)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v))))
            }
            absent!(Text(None); map, seq, bool, numbers, null);
        }
        deserializer.deserialize_any(TextVisitor(PhantomData))
    }
}

/// A JSON number, truncated to an integer; [`Number::Mistyped`] when the key was
/// present with another type (a string, an object…), so the importer can say so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Number {
    #[default]
    Absent,
    Value(i64),
    Mistyped,
}

impl Number {
    pub(super) fn get(self) -> Option<i64> {
        match self {
            Number::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NumberVisitor;
        impl<'de> Visitor<'de> for NumberVisitor {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Number::Value(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Number::Value(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                // Truncated, as every metric is (DESIGN 3.3); `as` saturates.
                Ok(if v.is_finite() {
                    Number::Value(v.trunc() as i64)
                } else {
                    Number::Mistyped
                })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                // `null` is "not reported", the same as an absent key.
                Ok(Number::Absent)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Number::Absent)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Number::Mistyped)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Number::Mistyped)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Number::Mistyped)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Number::Mistyped)
            }
        }
        deserializer.deserialize_any(NumberVisitor)
    }
}

/// `true` only for JSON `true`; anything else is false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flag(pub(super) bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FlagVisitor;
        impl<'de> Visitor<'de> for FlagVisitor {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Flag(v))
            }
            absent!(Flag(false); map, seq, numbers, null, str);
        }
        deserializer.deserialize_any(FlagVisitor)
    }
}

/// An object decoded as `T`; any other value reads as `T::default()`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Object<T>(pub(super) T);

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Default> Visitor<'de> for ObjectVisitor<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Object)
            }
            absent!(Object(T::default()); seq, bool, numbers, null, str);
        }
        deserializer.deserialize_any(ObjectVisitor(PhantomData))
    }
}

/// Text content: a string, or the `text` of an array's `{type: "text"}` blocks joined
/// by `\n`; anything else is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TextContent(pub(super) Option<String>);

#[derive(serde::Deserialize, Default)]
struct TextBlock<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    text: Text<'a>,
}

impl<'de> Deserialize<'de> for TextContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = TextContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextContent(Some(v.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut parts: Vec<String> = Vec::new();
                while let Some(Object(block)) = seq.next_element::<Object<TextBlock<'de>>>()? {
                    if block.kind.get() == Some("text")
                        && let Some(text) = block.text.get()
                    {
                        parts.push(text.to_owned());
                    }
                }
                Ok(TextContent((!parts.is_empty()).then(|| parts.join("\n"))))
            }
            absent!(TextContent(None); map, bool, numbers, null);
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Default, Debug)]
    struct Probe<'a> {
        #[serde(default, borrow)]
        name: Text<'a>,
        #[serde(default)]
        count: Number,
        #[serde(default)]
        on: Flag,
        #[serde(default)]
        inner: Object<Inner>,
        #[serde(default)]
        content: TextContent,
    }

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    struct Inner {
        #[serde(default)]
        n: Number,
    }

    #[test]
    fn wrong_types_read_as_absent_and_numbers_say_so() {
        let p: Probe<'_> = serde_json::from_str(
            r#"{"name": 5, "count": "12", "on": "yes", "inner": [1], "items": {"a": 1}, "content": 3, "other": {"deep": [1, {"x": 2}]}}"#,
        )
        .unwrap();
        assert_eq!(p.name, Text(None));
        assert_eq!(p.count, Number::Mistyped);
        assert_eq!(p.on, Flag(false));
        assert_eq!(p.inner.0, Inner::default());
        assert_eq!(p.content, TextContent(None));
    }

    #[test]
    fn right_types_read_borrowed_and_truncated() {
        let line = r#"{"name": "ab", "count": 12.9, "on": true, "inner": {"n": null}, "items": [1, "x", 3], "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}"#;
        let p: Probe<'_> = serde_json::from_str(line).unwrap();
        assert!(matches!(p.name.0, Some(Cow::Borrowed("ab"))));
        assert_eq!(p.count, Number::Value(12));
        assert_eq!(p.on, Flag(true));
        assert_eq!(p.inner.0.n, Number::Absent);
        assert_eq!(p.content.0.as_deref(), Some("a\nb"));
        let escaped: Probe<'_> = serde_json::from_str(r#"{"name": "a\nb"}"#).unwrap();
        assert_eq!(escaped.name.get(), Some("a\nb"));
    }

    #[test]
    fn only_broken_json_fails() {
        assert!(serde_json::from_str::<Probe<'_>>(r#"{"name": "x""#).is_err());
        assert!(serde_json::from_str::<Object<Probe<'_>>>("[1, 2]").is_ok());
    }
}
