//! How a case's `checks:` are read: a list of one-key maps (`- stop: done`) or one map
//! (`{stop: done, file: [...]}`); every key and field not known is refused by name.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// What a file must hold, or what the run's output must be.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    pub equals: Option<Text>,
    pub contains: Option<Texts>,
    /// Text that must not be there (each of a list): an item a later run must not report again.
    pub lacks: Option<Texts>,
    pub regex: Option<String>,
    /// A JSON Schema (inline) the text, read as JSON, must satisfy.
    pub schema: Option<Value>,
}

/// A `file:` check: `path` and what it must hold (nothing more: the file must exist).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileCheck {
    pub path: String,
    /// `false`: the file must not exist.
    pub exists: Option<bool>,
    pub equals: Option<Text>,
    pub contains: Option<Texts>,
    pub lacks: Option<Texts>,
    pub regex: Option<String>,
    pub schema: Option<Value>,
}

impl FileCheck {
    pub fn matcher(&self) -> Matcher {
        Matcher {
            equals: self.equals.clone(),
            contains: self.contains.clone(),
            lacks: self.lacks.clone(),
            regex: self.regex.clone(),
            schema: self.schema.clone(),
        }
    }
}

/// A scalar read as text: `contains: 391` means the characters 391.
#[derive(Debug, Clone, PartialEq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Text(s)),
            v @ (Value::Number(_) | Value::Bool(_)) => Ok(Text(v.to_string())),
            _ => Err(de::Error::custom("expected text (a string, number or boolean)")),
        }
    }
}

/// One text or a list of them (`contains: [apple.txt, banana.txt]`: each must be there).
#[derive(Debug, Clone, PartialEq)]
pub struct Texts(pub Vec<String>);

impl<'de> Deserialize<'de> for Texts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let one = |v: Value| match v {
            Value::String(s) => Some(s),
            v @ (Value::Number(_) | Value::Bool(_)) => Some(v.to_string()),
            _ => None,
        };
        let texts = match Value::deserialize(d)? {
            Value::Array(items) => items.into_iter().map(one).collect::<Option<Vec<String>>>(),
            v => one(v).map(|s| vec![s]),
        };
        texts.map(Texts).ok_or_else(|| de::Error::custom("expected text, or a list of texts"))
    }
}

/// One or more stop kinds (`stop: done`, `stop: [max_steps, escalated]`).
#[derive(Debug, Clone)]
pub struct Stops(pub Vec<String>);

impl<'de> Deserialize<'de> for Stops {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        match OneOrMany::deserialize(d) {
            Ok(OneOrMany::One(s)) => Ok(Stops(vec![s])),
            Ok(OneOrMany::Many(v)) => Ok(Stops(v)),
            Err(_) => Err(de::Error::custom("expected a stop kind or a list of them")),
        }
    }
}

/// One check on what a trial's run left.
#[derive(Debug, Clone)]
pub enum Check {
    /// How the run stopped (`done`, `escalated`, `max_steps`, ..., or `budget`: any limit).
    Stop(Stops),
    File(FileCheck),
    /// The run's final output (result.json's `output`, else its outcome).
    Output(Matcher),
    StepsAtMost(u64),
    TokensAtMost(u64),
    CostAtMost(f64),
}

/// Every check's key, for the error naming one that is none.
pub const CHECK_KEYS: &[&str] = &["stop", "file", "output", "steps_at_most", "tokens_at_most", "cost_at_most"];

/// A case's checks, in the order written.
#[derive(Debug, Clone, Default)]
pub struct Checks(pub Vec<Check>);

impl<'de> Deserialize<'de> for Checks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ChecksVisitor)
    }
}

struct ChecksVisitor;

impl<'de> Visitor<'de> for ChecksVisitor {
    type Value = Checks;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of checks (`- stop: done`) or a map of them")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Checks, E> {
        Ok(Checks::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checks, A::Error> {
        let mut out = Vec::new();
        while let Some(Checks(c)) = seq.next_element::<Checks>()? {
            out.extend(c);
        }
        Ok(Checks(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checks, A::Error> {
        // The map form, and each item of the list form (`- stop: done`), one check per key.
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "stop" => out.push(Check::Stop(map.next_value()?)),
                "file" => out.extend(map.next_value::<Files>()?.0.into_iter().map(Check::File)),
                "output" => out.push(Check::Output(map.next_value()?)),
                "steps_at_most" => out.push(Check::StepsAtMost(map.next_value()?)),
                "tokens_at_most" => out.push(Check::TokensAtMost(map.next_value()?)),
                "cost_at_most" => out.push(Check::CostAtMost(map.next_value()?)),
                other => return Err(de::Error::unknown_field(other, CHECK_KEYS)),
            }
        }
        Ok(Checks(out))
    }
}

/// `file:` in the map form: one file check or a list of them.
struct Files(Vec<FileCheck>);

impl<'de> Deserialize<'de> for Files {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Files;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a file check ({path, contains, ...}), a path, or a list of them")
            }
            /// `file: hello.txt`: the file must exist.
            fn visit_str<E: de::Error>(self, path: &str) -> Result<Files, E> {
                let check = FileCheck {
                    path: path.into(),
                    exists: None,
                    equals: None,
                    contains: None,
                    lacks: None,
                    regex: None,
                    schema: None,
                };
                Ok(Files(vec![check]))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Files, A::Error> {
                Ok(Files(vec![FileCheck::deserialize(de::value::MapAccessDeserializer::new(map))?]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Files, A::Error> {
                Ok(Files(Vec::deserialize(de::value::SeqAccessDeserializer::new(seq))?))
            }
        }
        d.deserialize_any(V)
    }
}
