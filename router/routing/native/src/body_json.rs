//! Properties read from a JSON record value, as `router/routing/body.py` reads them (the reference): one pass
//! over the bytes, no tree. The whole value is checked (it must be one RFC 8259 document), but only the leaves
//! the reads name are decoded. Nesting is tracked on an explicit stack bounded at `MAX_DEPTH`, so no input
//! makes it recurse, and the work is linear in the value's length times the number of reads.

use crate::decode::PropType;

/// The largest value read (1 MiB); a larger one is undecodable.
pub const MAX_BODY_BYTES: usize = 1_048_576;
/// The most objects and arrays open at once; a deeper value is undecodable.
pub const MAX_DEPTH: usize = 64;

/// One property read: the JSON Pointer's reference tokens (unescaped, UTF-8) and the declared type.
#[derive(Clone, Debug)]
pub struct Read {
    pub tokens: Vec<Vec<u8>>,
    pub declared: PropType,
}

/// A leaf decoded as its declared type.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Vec<u8>),
    Int(i64),
    Bool(bool),
    Float(f64),
}

/// What one read found: nothing (no such path, or null: not counted), a value, or a failure (counted: the
/// value is undecodable, or the leaf has the wrong type).
#[derive(Clone, Debug, PartialEq)]
pub enum Got {
    Missing,
    Failed,
    Found(Value),
}

/// An open container: before its first member, or after the member at its index (arrays).
#[derive(Clone, Copy)]
enum Frame {
    ObjectStart,
    Object,
    ArrayStart,
    Array(usize),
}

struct Bad;

/// What each of `reads` finds in `value` (None: a record without a value, undecodable).
pub fn read_json(value: Option<&[u8]>, reads: &[Read]) -> Vec<Got> {
    let Some(bytes) = value else {
        return vec![Got::Failed; reads.len()];
    };
    if bytes.len() > MAX_BODY_BYTES || std::str::from_utf8(bytes).is_err() {
        return vec![Got::Failed; reads.len()];
    }
    let mut reader = Reader {
        bytes,
        pos: 0,
        reads,
        matched: vec![0; reads.len()],
        got: vec![Got::Missing; reads.len()],
        stack: Vec::with_capacity(MAX_DEPTH),
        key: Vec::new(),
        hit: false,
    };
    match reader.document() {
        Ok(()) => reader.got,
        Err(Bad) => vec![Got::Failed; reads.len()],
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    reads: &'a [Read],
    /// Per read, how many of its tokens the current path matches.
    matched: Vec<usize>,
    got: Vec<Got>,
    stack: Vec<Frame>,
    /// The current object key, unescaped (lone surrogates as their 3-byte generalized UTF-8 form, which no
    /// token holds, so such a key never matches, as in Python).
    key: Vec<u8>,
    /// Whether the last `enter` took some read one token further (the value after it may be a leaf).
    hit: bool,
}

impl Reader<'_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), Bad> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// The reads whose leaf is the value starting now (at path length `depth`).
    fn leaves(&self, depth: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.reads.len())
            .filter(move |&r| self.matched[r] == depth && self.reads[r].tokens.len() == depth)
    }

    /// A child of the innermost container begins (path length `depth`): reads that matched a sibling fall
    /// back, and those whose next token is this child's name or index go one further and forget what an
    /// earlier duplicate of it gave (the last duplicate key wins).
    fn enter(&mut self, depth: usize, token: Option<&[u8]>, index: Option<usize>) {
        self.hit = false;
        for r in 0..self.reads.len() {
            if self.matched[r] >= depth {
                self.matched[r] = depth - 1;
            }
            if self.matched[r] != depth - 1 {
                continue;
            }
            let Some(want) = self.reads[r].tokens.get(depth - 1) else {
                continue;
            };
            let hit = match (token, index) {
                (Some(key), _) => key == want.as_slice(),
                (None, Some(i)) => is_index(want, i),
                _ => false,
            };
            if hit {
                self.matched[r] = depth;
                self.got[r] = Got::Missing;
                self.hit = true;
            }
        }
    }

    /// The document: a loop over the bytes with the open containers on `stack`, never a recursion.
    fn document(&mut self) -> Result<(), Bad> {
        self.skip_ws();
        self.value()?;
        loop {
            self.skip_ws();
            let Some(&frame) = self.stack.last() else {
                return if self.pos == self.bytes.len() {
                    Ok(())
                } else {
                    Err(Bad)
                };
            };
            let depth = self.stack.len();
            match (frame, self.peek()) {
                (Frame::ObjectStart | Frame::Object, Some(b'}'))
                | (Frame::ArrayStart | Frame::Array(_), Some(b']')) => {
                    self.pos += 1;
                    self.close(depth);
                }
                (Frame::ObjectStart, _) => {
                    self.replace_top(Frame::Object);
                    self.member(depth)?;
                }
                (Frame::Object, Some(b',')) => {
                    self.pos += 1;
                    self.member(depth)?;
                }
                (Frame::ArrayStart, _) => {
                    self.replace_top(Frame::Array(0));
                    self.enter(depth, None, Some(0));
                    self.value()?;
                }
                (Frame::Array(i), Some(b',')) => {
                    self.pos += 1;
                    self.replace_top(Frame::Array(i + 1));
                    self.enter(depth, None, Some(i + 1));
                    self.skip_ws();
                    self.value()?;
                }
                _ => return Err(Bad),
            }
        }
    }

    fn replace_top(&mut self, frame: Frame) {
        if let Some(top) = self.stack.last_mut() {
            *top = frame;
        }
    }

    /// The container at path length `depth` - 1 closes.
    fn close(&mut self, depth: usize) {
        self.stack.pop();
        for m in &mut self.matched {
            if *m >= depth {
                *m = depth - 1;
            }
        }
    }

    /// `"key": value` of the object at the top of the stack (its members are at path length `depth`).
    fn member(&mut self, depth: usize) -> Result<(), Bad> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(Bad);
        }
        self.pos += 1;
        let start = self.pos;
        self.skip_plain();
        if self.peek() == Some(b'"') {
            // A key without escapes (most are) is compared where it lies.
            let (bytes, end) = (self.bytes, self.pos);
            self.pos += 1;
            self.expect(b':')?;
            self.enter(depth, Some(&bytes[start..end]), None);
        } else {
            self.pos = start;
            let mut key = std::mem::take(&mut self.key);
            key.clear();
            self.string(Some(&mut key))?;
            self.expect(b':')?;
            self.enter(depth, Some(&key), None);
            self.key = key;
        }
        self.skip_ws();
        self.value()
    }

    /// One value: a scalar is read whole; a container is only opened.
    fn value(&mut self) -> Result<(), Bad> {
        let depth = self.stack.len();
        // Only a value `enter` just matched can be a leaf (the root never is: a path has a token).
        let wanted = self.hit && self.leaves(depth).next().is_some();
        self.hit = false;
        match self.peek().ok_or(Bad)? {
            open @ (b'{' | b'[') => {
                if depth == MAX_DEPTH {
                    return Err(Bad);
                }
                self.pos += 1;
                if wanted {
                    // An object or array is no property value.
                    self.set_leaves(depth, |_| Got::Failed);
                }
                // Its members are read by `document`'s loop.
                self.stack.push(if open == b'{' {
                    Frame::ObjectStart
                } else {
                    Frame::ArrayStart
                });
                Ok(())
            }
            b'"' => {
                self.pos += 1;
                if !wanted {
                    return self.string(None).map(|_| ());
                }
                let mut text = Vec::new();
                let lone = self.string(Some(&mut text))?;
                let got = if lone {
                    Got::Failed // a lone surrogate is not text
                } else {
                    Got::Found(Value::Str(text))
                };
                self.set_leaves(depth, |t| match t {
                    PropType::Str => got.clone(),
                    _ => Got::Failed,
                });
                Ok(())
            }
            b't' | b'f' | b'n' => {
                let (literal, got): (&[u8], Got) = match self.peek() {
                    Some(b't') => (b"true", Got::Found(Value::Bool(true))),
                    Some(b'f') => (b"false", Got::Found(Value::Bool(false))),
                    _ => (b"null", Got::Missing),
                };
                if !self.bytes[self.pos..].starts_with(literal) {
                    return Err(Bad);
                }
                self.pos += literal.len();
                if wanted {
                    self.set_leaves(depth, |t| match (&got, t) {
                        (Got::Missing, _) | (_, PropType::Bool) => got.clone(),
                        _ => Got::Failed,
                    });
                }
                Ok(())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                let integral = self.number()?;
                if wanted {
                    let text =
                        std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|_| Bad)?;
                    self.set_leaves(depth, |t| number_as(text, integral, t));
                }
                Ok(())
            }
            _ => Err(Bad),
        }
    }

    fn set_leaves(&mut self, depth: usize, got: impl Fn(PropType) -> Got) {
        for r in 0..self.reads.len() {
            if self.matched[r] == depth && self.reads[r].tokens.len() == depth {
                self.got[r] = got(self.reads[r].declared);
            }
        }
    }

    /// A number (RFC 8259's grammar); whether it has neither fraction nor exponent.
    fn number(&mut self) -> Result<bool, Bad> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Bad),
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(Bad);
            }
            self.digits();
            integral = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(Bad);
            }
            self.digits();
            integral = false;
        }
        Ok(integral)
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// The rest of a string after its opening quote, unescaped into `out` when given; whether it holds a lone
    /// surrogate escape (written into `out` in its 3-byte generalized UTF-8 form).
    fn string(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<bool, Bad> {
        let mut lone = false;
        loop {
            let start = self.pos;
            self.skip_plain();
            if let Some(out) = out.as_deref_mut() {
                out.extend_from_slice(&self.bytes[start..self.pos]);
            }
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(lone);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escaped = self.peek().ok_or(Bad)?;
                    self.pos += 1;
                    let simple = match escaped {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let unit = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&unit)
                                && self.bytes[self.pos..].starts_with(b"\\u")
                            {
                                let save = self.pos;
                                self.pos += 2;
                                let low = self.hex4()?;
                                if (0xDC00..0xE000).contains(&low) {
                                    0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                                } else {
                                    self.pos = save; // the next escape stands alone
                                    unit
                                }
                            } else {
                                unit
                            };
                            if (0xD800..0xE000).contains(&code) {
                                lone = true;
                            }
                            if let Some(out) = out.as_deref_mut() {
                                push_code_point(out, code);
                            }
                            continue;
                        }
                        _ => return Err(Bad),
                    };
                    if let Some(out) = out.as_deref_mut() {
                        out.push(simple);
                    }
                }
                _ => return Err(Bad), // the end, or a raw control character
            }
        }
    }

    /// Past the plain bytes of a string (neither a quote, a backslash nor a control byte), eight at a time: strings
    /// are most of a document's bytes.
    fn skip_plain(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        // A byte's high bit is set where it is zero (exact up to the first such byte, which is all that is used).
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        while let Some(chunk) = self.bytes.get(self.pos..self.pos + 8) {
            let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let special = zero(x ^ (ONES * u64::from(b'"')))
                | zero(x ^ (ONES * u64::from(b'\\')))
                | (x.wrapping_sub(ONES * 0x20) & !x & HIGH); // below 0x20
            if special != 0 {
                self.pos += (special.trailing_zeros() / 8) as usize;
                return;
            }
            self.pos += 8;
        }
        while let Some(b) = self.peek() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                break;
            }
            self.pos += 1;
        }
    }

    fn hex4(&mut self) -> Result<u32, Bad> {
        let digits = self.bytes.get(self.pos..self.pos + 4).ok_or(Bad)?;
        let mut unit = 0;
        for &d in digits {
            unit = unit * 16 + char::from(d).to_digit(16).ok_or(Bad)?;
        }
        self.pos += 4;
        Ok(unit)
    }
}

/// UTF-8 of a code point; a surrogate gets the same 3-byte form (generalized UTF-8).
fn push_code_point(out: &mut Vec<u8>, code: u32) {
    // The casts keep the low bits, as the encoding wants.
    match code {
        0..=0x7F => out.push(code as u8),
        0x80..=0x7FF => {
            out.extend_from_slice(&[0xC0 | (code >> 6) as u8, 0x80 | (code & 0x3F) as u8])
        }
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (code >> 12) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xF0 | (code >> 18) as u8,
            0x80 | ((code >> 12) & 0x3F) as u8,
            0x80 | ((code >> 6) & 0x3F) as u8,
            0x80 | (code & 0x3F) as u8,
        ]),
    }
}

/// Whether a token names array index `i`: decimal, no leading zeros (RFC 6901).
fn is_index(token: &[u8], i: usize) -> bool {
    if token.is_empty()
        || (token.len() > 1 && token[0] == b'0')
        || !token.iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    std::str::from_utf8(token)
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        == Some(i)
}

/// A number leaf as the declared type: int takes an integral literal within int64, float any literal finite as
/// an f64 (both parses round correctly, as Python's do), anything else is the wrong type.
fn number_as(text: &str, integral: bool, declared: PropType) -> Got {
    match declared {
        PropType::Int if integral => text
            .parse::<i64>()
            .map_or(Got::Failed, |i| Got::Found(Value::Int(i))),
        PropType::Float => match text.parse::<f64>() {
            // Python reads an integral literal as an int first: `-0` is 0, so its float is +0.0.
            Ok(f) if f.is_finite() && integral && f == 0.0 => Got::Found(Value::Float(0.0)),
            Ok(f) if f.is_finite() => Got::Found(Value::Float(f)),
            _ => Got::Failed,
        },
        _ => Got::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(doc: &str, path: &[&str], declared: PropType) -> Got {
        let tokens = path.iter().map(|t| t.as_bytes().to_vec()).collect();
        read_json(Some(doc.as_bytes()), &[Read { tokens, declared }]).remove(0)
    }

    #[test]
    fn reads_nested_values_and_last_duplicates() {
        let doc = r#"{"a": {"b": [1, {"c": "x\u00e9"}]}, "n": null, "d": 1, "d": 2}"#;
        assert_eq!(
            read(doc, &["a", "b", "1", "c"], PropType::Str),
            Got::Found(Value::Str("xé".as_bytes().to_vec()))
        );
        assert_eq!(
            read(doc, &["a", "b", "0"], PropType::Int),
            Got::Found(Value::Int(1))
        );
        assert_eq!(read(doc, &["n"], PropType::Int), Got::Missing);
        assert_eq!(read(doc, &["d"], PropType::Int), Got::Found(Value::Int(2)));
        assert_eq!(read(doc, &["a"], PropType::Int), Got::Failed);
        assert_eq!(
            read(r#"{"a": {"b": 1}, "a": 3}"#, &["a", "b"], PropType::Int),
            Got::Missing
        );
    }

    #[test]
    fn refuses_deep_and_invalid_documents() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert_eq!(read(&deep, &["x"], PropType::Int), Got::Failed);
        let ok = "[".repeat(64) + &"]".repeat(64);
        assert_eq!(read(&ok, &["x"], PropType::Int), Got::Missing);
        for bad in [
            "",
            "{",
            "01",
            "[1,]",
            "{\"a\" 1}",
            "1 2",
            "\"\\x\"",
            "NaN",
            "-",
            "1.",
            "1e",
        ] {
            assert_eq!(read(bad, &["x"], PropType::Int), Got::Failed, "{bad}");
        }
    }

    #[test]
    fn surrogates() {
        let pair = read(r#"{"s": "\ud83d\ude00"}"#, &["s"], PropType::Str);
        assert_eq!(pair, Got::Found(Value::Str("😀".as_bytes().to_vec())));
        assert_eq!(
            read(r#"{"s": "\ud800"}"#, &["s"], PropType::Str),
            Got::Failed
        );
        assert_eq!(
            read(r#"{"s": "\udc00\ud800"}"#, &["s"], PropType::Str),
            Got::Failed
        );
    }
}
