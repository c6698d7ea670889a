//! Properties read from a JSON record value, as `router/routing/body.py` reads them (the reference): one pass
//! over the bytes, no tree. The whole value is checked (it must be one RFC 8259 document), but only the leaves
//! the reads name are decoded. Nesting is tracked on an explicit stack bounded at `MAX_DEPTH`, so no input
//! makes it recurse, and the work is linear in the value's length times the number of reads. A container no
//! read goes into is only checked, by a tighter loop (`skip_container`) that follows no path.

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
    JsonReader::default().read(value, reads).to_vec()
}

/// Reads JSON values one after another, keeping its buffers between them (a batch's records allocate nothing
/// but the strings they find).
#[derive(Default)]
pub struct JsonReader {
    /// Per read, how many of its tokens the current path matches.
    matched: Vec<usize>,
    got: Vec<Got>,
    stack: Vec<Frame>,
    /// The current object key, unescaped (lone surrogates as their 3-byte generalized UTF-8 form, which no
    /// token holds, so such a key never matches, as in Python).
    key: Vec<u8>,
}

impl JsonReader {
    /// What each of `reads` finds in `value` (None: a record without a value, undecodable), valid until the
    /// next read.
    pub fn read(&mut self, value: Option<&[u8]>, reads: &[Read]) -> &[Got] {
        self.got.clear();
        // Not UTF-8 is found where it can be: in strings (`skip_plain`); elsewhere only ASCII is JSON.
        let Some(bytes) = value.filter(|b| b.len() <= MAX_BODY_BYTES) else {
            self.got.resize(reads.len(), Got::Failed);
            return &self.got;
        };
        self.got.resize(reads.len(), Got::Missing);
        self.matched.clear();
        self.matched.resize(reads.len(), 0);
        self.stack.clear();
        let mut reader = Reader {
            bytes,
            pos: 0,
            reads,
            buffers: self,
            hit: false,
        };
        if reader.document().is_err() {
            let got = &mut reader.buffers.got;
            got.clear();
            got.resize(reads.len(), Got::Failed);
        }
        &self.got
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    reads: &'a [Read],
    buffers: &'a mut JsonReader,
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
        // Most tokens follow no space or one: the loop is for pretty-printed documents.
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
        let matched = &self.buffers.matched;
        (0..self.reads.len())
            .filter(move |&r| matched[r] == depth && self.reads[r].tokens.len() == depth)
    }

    /// A child of the innermost container begins (path length `depth`): reads that matched a sibling fall
    /// back, and those whose next token is this child's name or index go one further and forget what an
    /// earlier duplicate of it gave (the last duplicate key wins).
    #[inline(always)]
    fn enter(&mut self, depth: usize, token: Option<&[u8]>, index: Option<usize>) {
        self.hit = false;
        let parent = depth - 1;
        let buffers = &mut *self.buffers;
        let reads = self.reads.iter().zip(buffers.got.iter_mut());
        for (matched, (read, got)) in buffers.matched.iter_mut().zip(reads) {
            if *matched >= depth {
                *matched = parent;
            }
            if *matched != parent {
                continue;
            }
            let Some(want) = read.tokens.get(parent) else {
                continue;
            };
            let hit = match (token, index) {
                // Most keys differ in length or first byte: no call to compare them.
                (Some(key), _) => key.first() == want.first() && key == want.as_slice(),
                (None, Some(i)) => is_index(want, i),
                _ => false,
            };
            if hit {
                *matched = depth;
                *got = Got::Missing;
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
            let Some(&frame) = self.buffers.stack.last() else {
                return if self.pos == self.bytes.len() {
                    Ok(())
                } else {
                    Err(Bad)
                };
            };
            let depth = self.buffers.stack.len();
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
        if let Some(top) = self.buffers.stack.last_mut() {
            *top = frame;
        }
    }

    /// The container at path length `depth` - 1 closes.
    fn close(&mut self, depth: usize) {
        self.buffers.stack.pop();
        for m in &mut self.buffers.matched {
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
        self.skip_plain()?;
        if self.peek() == Some(b'"') {
            // A key without escapes (most are) is compared where it lies.
            let (bytes, end) = (self.bytes, self.pos);
            self.pos += 1;
            self.expect(b':')?;
            self.enter(depth, Some(&bytes[start..end]), None);
        } else {
            self.pos = start;
            let mut key = std::mem::take(&mut self.buffers.key);
            key.clear();
            self.string(Some(&mut key))?;
            self.expect(b':')?;
            self.enter(depth, Some(&key), None);
            self.buffers.key = key;
        }
        self.skip_ws();
        self.value()
    }

    /// One value: a scalar is read whole; a container some read goes into is only opened, any other is
    /// skipped whole.
    fn value(&mut self) -> Result<(), Bad> {
        let depth = self.buffers.stack.len();
        // Only a value `enter` just matched can be a leaf (the root never is: a path has a token).
        let hit = std::mem::take(&mut self.hit);
        let wanted = hit && self.leaves(depth).next().is_some();
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
                // No read goes into it unless one took its key (or it is the root).
                let live = if depth == 0 {
                    !self.reads.is_empty()
                } else {
                    hit
                };
                if !live {
                    return self.skip_container(open, depth);
                }
                // Its members are read by `document`'s loop.
                self.buffers.stack.push(if open == b'{' {
                    Frame::ObjectStart
                } else {
                    Frame::ArrayStart
                });
                Ok(())
            }
            b'"' => {
                self.pos += 1;
                if !wanted {
                    return self.skip_string();
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
        let buffers = &mut *self.buffers;
        for r in 0..self.reads.len() {
            if buffers.matched[r] == depth && self.reads[r].tokens.len() == depth {
                buffers.got[r] = got(self.reads[r].declared);
            }
        }
    }

    /// The rest of a container no read goes into, after its opening byte `open` (at stack depth `depth`): only
    /// checked, with its open containers as bits (1: an array) rather than frames, as `MAX_DEPTH` <= 64 allows.
    fn skip_container(&mut self, open: u8, depth: usize) -> Result<(), Bad> {
        const _: () = assert!(MAX_DEPTH <= 64);
        let mut arrays = u64::from(open == b'[');
        let mut level = 0; // containers open inside the first
        let mut first = true; // just after an opening byte: its closing byte or a member follows
        loop {
            self.skip_ws();
            let array = arrays >> level & 1 == 1;
            let next = self.peek();
            if next == Some(if array { b']' } else { b'}' }) {
                self.pos += 1;
                if level == 0 {
                    return Ok(());
                }
                level -= 1;
                first = false;
                continue;
            }
            if !first {
                if next != Some(b',') {
                    return Err(Bad);
                }
                self.pos += 1;
                self.skip_ws();
            }
            if !array {
                if self.peek() != Some(b'"') {
                    return Err(Bad);
                }
                self.pos += 1;
                self.skip_string()?;
                self.expect(b':')?;
                self.skip_ws();
            }
            match self.peek() {
                Some(inner @ (b'{' | b'[')) => {
                    if depth + level + 2 > MAX_DEPTH {
                        return Err(Bad);
                    }
                    self.pos += 1;
                    level += 1;
                    arrays = arrays & !(1 << level) | u64::from(inner == b'[') << level;
                    first = true;
                }
                _ => {
                    self.scalar()?;
                    first = false;
                }
            }
        }
    }

    /// A string, number or literal, only checked.
    fn scalar(&mut self) -> Result<(), Bad> {
        match self.peek().ok_or(Bad)? {
            b'"' => {
                self.pos += 1;
                self.skip_string()
            }
            b'-' | b'0'..=b'9' => self.number().map(|_| ()),
            first @ (b't' | b'f' | b'n') => {
                let literal: &[u8] = match first {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !self.bytes[self.pos..].starts_with(literal) {
                    return Err(Bad);
                }
                self.pos += literal.len();
                Ok(())
            }
            _ => Err(Bad),
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

    /// Past the rest of a string after its opening quote, only checked: inline for a string without escapes
    /// (most are), `string` for the rest of one with some.
    #[inline(always)]
    fn skip_string(&mut self) -> Result<(), Bad> {
        self.skip_plain()?;
        if self.peek() == Some(b'"') {
            self.pos += 1;
            return Ok(());
        }
        self.string(None).map(|_| ())
    }

    /// The rest of a string after its opening quote, unescaped into `out` when given; whether it holds a lone
    /// surrogate escape (written into `out` in its 3-byte generalized UTF-8 form).
    #[inline(never)]
    fn string(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<bool, Bad> {
        let mut lone = false;
        loop {
            let start = self.pos;
            self.skip_plain()?;
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

    /// Past the plain bytes of a string (neither a quote, a backslash nor a control byte): strings are most of a
    /// document's bytes, so they are scanned many bytes at a time (`plain_run`).
    ///
    /// The value is UTF-8 as a whole exactly when these runs are: outside strings only ASCII is JSON, and a run
    /// ends at an ASCII byte, which no UTF-8 sequence holds. So a run with a byte past ASCII is checked here,
    /// and nothing else needs to be.
    #[inline(always)]
    fn skip_plain(&mut self) -> Result<(), Bad> {
        let start = self.pos;
        let (plain, wide) = plain_run(&self.bytes[start..]);
        self.pos += plain;
        self.check_text(start, wide)
    }

    /// The run from `start` is UTF-8 (checked only when it holds a byte past ASCII: `wide`).
    #[inline(always)]
    fn check_text(&self, start: usize, wide: bool) -> Result<(), Bad> {
        if wide && std::str::from_utf8(&self.bytes[start..self.pos]).is_err() {
            return Err(Bad);
        }
        Ok(())
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

/// The length of the run of plain string bytes (neither a quote, a backslash nor a control byte) `bytes` starts
/// with, and whether a byte in it is past ASCII: sixteen bytes at a time with SSE2 (part of every x86-64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn plain_run(bytes: &[u8]) -> (usize, bool) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut at = 0;
    let mut wide = 0;
    while at + 16 <= bytes.len() {
        // SAFETY: bytes[at..at + 16] lies in `bytes` (the loop's condition) and the load takes any alignment;
        // the rest are SSE2 operations on registers, and SSE2 is part of every x86-64.
        let (special, high) = unsafe {
            let x = _mm_loadu_si128(bytes.as_ptr().add(at).cast::<__m128i>());
            let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
            // Below 0x20 exactly where the unsigned max with 0x1F is 0x1F.
            let low = _mm_set1_epi8(0x1F);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(x, low), low);
            let special = _mm_or_si128(_mm_or_si128(quote, backslash), control);
            // The high bit of each byte: set past ASCII.
            (
                _mm_movemask_epi8(special) as u32,
                _mm_movemask_epi8(x) as u32,
            )
        };
        if special != 0 {
            let plain = special.trailing_zeros();
            wide |= high & ((1 << plain) - 1);
            return (at + plain as usize, wide != 0);
        }
        wide |= high;
        at += 16;
    }
    let (plain, tail_wide) = plain_run_swar(&bytes[at..]);
    (at + plain, wide != 0 || tail_wide)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn plain_run(bytes: &[u8]) -> (usize, bool) {
    plain_run_swar(bytes)
}

/// `plain_run` eight bytes at a time in a u64 (any target; on x86-64 the tail of fewer than sixteen bytes).
#[inline(always)]
fn plain_run_swar(bytes: &[u8]) -> (usize, bool) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte's high bit is set where it is zero (exact up to the first such byte, which is all that is used).
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut at = 0;
    let mut wide = 0; // the high bits seen
    while let Some(chunk) = bytes.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let special = zero(x ^ (ONES * u64::from(b'"')))
            | zero(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGH); // below 0x20
        if special != 0 {
            let plain = special.trailing_zeros() / 8;
            // The high bits of the plain bytes before it (a shift by 64 would overflow: plain < 8 here).
            wide |= x & HIGH & ((1u64 << (plain * 8)) - 1);
            return (at + plain as usize, wide != 0);
        }
        wide |= x & HIGH;
        at += 8;
    }
    for &b in &bytes[at..] {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        wide |= u64::from(b & 0x80);
        at += 1;
    }
    (at, wide != 0)
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
    fn plain_runs_end_where_a_byte_by_byte_scan_ends() {
        let naive = |bytes: &[u8]| {
            let plain = bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(bytes.len());
            (plain, bytes[..plain].iter().any(|&b| b >= 0x80))
        };
        // Every length to 40 with each special byte (and a byte past ASCII) at every position, from a plain fill.
        let specials = [b'"', b'\\', 0x00, 0x1F, 0x0A];
        for len in 0usize..40 {
            for at in 0..=len {
                for &special in &specials {
                    for wide_at in [
                        None,
                        Some(0),
                        Some(at.saturating_sub(1)),
                        Some(len.saturating_sub(1)),
                    ] {
                        let mut bytes = vec![b'a'; len];
                        if let Some(w) = wide_at.filter(|&w| w < len) {
                            bytes[w] = 0xC3;
                        }
                        if at < len {
                            bytes[at] = special;
                        }
                        let expected = naive(&bytes);
                        assert_eq!(plain_run(&bytes), expected, "{bytes:?}");
                        assert_eq!(plain_run_swar(&bytes), expected, "{bytes:?}");
                    }
                }
            }
        }
        // The edges of the ranges: 0x20 and 0x7F are plain; 0x80 and 0xFF are past ASCII.
        for b in [0x20u8, 0x7F, 0x80, 0xFF] {
            let bytes = [b; 33];
            assert_eq!(plain_run(&bytes), naive(&bytes));
            assert_eq!(plain_run_swar(&bytes), naive(&bytes));
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
