//! serde_json's reader, with a struct read from a JSON object only. serde's derive also reads a
//! struct from an array, its fields by position: a second reader of every struct, which no
//! body, ask or stored value of this service uses. [`Objects`] asks serde_json for a map where
//! a struct is asked for, so that second reader is never compiled (19.4 KB of the Worker's
//! gzipped `.wasm`). Everything else passes through as it is, errors and positions included.

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use std::fmt;

/// Reads `T` from JSON text as `serde_json::from_slice` does, but a struct from an object only.
pub fn from_slice<'a, T: de::Deserialize<'a>>(text: &'a [u8]) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let value = T::deserialize(Objects(&mut de))?;
    de.end()?;
    Ok(value)
}

/// A deserializer that reads a struct as a map, and hands every value inside on the same way.
pub struct Objects<D>(pub D);

/// A method whose visitor never gets a nested value: the visitor passes as it is.
macro_rules! plain {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(visitor)
        }
    )*};
}

/// A method whose visitor may get nested values: they are read through [`Objects`] too.
macro_rules! nested {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Wrap(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Objects<D> {
    type Error = D::Error;

    plain! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128 deserialize_f32
        deserialize_f64 deserialize_char deserialize_str deserialize_string deserialize_bytes
        deserialize_byte_buf deserialize_unit deserialize_identifier deserialize_ignored_any
    }
    nested! { deserialize_any deserialize_option deserialize_seq deserialize_map }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Wrap(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrap(visitor))
    }

    /// The one change: a struct is asked for as a map.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(Wrap(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrap(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor whose nested values are read through [`Objects`].
struct Wrap<V>(V);

macro_rules! visit {
    ($($method:ident: $ty:ty)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.0.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    visit! {
        visit_bool: bool visit_i8: i8 visit_i16: i16 visit_i32: i32 visit_i64: i64 visit_i128: i128
        visit_u8: u8 visit_u16: u16 visit_u32: u32 visit_u64: u64 visit_u128: u128 visit_f32: f32
        visit_f64: f64 visit_char: char visit_str: &str visit_borrowed_str: &'de str visit_string: String
        visit_bytes: &[u8] visit_borrowed_bytes: &'de [u8] visit_byte_buf: Vec<u8>
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Objects(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Objects(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Wrap(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.0.visit_enum(Wrap(data))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(seed)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Wrap<A> {
    type Error = A::Error;
    type Variant = Wrap<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<(T::Value, Wrap<A::Variant>), A::Error> {
        self.0.variant_seed(seed).map(|(value, variant)| (value, Wrap(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrap(visitor))
    }
}

/// A seed whose value is read through [`Objects`].
struct Seed<T>(T);

impl<'de, T: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<T> {
    type Value = T::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T::Value, D::Error> {
        self.0.deserialize(Objects(d))
    }
}

#[cfg(test)]
mod tests {
    use super::from_slice;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Inner {
        a: u64,
        #[serde(default)]
        b: Option<String>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Unit,
        New(Inner),
        Pair(u64, String),
        Named { inner: Inner },
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Outer {
        inner: Inner,
        maybe: Option<Inner>,
        list: Vec<Inner>,
        map: BTreeMap<String, Inner>,
        pair: (u64, Inner),
        shapes: Vec<Shape>,
        any: serde_json::Value,
    }

    const TEXT: &str = r#"{"inner": {"a": 1}, "maybe": {"a": 2, "b": "x"}, "list": [{"a": 3}], "map": {"k": {"a": 4}},
        "pair": [5, {"a": 6}], "shapes": ["unit", {"new": {"a": 7}}, {"pair": [8, "y"]}, {"named": {"inner": {"a": 9}}}],
        "any": [{"z": [1, 2]}]}"#;

    #[test]
    fn every_shape_reads_as_serde_json_reads_it_when_each_struct_is_an_object() {
        let ours: Outer = from_slice(TEXT.as_bytes()).unwrap();
        assert_eq!(ours, serde_json::from_str::<Outer>(TEXT).unwrap());
        assert_eq!(ours.shapes[1], Shape::New(Inner { a: 7, b: None }));
    }

    #[test]
    fn a_struct_given_as_an_array_is_refused_wherever_it_is() {
        for (place, text) in [
            ("top", r#"[1, "x"]"#.to_string()),
            ("field", TEXT.replace(r#""inner": {"a": 1}"#, r#""inner": [1]"#)),
            ("option", TEXT.replace(r#"{"a": 2, "b": "x"}"#, r#"[2, "x"]"#)),
            ("list", TEXT.replace(r#"[{"a": 3}]"#, "[[3]]")),
            ("map value", TEXT.replace(r#"{"k": {"a": 4}}"#, r#"{"k": [4]}"#)),
            ("tuple", TEXT.replace(r#"[5, {"a": 6}]"#, "[5, [6]]")),
            ("variant", TEXT.replace(r#"{"new": {"a": 7}}"#, r#"{"new": [7]}"#)),
        ] {
            // serde_json alone reads every one of them, by position.
            assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{place}");
            let refused = from_slice::<Outer>(text.as_bytes()).map(|_| ()).unwrap_err().to_string();
            let expected = if place == "top" { "struct Outer" } else { "struct Inner" };
            assert!(refused.contains(&format!("invalid type: sequence, expected {expected}")), "{place}: {refused}");
        }
    }

    #[test]
    fn an_error_keeps_serde_json_s_words_and_position() {
        let text = TEXT.replace(r#""list": [{"a": 3}]"#, r#""list": [{"a": "3"}]"#);
        let ours = from_slice::<Outer>(text.as_bytes()).unwrap_err().to_string();
        assert_eq!(ours, serde_json::from_str::<Outer>(&text).unwrap_err().to_string());
        let trailing = format!("{TEXT} x");
        assert!(from_slice::<Outer>(trailing.as_bytes()).unwrap_err().to_string().starts_with("trailing characters"));
    }
}
