//! spaCy's and thinc's MessagePack files (maps, arrays, strings, bins, ints, floats, nil,
//! bool) as a borrowed [`Value`] tree, decoded by `rmpv`, and the srsly convention for
//! float32 arrays.
//!
//! The model files are read once at load time; values borrow from the file's bytes.
//! `rmpv` never pre-allocates from a length in the data, and nesting deeper than
//! [`MAX_DEPTH`] is an error, so a corrupt or crafted file fails with an error instead of
//! exhausting memory or the stack.

use rmpv::ValueRef;
use std::fmt;

/// A decoded MessagePack value borrowing strings and bins from the input buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(&'a str),
    Bin(&'a [u8]),
    Array(Vec<Value<'a>>),
    Map(Vec<(Value<'a>, Value<'a>)>),
}

/// Why a buffer is not valid MessagePack (or not the subset spaCy writes).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed MessagePack: {0}")]
    Malformed(#[from] rmpv::decode::Error),
    #[error("invalid UTF-8 in a string: {0}")]
    Utf8(std::str::Utf8Error),
    #[error("unsupported MessagePack extension (type {0})")]
    Extension(i8),
    #[error("{0} trailing bytes after the value")]
    Trailing(usize),
}

/// How deep a document may nest, counted as `rmpv` counts (an array or map costs two,
/// a string or bin one more). spaCy's and thinc's files nest fewer than 10 levels; rmpv's own
/// limit (1,024) overflowed a test thread's 2 MiB stack in an unoptimised build, where
/// each level's frames are large.
pub const MAX_DEPTH: usize = 64;

/// Decodes one complete MessagePack document (no trailing bytes allowed).
pub fn decode(buf: &[u8]) -> Result<Value<'_>, DecodeError> {
    let mut rest = buf;
    let value = rmpv::decode::read_value_ref_with_max_depth(&mut rest, MAX_DEPTH)?;
    if !rest.is_empty() {
        return Err(DecodeError::Trailing(rest.len()));
    }
    Value::from_rmpv(value)
}

impl<'a> Value<'a> {
    /// The tree `rmpv` read, with strings checked as UTF-8 and integers widened.
    fn from_rmpv(v: ValueRef<'a>) -> Result<Self, DecodeError> {
        Ok(match v {
            ValueRef::Nil => Value::Nil,
            ValueRef::Boolean(b) => Value::Bool(b),
            ValueRef::Integer(i) => Value::Int(match i.as_i64() {
                Some(i) => i128::from(i),
                // rmpv's integers are i64 or u64: a value that is not the one is the other.
                None => i128::from(i.as_u64().unwrap_or_default()),
            }),
            ValueRef::F32(f) => Value::Float(f64::from(f)),
            ValueRef::F64(f) => Value::Float(f),
            ValueRef::String(s) => match s.as_err() {
                Some(e) => return Err(DecodeError::Utf8(*e)),
                None => Value::Str(s.into_str().unwrap_or_default()),
            },
            ValueRef::Binary(b) => Value::Bin(b),
            ValueRef::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(Value::from_rmpv)
                    .collect::<Result<_, _>>()?,
            ),
            ValueRef::Map(items) => Value::Map(
                items
                    .into_iter()
                    .map(|(k, v)| Ok((Value::from_rmpv(k)?, Value::from_rmpv(v)?)))
                    .collect::<Result<_, DecodeError>>()?,
            ),
            ValueRef::Ext(ty, _) => return Err(DecodeError::Extension(ty)),
        })
    }
}

impl<'a> Value<'a> {
    /// The value under a string key of a map (`None` for a missing key or a non-map).
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Map(items) => items.iter().find_map(|(k, v)| match k {
                Value::Str(s) if *s == key => Some(v),
                Value::Bin(b) if *b == key.as_bytes() => Some(v),
                _ => None,
            }),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bin(&self) -> Option<&'a [u8]> {
        match self {
            Value::Bin(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Value<'a>, Value<'a>)]> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// A short name of the value's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bin(_) => "bin",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Int(i) => write!(f, "{i}"),
            other => write!(f, "<{}>", other.kind()),
        }
    }
}

/// A float32 array in srsly's msgpack-numpy layout: a map with bin keys `nd`, `type`,
/// `shape` and `data` (little-endian, C order).
#[derive(Debug, Clone, PartialEq)]
pub struct F32Array {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Why a value is not a float32 array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    #[error("not an array object (missing `{0}`)")]
    Missing(&'static str),
    #[error("dtype {0:?}, expected \"<f4\"")]
    Dtype(String),
    #[error("shape {shape:?} needs {want} bytes of data, found {found}")]
    Size {
        shape: Vec<usize>,
        want: usize,
        found: usize,
    },
}

impl F32Array {
    pub fn from_value(v: &Value<'_>) -> Result<Self, ArrayError> {
        let dtype = v.get("type").ok_or(ArrayError::Missing("type"))?;
        let dtype = match dtype {
            Value::Str(s) => s.to_string(),
            Value::Bin(b) => String::from_utf8_lossy(b).into_owned(),
            other => other.to_string(),
        };
        if dtype != "<f4" {
            return Err(ArrayError::Dtype(dtype));
        }
        let shape: Vec<usize> = v
            .get("shape")
            .and_then(Value::as_array)
            .ok_or(ArrayError::Missing("shape"))?
            .iter()
            .map(|d| d.as_int().and_then(|i| usize::try_from(i).ok()))
            .collect::<Option<_>>()
            .ok_or(ArrayError::Missing("shape"))?;
        let data = v
            .get("data")
            .and_then(Value::as_bin)
            .ok_or(ArrayError::Missing("data"))?;
        let want = shape.iter().product::<usize>() * 4;
        if data.len() != want {
            return Err(ArrayError::Size {
                shape,
                want,
                found: data.len(),
            });
        }
        let data = data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(F32Array { shape, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_nested_values() {
        // {"a": [1, -1, nil, true], "b": bin8 "xy", "c": 300u16}
        let buf = [
            0x83, 0xa1, b'a', 0x94, 0x01, 0xff, 0xc0, 0xc3, 0xa1, b'b', 0xc4, 0x02, b'x', b'y',
            0xa1, b'c', 0xcd, 0x01, 0x2c,
        ];
        let v = decode(&buf).expect("valid msgpack");
        assert_eq!(
            v.get("a").and_then(Value::as_array).map(<[_]>::len),
            Some(4)
        );
        assert_eq!(v.get("a").unwrap().as_array().unwrap()[1], Value::Int(-1));
        assert_eq!(v.get("b").and_then(Value::as_bin), Some(&b"xy"[..]));
        assert_eq!(v.get("c").and_then(Value::as_int), Some(300));
    }

    #[test]
    fn decodes_every_width_of_ints_strings_and_floats() {
        // [u64 max, i64 min, -33 (i8), str8 "é", f32 1.5, f64 -0.25, false]
        let mut buf = vec![0x97, 0xcf];
        buf.extend(u64::MAX.to_be_bytes());
        buf.push(0xd3);
        buf.extend(i64::MIN.to_be_bytes());
        buf.extend([0xd0, 0xdf, 0xd9, 0x02, 0xc3, 0xa9, 0xca]);
        buf.extend(1.5f32.to_be_bytes());
        buf.push(0xcb);
        buf.extend((-0.25f64).to_be_bytes());
        buf.push(0xc2);
        let v = decode(&buf).expect("valid msgpack");
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Int(i128::from(u64::MAX)),
                Value::Int(i128::from(i64::MIN)),
                Value::Int(-33),
                Value::Str("é"),
                Value::Float(1.5),
                Value::Float(-0.25),
                Value::Bool(false),
            ])
        );
    }

    #[test]
    fn truncated_trailing_and_foreign_input_is_an_error() {
        let err = |buf: &[u8]| decode(buf).unwrap_err();
        assert!(matches!(err(&[0x92, 0x01]), DecodeError::Malformed(_)));
        assert!(matches!(
            err(&[0xc4, 0x05, 1, 2]),
            DecodeError::Malformed(_)
        ));
        assert!(matches!(err(&[0x01, 0x02]), DecodeError::Trailing(1)));
        assert!(matches!(err(&[0xa2, 0xff, 0xfe]), DecodeError::Utf8(_)));
        assert!(matches!(
            err(&[0xd4, 0x07, 0x00]),
            DecodeError::Extension(7)
        ));
    }

    #[test]
    fn a_huge_declared_length_or_deep_nesting_fails_without_exhausting_memory_or_stack() {
        // An array32 that claims 4 billion items holds one.
        assert!(matches!(
            decode(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0x01]).unwrap_err(),
            DecodeError::Malformed(_)
        ));
        // Nesting within the limit decodes; a million nested one-item arrays do not.
        let mut nested = vec![0x91u8; MAX_DEPTH / 2 - 1];
        nested.push(0xc0);
        assert!(decode(&nested).is_ok());
        let deep = vec![0x91u8; 1_000_000];
        assert!(matches!(
            decode(&deep).unwrap_err(),
            DecodeError::Malformed(rmpv::decode::Error::DepthLimitExceeded)
        ));
    }
}
