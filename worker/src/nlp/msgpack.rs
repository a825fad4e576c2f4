//! A zero-copy MessagePack reader for the subset spaCy and thinc write (maps, arrays,
//! strings, bins, ints, floats, nil, bool), and the srsly convention for float32 arrays.
//!
//! The model files are read once at load time; values borrow from the file's bytes.

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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unexpected end of data at byte {0}")]
    Truncated(usize),
    #[error("unsupported MessagePack marker 0x{marker:02x} at byte {at}")]
    Unsupported { marker: u8, at: usize },
    #[error("invalid UTF-8 in a string at byte {0}")]
    Utf8(usize),
    #[error("{0} trailing bytes after the value")]
    Trailing(usize),
}

/// Decodes one complete MessagePack document (no trailing bytes allowed).
pub fn decode(buf: &[u8]) -> Result<Value<'_>, DecodeError> {
    let mut r = Reader { buf, pos: 0 };
    let v = r.value()?;
    if r.pos != buf.len() {
        return Err(DecodeError::Trailing(buf.len() - r.pos));
    }
    Ok(v)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(DecodeError::Truncated(self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn len(&mut self, n: usize) -> Result<usize, DecodeError> {
        let at = self.pos;
        usize::try_from(self.be(n)?).map_err(|_| DecodeError::Truncated(at))
    }

    fn str(&mut self, n: usize) -> Result<Value<'a>, DecodeError> {
        let at = self.pos;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(Value::Str)
            .map_err(|_| DecodeError::Utf8(at))
    }

    fn array(&mut self, n: usize) -> Result<Value<'a>, DecodeError> {
        // Cap the pre-allocation: a corrupt length must not allocate gigabytes.
        let mut items = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            items.push(self.value()?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize) -> Result<Value<'a>, DecodeError> {
        let mut items = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let k = self.value()?;
            let v = self.value()?;
            items.push((k, v));
        }
        Ok(Value::Map(items))
    }

    fn value(&mut self) -> Result<Value<'a>, DecodeError> {
        let at = self.pos;
        let marker = self.take(1)?[0];
        match marker {
            0x00..=0x7f => Ok(Value::Int(i128::from(marker))),
            0x80..=0x8f => self.map(usize::from(marker & 0x0f)),
            0x90..=0x9f => self.array(usize::from(marker & 0x0f)),
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f)),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Bool(false)),
            0xc3 => Ok(Value::Bool(true)),
            0xc4..=0xc6 => {
                let n = self.len(1 << (marker - 0xc4))?;
                Ok(Value::Bin(self.take(n)?))
            }
            0xca => Ok(Value::Float(f64::from(f32::from_bits(self.be(4)? as u32)))),
            0xcb => Ok(Value::Float(f64::from_bits(self.be(8)?))),
            0xcc..=0xcf => Ok(Value::Int(i128::from(self.be(1 << (marker - 0xcc))?))),
            0xd0..=0xd3 => {
                let n = 1usize << (marker - 0xd0);
                let raw = self.be(n)?;
                let shift = 64 - 8 * n as u32;
                Ok(Value::Int(i128::from(((raw << shift) as i64) >> shift)))
            }
            0xd9..=0xdb => {
                let n = self.len(1 << (marker - 0xd9))?;
                self.str(n)
            }
            0xdc | 0xdd => {
                let n = self.len(2 << (marker - 0xdc))?;
                self.array(n)
            }
            0xde | 0xdf => {
                let n = self.len(2 << (marker - 0xde))?;
                self.map(n)
            }
            0xe0..=0xff => Ok(Value::Int(i128::from(marker as i8))),
            _ => Err(DecodeError::Unsupported { marker, at }),
        }
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
    fn truncated_and_trailing_input_is_an_error() {
        assert_eq!(decode(&[0x92, 0x01]), Err(DecodeError::Truncated(2)));
        assert_eq!(decode(&[0x01, 0x02]), Err(DecodeError::Trailing(1)));
        assert!(matches!(
            decode(&[0xc1]),
            Err(DecodeError::Unsupported { marker: 0xc1, .. })
        ));
    }
}
