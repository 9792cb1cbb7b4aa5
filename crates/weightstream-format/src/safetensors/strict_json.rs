//! JSON values that refuse duplicate keys at every level.
//!
//! serde_json keeps the last of two equal keys (`{"dtype": "F16", "dtype":
//! "F32"}` reads as F32), while the safetensors library refuses the file: a
//! scanner using one and a loader using the other would see different
//! tensors. Entries are read through this type instead, so a repeated key
//! anywhere in a header is an error.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value as Json};

/// The start of the message of a duplicate-key error (the caller turns it
/// into a typed error).
pub const DUPLICATE_KEY: &str = "duplicate key ";

/// A JSON value read with duplicate keys refused.
pub struct StrictJson(pub Json);

impl<'de> Deserialize<'de> for StrictJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictJson)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Number::from_f64(v).map_or(Json::Null, Json::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        StrictJson::deserialize(d).map(|s| s.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut v = Vec::new();
        while let Some(StrictJson(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Json::Array(v))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let StrictJson(v) = map.next_value()?;
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("{DUPLICATE_KEY}'{k}'")));
            }
            m.insert(k, v);
        }
        Ok(Json::Object(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Json, String> {
        serde_json::from_str::<StrictJson>(s).map(|v| v.0).map_err(|e| e.to_string())
    }

    #[test]
    fn duplicates_are_refused_at_every_level() {
        assert_eq!(parse(r#"{"a":1,"b":[1,{"c":2.5}]}"#).unwrap(), serde_json::json!({"a":1,"b":[1,{"c":2.5}]}));
        assert!(parse(r#"{"dtype":"F16","dtype":"F32"}"#).unwrap_err().starts_with("duplicate key 'dtype'"));
        assert!(parse(r#"{"x":{"k":{"a":1,"a":2}}}"#).unwrap_err().starts_with("duplicate key 'a'"));
        assert!(parse(r#"[{"a":1},{"b":1,"b":2}]"#).unwrap_err().starts_with("duplicate key 'b'"));
    }
}
