//! A count of the members of every object and the elements of every array in a JSON body,
//! made without building the body: a body of a few megabytes with hundreds of thousands of
//! keys or empty arrays (`[[],[],...]`) would otherwise cost a tree of hundreds of megabytes
//! before a single field is checked.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;

/// The most object members and array elements a body of `POST /compile` can meaningfully
/// hold: its own fields, and per file its place in `files` and three members.
pub const MAX_MEMBERS: usize = texfleet_core::validate::MAX_FILES * 4 + 50;

/// Whether `body` is JSON with more than `limit` object members and array elements in all. Malformed JSON is
/// not judged here (the parser that follows reports it).
pub fn exceeds(body: &[u8], limit: usize) -> bool {
    let left = Cell::new(limit);
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let counted = Counter { left: &left }.deserialize(&mut deserializer);
    counted.is_err() && left.get() == 0
}

#[derive(Clone, Copy)]
struct Counter<'a> {
    left: &'a Cell<usize>,
}

impl Counter<'_> {
    /// Counts one member or element (an array's end counts too: an empty array is a node).
    fn spend<E: serde::de::Error>(self) -> Result<(), E> {
        match self.left.get() {
            0 => Err(E::custom("too many members")),
            left => {
                self.left.set(left - 1);
                Ok(())
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            self.spend()?;
            map.next_value_seed(self)?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            self.spend()?;
            if seq.next_element_seed(self)?.is_none() {
                return Ok(());
            }
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_members_at_every_depth() {
        assert!(!exceeds(
            br#"{"a": 1, "files": [{"path": "x", "content": "y"}]}"#,
            6
        ));
        assert!(exceeds(
            br#"{"a": 1, "files": [{"path": "x", "content": "y"}]}"#,
            5
        ));
        // Empty arrays cost nothing to send and a node each to build.
        let arrays = format!("{{\"files\": [{}]}}", vec!["[]"; 10_000].join(","));
        assert!(exceeds(arrays.as_bytes(), MAX_MEMBERS));
        let flood = format!(
            "{{{}}}",
            (0..10_000)
                .map(|i| format!("\"k{i}\": 0"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(exceeds(flood.as_bytes(), MAX_MEMBERS));
        assert!(
            !exceeds(b"{not json", 10),
            "malformed JSON is left to the parser"
        );
    }
}
