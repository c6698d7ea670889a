//! Properties read from a JSON record value, as `router/routing/body.py` reads them (the reference): one pass
//! over the bytes, no tree. The whole value is checked (it must be one RFC 8259 document), but only the leaves
//! the reads name are decoded. Open containers are bits of two words, bounded at `MAX_DEPTH`, so no input
//! makes it recurse, and the work is linear in the value's length times the number of reads. Inside a
//! container no read goes into, no path is followed: it is only checked.

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
struct Bad;

/// What each of `reads` finds in `value` (None: a record without a value, undecodable).
pub fn read_json(value: Option<&[u8]>, reads: &[Read]) -> Vec<Got> {
    JsonReader::default()
        .read(value, &JsonReads::new(reads.to_vec()))
        .to_vec()
}

/// The reads of one route, with the `key_bit`s of the tokens they want at each path position, made once.
#[derive(Clone, Debug, Default)]
pub struct JsonReads {
    reads: Vec<Read>,
    /// Per path position, the `key_bit`s of the tokens the reads want there: a key whose bit is not among them
    /// is no read's next token, and is not compared with each.
    wanted_keys: Vec<u64>,
}

impl JsonReads {
    pub fn new(reads: Vec<Read>) -> JsonReads {
        let mut wanted_keys: Vec<u64> = Vec::new();
        for read in &reads {
            for (at, token) in read.tokens.iter().enumerate().take(MAX_DEPTH) {
                if wanted_keys.len() <= at {
                    wanted_keys.resize(at + 1, 0);
                }
                wanted_keys[at] |= key_bit(token);
            }
        }
        JsonReads { reads, wanted_keys }
    }

    pub fn len(&self) -> usize {
        self.reads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }
}

/// Reads JSON values one after another, keeping its buffers between them (a batch's records allocate nothing
/// but the strings they find).
#[derive(Default)]
pub struct JsonReader {
    /// Per read, how many of its tokens the current path matches.
    matched: Vec<usize>,
    got: Vec<Got>,
    /// Per open container (by nesting level), the index of its current element when it is an array some
    /// read goes into.
    indexes: Vec<usize>,
    /// Bit d: some read went to path length d + 1 through a member of a container still open (so the next
    /// sibling, or the container's end, takes it back).
    entered: u64,
    /// The current object key, unescaped (lone surrogates as their 3-byte generalized UTF-8 form, which no
    /// token holds, so such a key never matches, as in Python).
    key: Vec<u8>,
    /// The buffers of strings found in earlier values, for the next ones (as many as a value's reads hold, and
    /// one).
    spare: Vec<Vec<u8>>,
}

impl JsonReader {
    /// What each of `reads` finds in `value` (None: a record without a value, undecodable), valid until the
    /// next read.
    pub fn read(&mut self, value: Option<&[u8]>, reads: &JsonReads) -> &[Got] {
        let JsonReads { reads, wanted_keys } = reads;
        self.recycle();
        // Not UTF-8 is found where it can be: in strings (`skip_plain`); elsewhere only ASCII is JSON.
        let Some(bytes) = value.filter(|b| b.len() <= MAX_BODY_BYTES) else {
            self.got.resize(reads.len(), Got::Failed);
            return &self.got;
        };
        self.got.resize(reads.len(), Got::Missing);
        self.matched.clear();
        self.matched.resize(reads.len(), 0);
        self.indexes.resize(MAX_DEPTH, 0);
        self.entered = 0;
        let mut reader = Reader {
            bytes,
            pos: 0,
            reads,
            wanted_keys,
            buffers: self,
        };
        if reader.document().is_err() {
            self.recycle();
            self.got.resize(reads.len(), Got::Failed);
        }
        &self.got
    }

    /// Empties `got`, keeping its strings' buffers.
    fn recycle(&mut self) {
        for got in self.got.drain(..) {
            if let Got::Found(Value::Str(text)) = got {
                self.spare.push(text);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    reads: &'a [Read],
    wanted_keys: &'a [u64],
    buffers: &'a mut JsonReader,
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
    /// earlier duplicate of it gave (the last duplicate key wins). Whether some read went one further (the
    /// child may then be a leaf, or a container some read goes into).
    #[inline(always)]
    fn enter(&mut self, depth: usize, token: Option<&[u8]>, index: Option<usize>) -> bool {
        let parent = depth - 1;
        let buffers = &mut *self.buffers;
        if buffers.entered >> parent & 1 == 1 {
            for m in &mut buffers.matched {
                if *m >= depth {
                    *m = parent;
                }
            }
            buffers.entered &= (1 << parent) - 1;
        }
        if let Some(key) = token {
            let wanted = self.wanted_keys.get(parent).copied().unwrap_or(0);
            if wanted & key_bit(key) == 0 {
                return false;
            }
        }
        let mut entered = false;
        let reads = self.reads.iter().zip(buffers.got.iter_mut());
        for (matched, (read, got)) in buffers.matched.iter_mut().zip(reads) {
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
                entered = true;
            }
        }
        if entered {
            buffers.entered |= 1 << parent;
        }
        entered
    }

    /// The document: one value and nothing after it.
    fn document(&mut self) -> Result<(), Bad> {
        self.skip_ws();
        match self.peek() {
            Some(open @ (b'{' | b'[')) => {
                self.pos += 1;
                // No read goes into the root when there are none (a path has a token, so the root is no leaf).
                self.containers(open, !self.reads.is_empty())?;
            }
            _ => self.scalar()?,
        }
        self.skip_ws();
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// A container after its opening byte `open`, to its closing byte, with every container inside it: one loop,
    /// never a recursion. The open containers are bits of two words (`arrays`: 1 for an array; `live`: 1 when
    /// some read goes into it), as `MAX_DEPTH` <= 64 allows; paths are followed only inside live ones, so a
    /// container no read goes into is only checked.
    fn containers(&mut self, open: u8, root_live: bool) -> Result<(), Bad> {
        const _: () = assert!(MAX_DEPTH <= 64);
        let mut arrays = u64::from(open == b'[');
        let mut live = u64::from(root_live);
        // The innermost open container's nesting level (the root's is 0); its members are at path length
        // `level + 1`.
        let mut level = 0;
        let mut first = true; // just after an opening byte: its closing byte or a member follows
        loop {
            self.skip_ws();
            let array = arrays >> level & 1 == 1;
            let inside_live = live >> level & 1 == 1;
            let next = self.peek();
            if next == Some(if array { b']' } else { b'}' }) {
                self.pos += 1;
                if inside_live {
                    self.close(level + 1);
                }
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
            let depth = level + 1;
            let entered = if !array {
                self.key(depth, inside_live)?
            } else if inside_live {
                let index = &mut self.buffers.indexes[level];
                *index = if first { 0 } else { *index + 1 };
                let index = *index;
                self.enter(depth, None, Some(index))
            } else {
                false
            };
            match self.peek() {
                Some(inner @ (b'{' | b'[')) => {
                    if level + 2 > MAX_DEPTH {
                        return Err(Bad);
                    }
                    self.pos += 1;
                    if entered {
                        // An object or array is no property value.
                        self.set_leaves(depth, |_| Got::Failed);
                    }
                    level += 1;
                    let bit = 1u64 << level;
                    arrays = if inner == b'[' {
                        arrays | bit
                    } else {
                        arrays & !bit
                    };
                    live = if entered { live | bit } else { live & !bit };
                    first = true;
                }
                _ if entered => {
                    self.leaf(depth)?;
                    first = false;
                }
                _ => {
                    self.scalar()?;
                    first = false;
                }
            }
        }
    }

    /// `"key":` of a member at path length `depth`, and the space after it; whether some read went one further
    /// (only followed when the object is `live`).
    #[inline(always)]
    fn key(&mut self, depth: usize, live: bool) -> Result<bool, Bad> {
        if self.peek() != Some(b'"') {
            return Err(Bad);
        }
        self.pos += 1;
        let start = self.pos;
        self.skip_plain()?;
        let entered = if self.peek() == Some(b'"') {
            // A key without escapes (most are) is compared where it lies.
            let (bytes, end) = (self.bytes, self.pos);
            self.pos += 1;
            live && self.enter(depth, Some(&bytes[start..end]), None)
        } else if live {
            self.pos = start;
            let mut key = std::mem::take(&mut self.buffers.key);
            key.clear();
            self.string(Some(&mut key))?;
            let entered = self.enter(depth, Some(&key), None);
            self.buffers.key = key;
            entered
        } else {
            self.string(None)?;
            false
        };
        self.expect(b':')?;
        self.skip_ws();
        Ok(entered)
    }

    /// The container at path length `depth` - 1 closes: reads that went into it fall back.
    fn close(&mut self, depth: usize) {
        let buffers = &mut *self.buffers;
        let parent = depth - 1;
        if buffers.entered >> parent != 0 {
            for m in &mut buffers.matched {
                if *m >= depth {
                    *m = parent;
                }
            }
            buffers.entered &= (1 << parent) - 1;
        }
    }

    /// A scalar some read may end at (path length `depth`): decoded for those that do, only checked otherwise.
    fn leaf(&mut self, depth: usize) -> Result<(), Bad> {
        if self.leaves(depth).next().is_none() {
            return self.scalar(); // the reads that reached it go further
        }
        match self.peek().ok_or(Bad)? {
            b'"' => {
                self.pos += 1;
                let mut text = self.buffers.spare.pop().unwrap_or_default();
                text.clear();
                let lone = self.string(Some(&mut text))?;
                let buffers = &mut *self.buffers;
                for (r, read) in self.reads.iter().enumerate() {
                    if buffers.matched[r] != depth || read.tokens.len() != depth {
                        continue;
                    }
                    buffers.got[r] = match read.declared {
                        // A copy in a buffer of an earlier record's string: no allocation once warm.
                        PropType::Str if !lone => {
                            let mut copy = buffers.spare.pop().unwrap_or_default();
                            copy.clear();
                            copy.extend_from_slice(&text);
                            Got::Found(Value::Str(copy))
                        }
                        _ => Got::Failed, // a lone surrogate is not text
                    };
                }
                buffers.spare.push(text);
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
                self.set_leaves(depth, |t| match (&got, t) {
                    (Got::Missing, _) | (_, PropType::Bool) => got.clone(),
                    _ => Got::Failed,
                });
                Ok(())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                let integral = self.number()?;
                let text = std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|_| Bad)?;
                self.set_leaves(depth, |t| number_as(text, integral, t));
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

    /// A string, number or literal, only checked.
    #[inline(always)]
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
        self.pos = digit_run(self.bytes, self.pos);
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
        let (end, wide) = plain_run(self.bytes, start);
        self.pos = end;
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

/// Where the run of plain string bytes (neither a quote, a backslash nor a control byte) from `bytes[from]` ends,
/// and whether a byte in it is past ASCII: sixteen bytes at a time with SSE2 (part of every x86-64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn plain_run(bytes: &[u8], from: usize) -> (usize, bool) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let mut at = from;
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
    let (end, tail_wide) = plain_run_swar(bytes, at);
    (end, wide != 0 || tail_wide)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn plain_run(bytes: &[u8], from: usize) -> (usize, bool) {
    plain_run_swar(bytes, from)
}

/// `plain_run` eight bytes at a time in a u64 (any target; on x86-64 the tail of fewer than sixteen bytes).
#[inline(always)]
fn plain_run_swar(bytes: &[u8], from: usize) -> (usize, bool) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte's high bit is set where it is zero (exact up to the first such byte, which is all that is used).
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut at = from;
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
    while let Some(&b) = bytes.get(at) {
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

/// Where the run of ASCII digits from `bytes[from]` ends: eight at a time in a u64, so that a number's length
/// costs no mispredicted branch per digit.
#[inline(always)]
fn digit_run(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        // A digit is 0..=9 after the xor; adding 0x76 sets the high bit of a larger byte, and a byte past 0x7F
        // has it already. A carry comes only out of such a byte, and only into the bytes after it.
        let t = u64::from_le_bytes(chunk.try_into().expect("eight bytes")) ^ (ONES * 0x30);
        let other = (t.wrapping_add(ONES * 0x76) | t) & (ONES * 0x80);
        if other != 0 {
            return at + (other.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while bytes.get(at).is_some_and(u8::is_ascii_digit) {
        at += 1;
    }
    at
}

/// A key's bit among 64 from its length and first byte: most keys of an object differ in one of them.
#[inline(always)]
fn key_bit(key: &[u8]) -> u64 {
    let first = key.first().copied().unwrap_or(0);
    1 << (key.len().wrapping_mul(31).wrapping_add(usize::from(first)) & 63)
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
                        assert_eq!(plain_run(&bytes, 0), expected, "{bytes:?}");
                        assert_eq!(plain_run_swar(&bytes, 0), expected, "{bytes:?}");
                        // From inside: the end where the rest's run ends.
                        if len > 3 {
                            let (end, _) = naive(&bytes[3..]);
                            assert_eq!(plain_run(&bytes, 3).0, end + 3, "{bytes:?}");
                            assert_eq!(plain_run_swar(&bytes, 3).0, end + 3, "{bytes:?}");
                        }
                    }
                }
            }
        }
        // The edges of the ranges: 0x20 and 0x7F are plain; 0x80 and 0xFF are past ASCII.
        for b in [0x20u8, 0x7F, 0x80, 0xFF] {
            let bytes = [b; 33];
            assert_eq!(plain_run(&bytes, 0), naive(&bytes));
            assert_eq!(plain_run_swar(&bytes, 0), naive(&bytes));
        }
    }

    #[test]
    fn digit_runs_end_where_a_byte_by_byte_scan_ends() {
        for len in 0usize..20 {
            for at in 0..=len {
                for stop in [b'.', b'e', b'/', b':', 0x00, 0x80, 0xB9, 0xFF, b' '] {
                    let mut bytes: Vec<u8> = (0..len).map(|i| b'0' + (i % 10) as u8).collect();
                    if at < len {
                        bytes[at] = stop;
                    }
                    let expected = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
                    assert_eq!(digit_run(&bytes, 0), expected, "{bytes:?}");
                }
            }
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
