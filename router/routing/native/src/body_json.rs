//! Properties read from a JSON record value, as `router/routing/body.py` reads them (the reference), without
//! building the document. The whole value is checked (it must be one RFC 8259 document), but only the leaves the
//! reads name are decoded. Two passes:
//! - `mark_specials` marks every quote, backslash and control byte as a bit, many bytes at a time, so that
//!   finding a string's end is a shift and a bit count rather than a scan that the next token waits for;
//! - `Reader::containers` walks the tokens once. Open containers are bits of two words, bounded at
//!   `MAX_DEPTH`, so no input makes it recurse. The reads are a tree of their paths (`JsonReads`): a member
//!   is compared only with the tokens wanted below its container's node, and inside a container no read goes
//!   into, no path is followed at all. The work is linear in the value's length times the number of reads.

use crate::decode::PropType;

/// The largest value read (1 MiB); a larger one is undecodable.
pub const MAX_BODY_BYTES: usize = 1_048_576;
/// The most objects and arrays open at once; a deeper value is undecodable.
pub const MAX_DEPTH: usize = 64;
/// Zero bytes after the copy of a value the reader walks. Zero is a control byte, which no JSON token holds, so
/// every scan stops at the value's end and a byte is read without comparing its position with the length; the
/// first pass classifies whole 64-byte blocks, the last of which holds the value's end.
const PAD: usize = 64;

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

/// The reads of one route as a tree of their paths, made once: a member is compared only with the tokens the
/// reads want below its container's node, and a read is reached through its path's nodes, not tested one by one.
#[derive(Clone, Debug)]
pub struct JsonReads {
    reads: Vec<Read>,
    /// Node 0 is the root (the empty path); each other node is a path prefix some read has.
    nodes: Vec<Node>,
}

/// The path prefix of some reads.
#[derive(Clone, Debug, Default)]
struct Node {
    /// The next tokens of the reads through this node, each with the node it leads to.
    children: Vec<Child>,
    /// The `key_bit`s of the children's tokens: a key whose bit is not among them is no child's, and is not
    /// compared with each.
    key_bits: u64,
    /// The reads whose path ends here.
    ends: Vec<usize>,
    /// The reads whose path goes through or ends here (what a later duplicate of its key replaces).
    below: Vec<usize>,
}

#[derive(Clone, Debug)]
struct Child {
    token: Vec<u8>,
    /// The array index the token names (RFC 6901: decimal, no leading zeros), if any.
    index: Option<usize>,
    node: u32,
}

impl Default for JsonReads {
    fn default() -> JsonReads {
        JsonReads::new(Vec::new())
    }
}

impl JsonReads {
    pub fn new(reads: Vec<Read>) -> JsonReads {
        let mut nodes = vec![Node::default()];
        for (r, read) in reads.iter().enumerate() {
            let mut at = 0;
            for token in &read.tokens {
                let found = nodes[at].children.iter().find(|c| c.token == *token);
                let next = match found {
                    Some(child) => child.node as usize,
                    None => {
                        nodes.push(Node::default());
                        let node = nodes.len() - 1;
                        let parent = &mut nodes[at];
                        parent.key_bits |= key_bit(token);
                        parent.children.push(Child {
                            token: token.clone(),
                            index: as_index(token),
                            // Fewer nodes than reads' tokens, which are far fewer than 2^32.
                            node: u32::try_from(node).expect("a node number"),
                        });
                        node
                    }
                };
                nodes[next].below.push(r);
                at = next;
            }
            nodes[at].ends.push(r);
        }
        JsonReads { reads, nodes }
    }

    pub fn len(&self) -> usize {
        self.reads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// The node a member of `node`'s container leads to: by its key in an object, by its index in an array.
    #[inline(always)]
    fn child(&self, node: u32, member: Member<'_>) -> Option<u32> {
        let node = &self.nodes[node as usize];
        match member {
            Member::Key(key) => {
                if node.key_bits & key_bit(key) == 0 {
                    return None;
                }
                // Most keys differ in length or first byte: no call to compare them.
                node.children
                    .iter()
                    .find(|c| c.token.first() == key.first() && c.token == key)
            }
            Member::Index(i) => node.children.iter().find(|c| c.index == Some(i)),
        }
        .map(|c| c.node)
    }
}

/// A member of a container: an object's key or an array's index.
#[derive(Clone, Copy)]
enum Member<'a> {
    Key(&'a [u8]),
    Index(usize),
}

/// Reads JSON values one after another, keeping its buffers between them (a batch's records allocate nothing
/// but the strings they find).
#[derive(Default)]
pub struct JsonReader {
    got: Vec<Got>,
    /// Per open container (by nesting level) some read goes into, its path's node, and the index of its current
    /// element when it is an array.
    nodes: Vec<u32>,
    indexes: Vec<usize>,
    /// The current object key, unescaped (lone surrogates as their 3-byte generalized UTF-8 form, which no
    /// token holds, so such a key never matches, as in Python).
    key: Vec<u8>,
    /// The buffers of strings found in earlier values, for the next ones (as many as a value's reads hold, and
    /// one).
    spare: Vec<Vec<u8>>,
    /// The value being read, followed by `PAD` zero bytes.
    padded: Vec<u8>,
    /// Bit i of word w: byte 64w + i of `padded` is a quote, a backslash or a control byte (`mark_specials`).
    specials: Vec<u64>,
}

impl JsonReader {
    /// What each of `reads` finds in `value` (None: a record without a value, undecodable), valid until the
    /// next read.
    pub fn read(&mut self, value: Option<&[u8]>, tree: &JsonReads) -> &[Got] {
        let reads = &tree.reads;
        self.recycle();
        let Some(bytes) = value.filter(|b| b.len() <= MAX_BODY_BYTES) else {
            self.got.resize(reads.len(), Got::Failed);
            return &self.got;
        };
        self.got.resize(reads.len(), Got::Missing);
        self.nodes.resize(MAX_DEPTH, 0);
        self.indexes.resize(MAX_DEPTH, 0);
        let mut padded = std::mem::take(&mut self.padded);
        padded.clear();
        padded.extend_from_slice(bytes);
        padded.resize(bytes.len() + PAD, 0);
        let mut specials = std::mem::take(&mut self.specials);
        // Outside strings only ASCII is JSON, so the strings are UTF-8 exactly when the whole value is.
        let valid_text =
            !mark_specials(&padded, &mut specials) || std::str::from_utf8(bytes).is_ok();
        let mut reader = Reader {
            bytes: &padded,
            specials: &specials,
            len: bytes.len(),
            pos: 0,
            tree,
            buffers: self,
        };
        let valid = valid_text && reader.document().is_ok();
        self.padded = padded;
        self.specials = specials;
        if !valid {
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
    /// The value and `PAD` zero bytes. `pos` never passes the value's end by more than a few bytes: a scan stops
    /// at the first zero, and other steps go past a byte they have read, a zero only on the way to `Err`.
    bytes: &'a [u8],
    /// The value's length.
    len: usize,
    specials: &'a [u64],
    pos: usize,
    tree: &'a JsonReads,
    buffers: &'a mut JsonReader,
}

impl Reader<'_> {
    #[inline]
    fn peek(&self) -> u8 {
        debug_assert!(self.pos < self.bytes.len());
        // SAFETY: `pos` stays within a few bytes of the value's end (see `bytes`), and `PAD` bytes follow it.
        unsafe { *self.bytes.get_unchecked(self.pos) }
    }

    #[inline]
    fn skip_ws(&mut self) {
        // Most tokens follow no space or one: the loop is for pretty-printed documents.
        while matches!(self.peek(), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), Bad> {
        self.skip_ws();
        if self.peek() == byte {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// A member of the container at `node` begins: the node it leads to, if some read goes there. Those reads
    /// forget what an earlier duplicate of it gave (the last duplicate key wins, as in Python).
    #[inline(always)]
    fn member(&mut self, node: u32, member: Member<'_>) -> Option<u32> {
        let child = self.tree.child(node, member)?;
        for &r in &self.tree.nodes[child as usize].below {
            self.buffers.got[r] = Got::Missing;
        }
        Some(child)
    }

    /// The document: one value and nothing after it.
    fn document(&mut self) -> Result<(), Bad> {
        self.skip_ws();
        match self.peek() {
            open @ (b'{' | b'[') => {
                self.pos += 1;
                // No read goes into the root when there are none (a path has a token, so the root is no leaf).
                self.containers(open, !self.tree.reads.is_empty())?;
            }
            _ => self.scalar()?,
        }
        self.skip_ws();
        if self.pos == self.len {
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// A container after its opening byte `open`, to its closing byte, with every container inside it: one loop,
    /// never a recursion. The open containers are bits of two words (`arrays`: 1 for an array; `live`: 1 when
    /// some read goes into it, its node in `buffers.nodes`), as `MAX_DEPTH` <= 64 allows; paths are followed
    /// only inside live ones, so a container no read goes into is only checked. A container's members whose
    /// values are scalars (most are) are read by an inner loop, which leaves it only to open or close one.
    fn containers(&mut self, open: u8, root_live: bool) -> Result<(), Bad> {
        const _: () = assert!(MAX_DEPTH <= 64);
        let mut arrays = u64::from(open == b'[');
        let mut live = u64::from(root_live);
        self.buffers.nodes[0] = 0;
        // The innermost open container's nesting level (the root's is 0).
        let mut level = 0;
        let mut first = true; // just after an opening byte: its closing byte or a member follows
        loop {
            let array = arrays >> level & 1 == 1;
            let close = if array { b']' } else { b'}' };
            // The innermost container's node, when it is live.
            let node = (live >> level & 1 == 1).then(|| self.buffers.nodes[level]);
            self.skip_ws();
            let next = self.peek();
            if next == close {
                self.pos += 1;
                if level == 0 {
                    return Ok(());
                }
                level -= 1;
                first = false;
                continue;
            }
            if !first {
                if next != b',' {
                    return Err(Bad);
                }
                self.pos += 1;
                self.skip_ws();
            }
            // This container's members, to its end or to one whose value is an object or array.
            loop {
                let entered = if !array {
                    self.key(node)?
                } else if let Some(node) = node {
                    let index = &mut self.buffers.indexes[level];
                    *index = if first { 0 } else { *index + 1 };
                    let index = *index;
                    self.member(node, Member::Index(index))
                } else {
                    None
                };
                first = false;
                match (self.peek(), entered) {
                    (inner @ (b'{' | b'['), _) => {
                        if level + 2 > MAX_DEPTH {
                            return Err(Bad);
                        }
                        self.pos += 1;
                        level += 1;
                        let bit = 1u64 << level;
                        arrays = if inner == b'[' {
                            arrays | bit
                        } else {
                            arrays & !bit
                        };
                        live &= !bit;
                        if let Some(child) = entered {
                            // An object or array is no property value.
                            self.set_ends(child, |_| Got::Failed);
                            live |= bit;
                            self.buffers.nodes[level] = child;
                        }
                        first = true;
                        break;
                    }
                    (_, Some(child)) => self.leaf(child)?,
                    (_, None) => self.scalar()?,
                }
                self.skip_ws();
                match self.peek() {
                    b',' => {
                        self.pos += 1;
                        self.skip_ws();
                    }
                    next if next == close => {
                        self.pos += 1;
                        if level == 0 {
                            return Ok(());
                        }
                        level -= 1;
                        break;
                    }
                    _ => return Err(Bad),
                }
            }
        }
    }

    /// `"key":` of a member of an object, and the space after it; the node the member leads to, if some read goes
    /// there (only followed when the object is live: at a `node`).
    #[inline(always)]
    fn key(&mut self, node: Option<u32>) -> Result<Option<u32>, Bad> {
        if self.peek() != b'"' {
            return Err(Bad);
        }
        self.pos += 1;
        let start = self.pos;
        self.skip_plain();
        let entered = if self.peek() == b'"' {
            // A key without escapes (most are) is compared where it lies.
            let (bytes, end) = (self.bytes, self.pos);
            self.pos += 1;
            node.and_then(|node| self.member(node, Member::Key(&bytes[start..end])))
        } else if let Some(node) = node {
            self.pos = start;
            let mut key = std::mem::take(&mut self.buffers.key);
            key.clear();
            self.string(Some(&mut key))?;
            let entered = self.member(node, Member::Key(&key));
            self.buffers.key = key;
            entered
        } else {
            self.string(None)?;
            None
        };
        self.expect(b':')?;
        self.skip_ws();
        Ok(entered)
    }

    /// A scalar at `node`: decoded for the reads that end there, only checked when none does (the reads that
    /// reached it go further, and find nothing).
    fn leaf(&mut self, node: u32) -> Result<(), Bad> {
        let tree = self.tree;
        let ends = &tree.nodes[node as usize].ends;
        if ends.is_empty() {
            return self.scalar();
        }
        match self.peek() {
            b'"' => {
                self.pos += 1;
                let mut text = self.buffers.spare.pop().unwrap_or_default();
                text.clear();
                let lone = self.string(Some(&mut text))?;
                let buffers = &mut *self.buffers;
                for &r in ends {
                    buffers.got[r] = match tree.reads[r].declared {
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
                let got = match self.literal()? {
                    Some(b) => Got::Found(Value::Bool(b)),
                    None => Got::Missing,
                };
                self.set_ends(node, |t| match (&got, t) {
                    (Got::Missing, _) | (_, PropType::Bool) => got.clone(),
                    _ => Got::Failed,
                });
                Ok(())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                let integral = self.number()?;
                let text = &self.bytes[start..self.pos];
                self.set_ends(node, |t| number_as(text, integral, t));
                Ok(())
            }
            _ => Err(Bad),
        }
    }

    /// What the reads that end at `node` get, by their declared type.
    fn set_ends(&mut self, node: u32, got: impl Fn(PropType) -> Got) {
        let tree = self.tree;
        for &r in &tree.nodes[node as usize].ends {
            self.buffers.got[r] = got(tree.reads[r].declared);
        }
    }

    /// A string, number or literal, only checked.
    #[inline(always)]
    fn scalar(&mut self) -> Result<(), Bad> {
        match self.peek() {
            b'"' => {
                self.pos += 1;
                self.skip_string()
            }
            b'-' | b'0'..=b'9' => self.number().map(|_| ()),
            b't' | b'f' | b'n' => self.literal().map(|_| ()),
            _ => Err(Bad),
        }
    }

    /// `true`, `false` or `null` (None), at a byte that begins one of them.
    #[inline(always)]
    fn literal(&mut self) -> Result<Option<bool>, Bad> {
        let (text, value): (&[u8], _) = match self.peek() {
            b't' => (b"true", Some(true)),
            b'f' => (b"false", Some(false)),
            _ => (b"null", None),
        };
        if !self.bytes[self.pos..].starts_with(text) {
            return Err(Bad);
        }
        self.pos += text.len();
        Ok(value)
    }

    /// A number (RFC 8259's grammar); whether it has neither fraction nor exponent. Inline: out of line, it
    /// made the reader keep its position in memory around each call (7 % slower).
    #[inline(always)]
    fn number(&mut self) -> Result<bool, Bad> {
        if self.peek() == b'-' {
            self.pos += 1;
        }
        match self.peek() {
            b'0' => self.pos += 1,
            b'1'..=b'9' => self.digits(),
            _ => return Err(Bad),
        }
        let mut integral = true;
        if self.peek() == b'.' {
            self.pos += 1;
            if !self.peek().is_ascii_digit() {
                return Err(Bad);
            }
            self.digits();
            integral = false;
        }
        if matches!(self.peek(), b'e' | b'E') {
            self.pos += 1;
            if matches!(self.peek(), b'+' | b'-') {
                self.pos += 1;
            }
            if !self.peek().is_ascii_digit() {
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
        self.skip_plain();
        if self.peek() == b'"' {
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
            self.skip_plain();
            if let Some(out) = out.as_deref_mut() {
                out.extend_from_slice(&self.bytes[start..self.pos]);
            }
            match self.peek() {
                b'"' => {
                    self.pos += 1;
                    return Ok(lone);
                }
                b'\\' => {
                    self.pos += 1;
                    let escaped = self.peek();
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

    /// Past the plain bytes of a string (neither a quote, a backslash nor a control byte): the next special
    /// byte's bit, most often in the word a string's first byte is in.
    #[inline(always)]
    fn skip_plain(&mut self) {
        self.pos = next_special(self.specials, self.pos, self.len);
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

/// Marks in `specials` (one bit per byte, 64 to a word) the quotes, backslashes and control bytes of `padded`'s
/// whole 64-byte blocks, which cover the value and its first zero; whether a byte past ASCII occurs. One pass
/// without a branch per byte, so that finding a string's end later is a shift and a bit count, not a scan.
fn mark_specials(padded: &[u8], specials: &mut Vec<u64>) -> bool {
    let blocks = padded.chunks_exact(64);
    specials.clear();
    specials.resize(blocks.len(), 0);
    let mut high = 0;
    for (word, block) in specials.iter_mut().zip(blocks) {
        let (special, past_ascii) = classify_block(block.try_into().expect("64 bytes"));
        *word = special;
        high |= past_ascii;
    }
    high != 0
}

/// The position of the first special byte at or after `from` (the value's end `len` when none is marked, which
/// only a position past the value can meet).
#[inline(always)]
fn next_special(specials: &[u64], from: usize, len: usize) -> usize {
    let mut word = from / 64;
    let Some(&first) = specials.get(word) else {
        return len;
    };
    let bits = first >> (from % 64);
    if bits != 0 {
        return from + bits.trailing_zeros() as usize;
    }
    loop {
        word += 1;
        match specials.get(word) {
            Some(&0) => continue,
            Some(&bits) => return word * 64 + bits.trailing_zeros() as usize,
            None => return len,
        }
    }
}

/// One block's special bytes and bytes past ASCII, as bits: sixteen bytes at a time with SSE2 (part of every
/// x86-64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn classify_block(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let (mut special, mut high) = (0u64, 0u64);
    for lane in 0..4 {
        // SAFETY: block[16 * lane..16 * lane + 16] lies in the block and the load takes any alignment; the rest
        // are SSE2 operations on registers, and SSE2 is part of every x86-64.
        let (s, h) = unsafe {
            let x = _mm_loadu_si128(block.as_ptr().add(16 * lane).cast::<__m128i>());
            let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
            // Below 0x20 exactly where the unsigned max with 0x1F is 0x1F.
            let low = _mm_set1_epi8(0x1F);
            let control = _mm_cmpeq_epi8(_mm_max_epu8(x, low), low);
            let s = _mm_or_si128(_mm_or_si128(quote, backslash), control);
            (_mm_movemask_epi8(s), _mm_movemask_epi8(x))
        };
        // A movemask of 16 bytes holds 16 bits; the casts keep them.
        special |= u64::from(s as u16) << (16 * lane);
        high |= u64::from(h as u16) << (16 * lane);
    }
    (special, high)
}

/// `classify_block` byte by byte: the form for other targets, and the oracle the SSE2 form is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_block_bytes(block: &[u8; 64]) -> (u64, u64) {
    let (mut special, mut high) = (0u64, 0u64);
    for (i, &b) in block.iter().enumerate() {
        special |= u64::from(b == b'"' || b == b'\\' || b < 0x20) << i;
        high |= u64::from(b >= 0x80) << i;
    }
    (special, high)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn classify_block(block: &[u8; 64]) -> (u64, u64) {
    classify_block_bytes(block)
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

/// The array index a token names: decimal, no leading zeros (RFC 6901).
fn as_index(token: &[u8]) -> Option<usize> {
    if token.is_empty()
        || (token.len() > 1 && token[0] == b'0')
        || !token.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    std::str::from_utf8(token).ok()?.parse::<usize>().ok()
}

/// A number leaf as the declared type: int takes an integral literal within int64, float any literal finite as
/// an f64 (both parses round correctly, as Python's do), anything else is the wrong type.
fn number_as(text: &[u8], integral: bool, declared: PropType) -> Got {
    match declared {
        PropType::Int if integral => {
            integral_as_i64(text).map_or(Got::Failed, |i| Got::Found(Value::Int(i)))
        }
        // A number's bytes are ASCII (`number` checked them).
        PropType::Float => match std::str::from_utf8(text).map(str::parse::<f64>) {
            // Python reads an integral literal as an int first: `-0` is 0, so its float is +0.0.
            Ok(Ok(f)) if f.is_finite() && integral && f == 0.0 => Got::Found(Value::Float(0.0)),
            Ok(Ok(f)) if f.is_finite() => Got::Found(Value::Float(f)),
            _ => Got::Failed,
        },
        _ => Got::Failed,
    }
}

/// An integral JSON number (`-`? and digits, as `number` checked) as an i64; None past its range. Summed
/// negative, so that i64::MIN, whose magnitude no i64 holds, is read too.
fn integral_as_i64(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut below = 0i64;
    for &d in digits {
        below = below.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(below)
    } else {
        below.checked_neg()
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
    fn special_bytes_are_found_where_a_byte_by_byte_scan_finds_them() {
        let special = |b: u8| b == b'"' || b == b'\\' || b < 0x20;
        // Each special byte (and bytes past ASCII) at each position of values of every length to 140, whose
        // marks span three words, from a plain fill.
        for len in 0usize..140 {
            for at in [
                0,
                1,
                15,
                16,
                31,
                32,
                63,
                64,
                65,
                127,
                128,
                len.saturating_sub(1),
            ] {
                for &byte in &[b'"', b'\\', 0x00, 0x1F, 0x0A, 0x20, 0x7F, 0x80, 0xC3, 0xFF] {
                    let mut value = vec![b'a'; len];
                    if at < len {
                        value[at] = byte;
                    }
                    let mut padded = value.clone();
                    padded.resize(len + PAD, 0);
                    let mut specials = Vec::new();
                    let high = mark_specials(&padded, &mut specials);
                    assert_eq!(high, value.iter().any(|&b| b >= 0x80), "{value:?}");
                    for from in 0..=len {
                        let expected = (from..len).find(|&i| special(value[i])).unwrap_or(len);
                        assert_eq!(
                            next_special(&specials, from, len),
                            expected,
                            "{value:?} {from}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_sse2_classes_are_the_bytes_classes() {
        let mut block = [0u8; 64];
        for start in (0..=255u8).step_by(64) {
            for (i, b) in block.iter_mut().enumerate() {
                *b = start.wrapping_add(i as u8);
            }
            assert_eq!(classify_block(&block), classify_block_bytes(&block));
            block.reverse();
            assert_eq!(classify_block(&block), classify_block_bytes(&block));
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
