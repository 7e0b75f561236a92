//! Open sets of names as enums: a file or a protocol holds one of a few words agentloop knows
//! (a trace entry's event, a request's command), or another word written by a later version or
//! by someone else. [`words!`](crate::words!) declares such an enum from one table: each known
//! word is a variant, written and read as exactly its name; any other word is `Other`, kept as
//! read and written back unchanged. Two values are equal when their words are, so a known word
//! never hides in `Other`.

use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// Declares an open enum of words: `words! { /// doc \n pub enum Name { Variant => "word", ... } }`.
/// It gets `KNOWN`, `as_str`, `named`, `Display`, equality by word, and serde as the word.
#[macro_export]
macro_rules! words {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$doc:meta])* $variant:ident => $word:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub enum $name {
            $($(#[$doc])* $variant,)*
            /// A word this version does not know, kept as read.
            Other(String),
        }

        impl $name {
            /// Every word this version knows.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),*];

            /// The word as written.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $word,)*
                    $name::Other(word) => word,
                }
            }

            /// The known words as a person reads a list of them: `a, b or c`.
            pub fn listed() -> String {
                let words: Vec<&str> = $name::KNOWN.iter().map($name::as_str).collect();
                match words.split_last() {
                    Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                    _ => words.concat(),
                }
            }

            /// The value a word names: a known one, else `Other`.
            pub fn named(word: &str) -> $name {
                $name::KNOWN.iter().find(|k| k.as_str() == word).cloned().unwrap_or_else(|| $name::Other(word.to_string()))
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl Eq for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                $crate::words::read(d, $name::named)
            }
        }
    };
}

/// Reads a JSON string (borrowed from the input when it has no escapes) and names it with
/// `named`; what is no string is refused as `String` refuses it (`expected a string`).
pub fn read<'de, D: Deserializer<'de>, T>(d: D, named: impl Fn(&str) -> T) -> Result<T, D::Error> {
    Ok(named(&Word::deserialize(d)?.0))
}

struct Word<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Word<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Word<'de>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Word<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Word<'de>, E> {
                Ok(Word(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Word<'de>, E> {
                Ok(Word(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Word<'de>, E> {
                Ok(Word(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    crate::words! {
        /// A test set.
        pub enum Fruit {
            Apple => "apple",
            Pear => "pear.green",
        }
    }

    #[test]
    fn known_words_round_trip_and_others_are_kept() {
        for f in Fruit::KNOWN {
            let text = serde_json::to_string(f).unwrap();
            let back: Fruit = serde_json::from_str(&text).unwrap();
            assert!(!matches!(back, Fruit::Other(_)), "{text}");
            assert_eq!(&back, f);
        }
        assert_eq!(serde_json::to_string(&Fruit::Pear).unwrap(), r#""pear.green""#);
        assert_eq!(Fruit::listed(), "apple or pear.green");
        let other: Fruit = serde_json::from_str(r#""plum""#).unwrap();
        assert_eq!(other, Fruit::Other("plum".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), r#""plum""#);
        assert_eq!(Fruit::Other("apple".into()), Fruit::Apple, "equal by word");
        let escaped: Fruit = serde_json::from_str(r#""\u0061pple""#).unwrap();
        assert!(matches!(escaped, Fruit::Apple));
        let e = serde_json::from_str::<Fruit>("5").unwrap_err().to_string();
        assert!(e.starts_with("invalid type: integer `5`, expected a string"), "{e}");
    }
}
