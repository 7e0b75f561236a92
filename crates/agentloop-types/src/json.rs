//! JSON text of agentloop's own types. serde_json fails to serialize only a map whose key is not
//! a string, or a `Serialize` impl that fails on purpose; agentloop's types have neither (their
//! maps are keyed by strings, and no impl of theirs fails), so these never fail. The invariant
//! is held here, once, instead of at every call.
#![allow(clippy::expect_used)]

use serde::Serialize;
use serde_json::Value;

const WHY: &str = "agentloop's own types serialize: string-keyed maps, no failing Serialize impl";

/// `serde_json::to_string` of one of agentloop's own values.
pub fn to_string<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect(WHY)
}

/// `serde_json::to_string_pretty` of one of agentloop's own values.
pub fn to_string_pretty<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string_pretty(v).expect(WHY)
}

/// `serde_json::to_vec` of one of agentloop's own values.
pub fn to_vec<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect(WHY)
}

/// `serde_json::to_value` of one of agentloop's own values.
pub fn to_value<T: Serialize>(v: T) -> Value {
    serde_json::to_value(v).expect(WHY)
}

/// Adds `more`'s keys to the object `into` (a key both have takes `more`'s value); anything
/// but two objects leaves `into` as it was.
pub fn merge(into: &mut Value, more: Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, more) {
        a.extend(b);
    }
}
