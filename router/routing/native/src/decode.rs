//! Header values decoded by a declared property type, exactly as `router/routing/properties.py` does: a value that
//! does not decode is a missing property.

/// A declared property type (undeclared properties are strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PropType {
    Str,
    Int,
    Bool,
    Float,
}

impl PropType {
    /// The type by its name in a config's `properties` ("string", "int", "bool", "float").
    pub fn from_name(name: &str) -> Option<PropType> {
        match name {
            "string" => Some(PropType::Str),
            "int" => Some(PropType::Int),
            "bool" => Some(PropType::Bool),
            "float" => Some(PropType::Float),
            _ => None,
        }
    }
}

/// A decoded property value; strings borrow the header's bytes (already checked to be UTF-8).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decoded<'a> {
    Str(&'a [u8]),
    Int(i64),
    Bool(bool),
    Float(f64),
}

pub fn decode(raw: &[u8], t: PropType) -> Option<Decoded<'_>> {
    match t {
        PropType::Str => std::str::from_utf8(raw).ok().map(|_| Decoded::Str(raw)),
        PropType::Int => decode_int(raw).map(Decoded::Int),
        PropType::Bool => match raw {
            b"true" => Some(Decoded::Bool(true)),
            b"false" => Some(Decoded::Bool(false)),
            _ => None,
        },
        PropType::Float => decode_float(raw).map(Decoded::Float),
    }
}

/// Plain decimal int64: an optional `-`, then ASCII digits only (leading zeros allowed, as `int()` takes them).
pub fn decode_int(raw: &[u8]) -> Option<i64> {
    let (negative, body) = match raw.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, raw),
    };
    if body.is_empty() || !body.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let limit: i128 = 1 << 63;
    let mut acc: i128 = 0;
    for d in body {
        acc = acc * 10 + i128::from(d - b'0');
        if acc > limit {
            return None;
        }
    }
    let value = if negative { -acc } else { acc };
    i64::try_from(value).ok()
}

/// Python's `str.isspace()` within ASCII (`str.strip()` removes these).
pub fn is_python_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

/// `float(text)` for ASCII text the way properties.py admits it: no surrounding whitespace, and none of the
/// spellings nan, inf, -inf, +inf, infinity, -infinity (in any case). Python's own grammar otherwise: an
/// optional sign, digits with single underscores between them, "+nan" and "+infinity" still allowed.
pub fn decode_float(raw: &[u8]) -> Option<f64> {
    if !raw.is_ascii() || raw.first().is_some_and(|b| is_python_space(*b)) {
        return None;
    }
    if raw.last().is_some_and(|b| is_python_space(*b)) {
        return None;
    }
    let lower = raw.to_ascii_lowercase();
    const REFUSED: [&[u8]; 6] = [b"nan", b"inf", b"-inf", b"+inf", b"infinity", b"-infinity"];
    if REFUSED.contains(&lower.as_slice()) {
        return None;
    }
    let (sign, body) = match lower.split_first() {
        Some((b'-', rest)) => (-1.0, rest),
        Some((b'+', rest)) => (1.0, rest),
        _ => (1.0, lower.as_slice()),
    };
    match body {
        b"nan" => return Some(f64::NAN),
        b"inf" | b"infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let digits = python_numeric(body)?;
    let text = std::str::from_utf8(&digits).ok()?;
    text.parse::<f64>().ok().map(|v| sign * v)
}

/// Python's float grammar for the unsigned numeric part (digits, `.`, exponent, PEP 515 underscores); the same
/// text without underscores when it is valid.
fn python_numeric(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    // A run of digits with single underscores between digits; returns how many digits it held.
    let digit_part = |i: &mut usize, out: &mut Vec<u8>| -> Option<usize> {
        let mut count = 0;
        while *i < body.len() {
            let b = body[*i];
            if b.is_ascii_digit() {
                out.push(b);
                count += 1;
                *i += 1;
            } else if b == b'_' && count > 0 && body.get(*i + 1).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            } else {
                break;
            }
        }
        if count == 0 && body.get(*i) == Some(&b'_') {
            return None;
        }
        Some(count)
    };
    let whole = digit_part(&mut i, &mut out)?;
    let mut fraction = 0;
    if body.get(i) == Some(&b'.') {
        out.push(b'.');
        i += 1;
        fraction = digit_part(&mut i, &mut out)?;
    }
    if whole == 0 && fraction == 0 {
        return None;
    }
    if matches!(body.get(i), Some(b'e')) {
        out.push(b'e');
        i += 1;
        if let Some(&s) = body.get(i).filter(|b| **b == b'+' || **b == b'-') {
            out.push(s);
            i += 1;
        }
        if digit_part(&mut i, &mut out)? == 0 {
            return None;
        }
    }
    (i == body.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints() {
        assert_eq!(decode_int(b"0"), Some(0));
        assert_eq!(decode_int(b"-0"), Some(0));
        assert_eq!(decode_int(b"007"), Some(7));
        assert_eq!(decode_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(decode_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(decode_int(b"9223372036854775808"), None);
        assert_eq!(decode_int(b"0000000000000000000000000000001"), Some(1));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"1_0",
            b"--1",
            b"1.0",
            b"\xd9\xa1",
        ] {
            assert_eq!(decode_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(decode_float(b"1.5"), Some(1.5));
        assert_eq!(decode_float(b"1_0.2_5e1_0"), Some(10.25e10));
        assert_eq!(decode_float(b".5"), Some(0.5));
        assert_eq!(decode_float(b"5."), Some(5.0));
        assert_eq!(decode_float(b"-1e400"), Some(f64::NEG_INFINITY));
        assert_eq!(decode_float(b"+Infinity"), Some(f64::INFINITY));
        assert!(decode_float(b"-NaN").is_some_and(f64::is_nan));
        for bad in [
            &b""[..],
            b".",
            b"e5",
            b"1e",
            b"1__0",
            b"_1",
            b"1_",
            b"1_.5",
            b"1._5",
            b"1e_5",
            b" 1",
            b"1\x1f",
            b"nan",
            b"-inf",
            b"INFINITY",
            b"0x10",
            b"1.5f",
            b"++1",
        ] {
            assert_eq!(decode_float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn strings_and_bools() {
        assert_eq!(decode(b"ab", PropType::Str), Some(Decoded::Str(b"ab")));
        assert_eq!(decode(b"\xff", PropType::Str), None);
        assert_eq!(decode(b"\xed\xa0\x80", PropType::Str), None);
        assert_eq!(decode(b"true", PropType::Bool), Some(Decoded::Bool(true)));
        assert_eq!(decode(b"True", PropType::Bool), None);
    }
}
