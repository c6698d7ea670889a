//! Properties read from a plain Avro body by a writer schema, exactly as `router/routing/body_avro.py` (the
//! reference, fastavro under a strict decoder) reads them: one pass over the body, the fields a read names
//! decoded, every other value skipped by its encoding, nothing built but the values read.
//!
//! The whole body is checked as it is passed (a body is decodable or not as a whole, as in the reference): every
//! varint at most 10 bytes (the 10th carrying 1 bit at most), lengths not negative and within the body, strings
//! (map keys too) UTF-8, booleans 0 or 1, enum and union indexes within the schema, a block's byte size (after
//! a negative count) what its items take, no more array items and map entries than the body has bytes, records,
//! arrays and maps nested at most `MAX_DEPTH` deep, no byte after the record. Nothing is allocated by what the
//! body claims: a length is checked against the bytes left before it is used, and the walk recurses at most
//! twice per level of `MAX_DEPTH` (a union's branch is never a union: `Schema::new` refuses one).

use crate::decode::PropType;

pub const MAX_BODY_BYTES: usize = 1_048_576;
pub const MAX_DEPTH: usize = 64;
const MAX_VARINT_BYTES: usize = 10;

/// One node of a writer schema; children are indexes into the schema's node list (named types shared, so a
/// recursive type is a cycle).
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    Enum(Vec<String>),
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
    Record(Vec<(String, usize)>),
}

/// A writer schema: its nodes, the root first.
#[derive(Debug)]
pub struct Schema {
    nodes: Vec<Node>,
}

impl Schema {
    /// Checks that every child is a node of the list and that no union holds a union (the Avro specification
    /// forbids it, and the walk's recursion bound relies on it).
    pub fn new(nodes: Vec<Node>) -> Result<Schema, String> {
        if nodes.is_empty() {
            return Err("a schema needs at least its root node".into());
        }
        let count = nodes.len();
        let check = |child: usize| {
            if child < count {
                Ok(())
            } else {
                Err(format!("child {child} is not one of the {count} nodes"))
            }
        };
        for node in &nodes {
            match node {
                Node::Array(c) | Node::Map(c) => check(*c)?,
                Node::Record(fields) => fields.iter().try_for_each(|(_, c)| check(*c))?,
                Node::Union(branches) => {
                    for &b in branches {
                        check(b)?;
                        if matches!(nodes[b], Node::Union(_)) {
                            return Err("a union holds a union".into());
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(Schema { nodes })
    }
}

/// One property read: its JSON Pointer's reference tokens (UTF-8, or not: a token with a lone surrogate names no
/// field or key) and its declared type (None: the leaf's own).
#[derive(Clone, Debug)]
pub struct Read {
    pub tokens: Vec<Vec<u8>>,
    pub declared: Option<PropType>,
    /// Each token as an array index (decimal, no leading zeros), where it is one.
    indexes: Vec<Option<u64>>,
}

impl Read {
    pub fn new(tokens: Vec<Vec<u8>>, declared: Option<PropType>) -> Read {
        let indexes = tokens.iter().map(|t| array_index(t)).collect();
        Read {
            tokens,
            declared,
            indexes,
        }
    }
}

fn array_index(token: &[u8]) -> Option<u64> {
    let canonical = token == b"0" || (matches!(token.first(), Some(b'1'..=b'9')));
    if canonical && token.iter().all(u8::is_ascii_digit) {
        // an index past u64 names no item of any body
        std::str::from_utf8(token).ok()?.parse().ok()
    } else {
        None
    }
}

/// What one read found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Leaf<'a> {
    /// No such path in this record, or a null leaf: missing, not counted.
    Missing,
    /// A leaf that does not have the property's type: missing and counted.
    Wrong,
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(&'a str),
}

/// The body does not decode under its writer schema (every property read is missing and counted).
#[derive(Debug, PartialEq, Eq)]
pub struct Undecodable(pub &'static str);

type Step<T> = Result<T, Undecodable>;

/// Reads `reads` from one plain Avro `body` written with `schema`: one leaf per read, in order.
pub fn read<'a>(schema: &'a Schema, reads: &[Read], body: &'a [u8]) -> Step<Vec<Leaf<'a>>> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Undecodable("larger than the body limit"));
    }
    let mut walker = Walker {
        schema,
        reads,
        body,
        pos: 0,
        items_left: body.len(),
        depth: 0,
        out: vec![Leaf::Missing; reads.len()],
    };
    let all: Vec<u32> = (0..reads.len() as u32).collect();
    walker.walk(0, &all, 0)?;
    if walker.pos != body.len() {
        return Err(Undecodable("bytes after the record"));
    }
    Ok(walker.out)
}

struct Walker<'a, 'r> {
    schema: &'a Schema,
    reads: &'r [Read],
    body: &'a [u8],
    pos: usize,
    items_left: usize,
    depth: usize,
    out: Vec<Leaf<'a>>,
}

/// The leaf of a decoded value for a declared type, as the reference's `typed`.
fn typed(value: Leaf<'_>, declared: Option<PropType>) -> Leaf<'_> {
    match (declared, value) {
        (None | Some(PropType::Int), Leaf::Int(_))
        | (None | Some(PropType::Bool), Leaf::Bool(_))
        | (None | Some(PropType::Str), Leaf::Str(_)) => value,
        (None | Some(PropType::Float), Leaf::Float(f)) if f.is_finite() => value,
        (Some(PropType::Float), Leaf::Int(i)) => Leaf::Float(i as f64),
        _ => Leaf::Wrong,
    }
}

impl<'a> Walker<'a, '_> {
    fn byte(&mut self) -> Step<u8> {
        let b = *self.body.get(self.pos).ok_or(Undecodable("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Step<&'a [u8]> {
        if n > self.body.len() - self.pos {
            return Err(Undecodable("truncated"));
        }
        let bytes = &self.body[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn long(&mut self) -> Step<i64> {
        let mut value: u64 = 0;
        for i in 0..MAX_VARINT_BYTES {
            let b = self.byte()?;
            if i == MAX_VARINT_BYTES - 1 && b > 1 {
                return Err(Undecodable("a varint longer than 64 bits"));
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        unreachable!("the 10th byte ends the varint or fails above")
    }

    fn length(&mut self) -> Step<usize> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| Undecodable("a negative length"))
    }

    fn index(&mut self, count: usize) -> Step<usize> {
        let i = self.long()?;
        match usize::try_from(i) {
            Ok(i) if i < count => Ok(i),
            _ => Err(Undecodable("an index out of range")),
        }
    }

    fn string(&mut self) -> Step<&'a str> {
        let n = self.length()?;
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes).map_err(|_| Undecodable("a string that is not UTF-8"))
    }

    fn enter(&mut self) -> Step<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Undecodable("nested too deep"));
        }
        Ok(())
    }

    /// Sets each read of `cursors` that ends here (all its tokens followed) to `leaf`, typed.
    fn finish(&mut self, cursors: &[u32], at: usize, leaf: Leaf<'a>) {
        for &c in cursors {
            let read = &self.reads[c as usize];
            if read.tokens.len() == at {
                self.out[c as usize] = typed(leaf, read.declared);
            }
        }
    }

    /// The reads of `cursors` that go on past this node through `token`-matching children.
    fn following(&self, cursors: &[u32], at: usize, matches: impl Fn(&Read) -> bool) -> Vec<u32> {
        cursors
            .iter()
            .copied()
            .filter(|&c| {
                let read = &self.reads[c as usize];
                read.tokens.len() > at && matches(read)
            })
            .collect()
    }

    /// Decodes (or, with no cursors, skips) the value of `node`; `cursors` are the reads whose path led here
    /// after `at` tokens. A read's leaf is reset on entry: where a map repeats a key, the last entry wins.
    fn walk(&mut self, node: usize, cursors: &[u32], at: usize) -> Step<()> {
        for &c in cursors {
            self.out[c as usize] = Leaf::Missing;
        }
        let schema = self.schema;
        match &schema.nodes[node] {
            Node::Null => {}
            Node::Boolean => {
                let value = match self.byte()? {
                    0 => false,
                    1 => true,
                    _ => return Err(Undecodable("a boolean byte other than 0 or 1")),
                };
                self.finish(cursors, at, Leaf::Bool(value));
            }
            Node::Int | Node::Long => {
                let value = self.long()?;
                self.finish(cursors, at, Leaf::Int(value));
            }
            Node::Float => {
                let bytes = self.take(4)?;
                let value = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
                self.finish(cursors, at, Leaf::Float(f64::from(value)));
            }
            Node::Double => {
                let bytes = self.take(8)?;
                let value = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                self.finish(cursors, at, Leaf::Float(value));
            }
            Node::Bytes => {
                let n = self.length()?;
                self.take(n)?;
                self.finish(cursors, at, Leaf::Wrong);
            }
            Node::String => {
                let value = self.string()?;
                self.finish(cursors, at, Leaf::Str(value));
            }
            Node::Fixed(size) => {
                self.take(*size)?;
                self.finish(cursors, at, Leaf::Wrong);
            }
            Node::Enum(symbols) => {
                let i = self.index(symbols.len())?;
                self.finish(cursors, at, Leaf::Str(&symbols[i]));
            }
            Node::Union(branches) => {
                let i = self.index(branches.len())?;
                self.walk(branches[i], cursors, at)?;
            }
            Node::Record(fields) => {
                self.enter()?;
                self.finish(cursors, at, Leaf::Wrong);
                for (name, child) in fields {
                    let next = self.following(cursors, at, |r| r.tokens[at] == name.as_bytes());
                    self.walk(*child, &next, at + 1)?;
                }
                self.depth -= 1;
            }
            Node::Array(items) => {
                self.enter()?;
                self.finish(cursors, at, Leaf::Wrong);
                let deeper = self.following(cursors, at, |r| r.indexes[at].is_some());
                let mut index: u64 = 0;
                self.blocks(|walker| {
                    let next: Vec<u32> = deeper
                        .iter()
                        .copied()
                        .filter(|&c| walker.reads[c as usize].indexes[at] == Some(index))
                        .collect();
                    index += 1;
                    walker.walk(*items, &next, at + 1)
                })?;
                self.depth -= 1;
            }
            Node::Map(values) => {
                self.enter()?;
                self.finish(cursors, at, Leaf::Wrong);
                let deeper = self.following(cursors, at, |_| true);
                self.blocks(|walker| {
                    let key = walker.string()?;
                    let next: Vec<u32> = deeper
                        .iter()
                        .copied()
                        .filter(|&c| walker.reads[c as usize].tokens[at] == key.as_bytes())
                        .collect();
                    walker.walk(*values, &next, at + 1)
                })?;
                self.depth -= 1;
            }
        }
        Ok(())
    }

    /// The blocks of an array or a map: `item` once per item (or entry), in order.
    fn blocks(&mut self, mut item: impl FnMut(&mut Self) -> Step<()>) -> Step<()> {
        loop {
            let count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            let end = if count < 0 {
                let size = self
                    .length()
                    .map_err(|_| Undecodable("a negative block size"))?;
                Some(self.pos.saturating_add(size))
            } else {
                None
            };
            let count = count.unsigned_abs();
            if count > self.items_left as u64 {
                return Err(Undecodable("more items than the body has bytes"));
            }
            self.items_left -= count as usize;
            for _ in 0..count {
                item(self)?;
            }
            if end.is_some_and(|end| end != self.pos) {
                return Err(Undecodable(
                    "a block's byte size is not what its items take",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(fields: &[(&str, usize)]) -> Node {
        Node::Record(fields.iter().map(|(n, c)| (n.to_string(), *c)).collect())
    }

    fn reads(paths: &[(&str, Option<PropType>)]) -> Vec<Read> {
        paths
            .iter()
            .map(|(p, d)| Read::new(p[1..].split('/').map(|t| t.as_bytes().to_vec()).collect(), *d))
            .collect()
    }

    /// {id: long, tags: map<[null, string]>, items: array<{sku: string, qty: int}>, ok: boolean}
    fn order() -> Schema {
        Schema::new(vec![
            record(&[("id", 1), ("tags", 2), ("items", 5), ("ok", 8)]),
            Node::Long,
            Node::Map(3),
            Node::Union(vec![4, 7]),
            Node::Null,
            Node::Array(6),
            record(&[("sku", 7), ("qty", 1)]),
            Node::String,
            Node::Boolean,
        ])
        .unwrap()
    }

    #[test]
    fn reads_fields_map_values_and_array_items_and_skips_the_rest() {
        let schema = order();
        // id 5; tags {"a": "x", "b": null}; items [{sku "s", qty 2}, {sku "t", qty 3}]; ok true
        let body = b"\x0a\x04\x02a\x02\x02x\x02b\x00\x00\x04\x02s\x04\x02t\x06\x00\x01";
        let r = reads(&[
            ("/id", None),
            ("/tags/a", None),
            ("/tags/b", None),
            ("/items/1/qty", Some(PropType::Float)),
            ("/items/2/qty", None),
            ("/ok", None),
            ("/items", None),
            ("/id", Some(PropType::Str)),
        ]);
        assert_eq!(
            read(&schema, &r, body).unwrap(),
            vec![
                Leaf::Int(5),
                Leaf::Str("x"),
                Leaf::Missing,
                Leaf::Float(3.0),
                Leaf::Missing,
                Leaf::Bool(true),
                Leaf::Wrong,
                Leaf::Wrong,
            ]
        );
    }

    #[test]
    fn a_repeated_map_key_takes_the_last_entry() {
        let schema = order();
        let body = b"\x0a\x04\x02a\x02\x02x\x02a\x00\x00\x00\x00";
        assert_eq!(
            read(&schema, &reads(&[("/tags/a", None)]), body).unwrap(),
            vec![Leaf::Missing]
        );
    }

    #[test]
    fn malformed_bodies_are_undecodable_without_panicking() {
        let schema = order();
        let good = b"\x0a\x04\x02a\x02\x02x\x02b\x00\x00\x04\x02s\x04\x02t\x06\x00\x01";
        let r = reads(&[("/id", None)]);
        for cut in 0..good.len() {
            assert!(read(&schema, &r, &good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good.to_vec();
        trailing.push(0);
        assert!(read(&schema, &r, &trailing).is_err());
        // an absurd map count, a negative length, an 11-byte varint
        assert!(read(&schema, &r, b"\x0a\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01").is_err());
        assert!(read(&schema, &r, b"\x0a\x02\x01").is_err());
        assert!(read(&schema, &r, &[0xff; 11]).is_err());
        // i64::MIN as a block count
        assert!(read(&schema, &r, b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").is_err());
    }

    #[test]
    fn nesting_is_bounded_even_in_a_recursive_schema_that_takes_no_bytes() {
        // record Node { next: Node }: every level is zero bytes, only the depth limit ends it
        let schema = Schema::new(vec![record(&[("next", 0)])]).unwrap();
        assert_eq!(read(&schema, &[], b""), Err(Undecodable("nested too deep")));
    }

    #[test]
    fn a_malformed_schema_is_refused() {
        assert!(Schema::new(vec![]).is_err());
        assert!(Schema::new(vec![Node::Array(3)]).is_err());
        assert!(Schema::new(vec![Node::Union(vec![0])]).is_err());
    }
}
