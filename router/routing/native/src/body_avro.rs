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

/// How to pass one value: skip it by its schema node, or follow the reads whose paths lead into it.
#[derive(Debug)]
enum Walk {
    Skip(usize),
    Read(Box<Plan>),
}

/// The reads whose paths lead to one node of the schema, and where each goes from there: made once per schema
/// and reads (`Plan::new`), so that a body is read without looking at a token.
#[derive(Debug)]
struct Plan {
    node: usize,
    /// The reads whose paths pass here: reset (missing) on entry, so that where a map repeats a key, the last
    /// entry wins.
    through: Vec<u32>,
    /// The reads whose paths end here.
    ends: Vec<u32>,
    step: PlanStep,
}

#[derive(Debug)]
enum PlanStep {
    /// Not a container: its value is the leaf of `ends` (the reads going on past it find nothing).
    Leaf,
    /// One walk per field, in order.
    Record(Vec<Walk>),
    /// The items read, by ascending index; every other item is skipped as node `items`.
    Array {
        items: usize,
        read: Vec<(u64, Plan)>,
    },
    /// The values read, by key; every other value is skipped as node `values`.
    Map {
        values: usize,
        read: Vec<(Vec<u8>, Plan)>,
    },
    /// One plan per branch, each with the same reads.
    Union(Vec<Plan>),
}

/// The reads of one schema, compiled: what `read_planned` walks a body by.
#[derive(Debug)]
pub struct Reads {
    root: Walk,
    count: usize,
}

impl Reads {
    /// `reads` compiled against `schema`. Bounded: each container on a read's way uses one of its tokens.
    pub fn new(schema: &Schema, reads: &[Read]) -> Reads {
        let all: Vec<u32> = (0..reads.len() as u32).collect();
        Reads {
            root: plan(schema, reads, all, 0, 0),
            count: reads.len(),
        }
    }
}

/// The plans below an array's items or a map's values (`child`), one per distinct step the `going` reads take at
/// `at` (`step`: an index or a key), each made of the reads taking it; a step whose plan reads nothing is left
/// out.
fn steps<'r, K: Ord>(
    schema: &Schema,
    reads: &'r [Read],
    going: &[u32],
    at: usize,
    child: usize,
    step: impl Fn(&'r Read) -> Option<K>,
) -> Vec<(K, Plan)> {
    let mut keys: Vec<K> = going
        .iter()
        .filter_map(|&c| step(&reads[c as usize]))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let next = going
                .iter()
                .copied()
                .filter(|&c| step(&reads[c as usize]).as_ref() == Some(&key))
                .collect();
            match plan(schema, reads, next, at + 1, child) {
                Walk::Read(p) => Some((key, *p)),
                Walk::Skip(_) => None,
            }
        })
        .collect()
}

fn plan(schema: &Schema, reads: &[Read], cursors: Vec<u32>, at: usize, node: usize) -> Walk {
    if cursors.is_empty() {
        return Walk::Skip(node);
    }
    let token_len = |c: u32| reads[c as usize].tokens.len();
    let going: Vec<u32> = cursors
        .iter()
        .copied()
        .filter(|&c| token_len(c) > at)
        .collect();
    let mut ends: Vec<u32> = cursors
        .iter()
        .copied()
        .filter(|&c| token_len(c) == at)
        .collect();
    let step = match &schema.nodes[node] {
        Node::Record(fields) => PlanStep::Record(
            fields
                .iter()
                .map(|(name, child)| {
                    let next = going
                        .iter()
                        .copied()
                        .filter(|&c| reads[c as usize].tokens[at] == name.as_bytes())
                        .collect();
                    plan(schema, reads, next, at + 1, *child)
                })
                .collect(),
        ),
        Node::Array(items) => PlanStep::Array {
            items: *items,
            read: steps(schema, reads, &going, at, *items, |read| read.indexes[at]),
        },
        Node::Map(values) => PlanStep::Map {
            values: *values,
            read: steps(schema, reads, &going, at, *values, |read| {
                Some(read.tokens[at].as_slice())
            })
            .into_iter()
            .map(|(key, plan)| (key.to_vec(), plan))
            .collect(),
        },
        Node::Union(branches) => {
            let branches = branches
                .iter()
                .map(|&b| match plan(schema, reads, cursors.clone(), at, b) {
                    Walk::Read(p) => *p,
                    Walk::Skip(_) => unreachable!("the cursors are not empty"),
                })
                .collect();
            ends.clear(); // they end at the branch
            PlanStep::Union(branches)
        }
        _ => PlanStep::Leaf,
    };
    Walk::Read(Box::new(Plan {
        node,
        through: cursors,
        ends,
        step,
    }))
}

/// Reads `reads` from one plain Avro `body` written with `schema`: one leaf per read, in order.
pub fn read<'a>(schema: &'a Schema, reads: &[Read], body: &'a [u8]) -> Step<Vec<Leaf<'a>>> {
    let compiled = Reads::new(schema, reads);
    let mut out = Vec::new();
    read_planned(schema, &compiled, reads, body, &mut out)?;
    Ok(out)
}

/// `read` with the reads compiled (`Reads::new(schema, reads)`): the leaves go to `out`, one per read.
pub fn read_planned<'a>(
    schema: &'a Schema,
    compiled: &Reads,
    reads: &[Read],
    body: &'a [u8],
    out: &mut Vec<Leaf<'a>>,
) -> Step<()> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Undecodable("larger than the body limit"));
    }
    out.clear();
    out.resize(compiled.count, Leaf::Missing);
    let mut walker = Walker {
        nodes: &schema.nodes,
        reads,
        body,
        pos: 0,
        items_left: body.len(),
        depth: 0,
        out,
    };
    match &compiled.root {
        Walk::Skip(node) => walker.skip(*node)?,
        Walk::Read(plan) => walker.run(plan)?,
    }
    if walker.pos != body.len() {
        return Err(Undecodable("bytes after the record"));
    }
    Ok(())
}

struct Walker<'a, 'r, 'o> {
    nodes: &'a [Node],
    reads: &'r [Read],
    body: &'a [u8],
    pos: usize,
    items_left: usize,
    depth: usize,
    out: &'o mut Vec<Leaf<'a>>,
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

impl<'a> Walker<'a, '_, '_> {
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
        // one byte: most lengths, counts, indexes and small numbers
        if let Some(&b) = self.body.get(self.pos) {
            if b & 0x80 == 0 {
                self.pos += 1;
                return Ok(i64::from(b >> 1) ^ -i64::from(b & 1));
            }
        }
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

    /// A string passed: checked as `string` does, ASCII (most text) found without decoding it.
    fn skip_string(&mut self) -> Step<()> {
        let n = self.length()?;
        let bytes = self.take(n)?;
        if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
            Ok(())
        } else {
            Err(Undecodable("a string that is not UTF-8"))
        }
    }

    fn boolean(&mut self) -> Step<bool> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Undecodable("a boolean byte other than 0 or 1")),
        }
    }

    fn enter(&mut self) -> Step<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Undecodable("nested too deep"));
        }
        Ok(())
    }

    /// Passes a value of `node`, checking it as a read would.
    fn skip(&mut self, node: usize) -> Step<()> {
        let nodes = self.nodes;
        match &nodes[node] {
            Node::Null => {}
            Node::Boolean => {
                self.boolean()?;
            }
            Node::Int | Node::Long => {
                self.long()?;
            }
            Node::Float => {
                self.take(4)?;
            }
            Node::Double => {
                self.take(8)?;
            }
            Node::Bytes => {
                let n = self.length()?;
                self.take(n)?;
            }
            Node::String => self.skip_string()?,
            Node::Fixed(size) => {
                self.take(*size)?;
            }
            Node::Enum(symbols) => {
                self.index(symbols.len())?;
            }
            Node::Union(branches) => {
                let i = self.index(branches.len())?;
                self.skip(branches[i])?;
            }
            Node::Record(fields) => {
                self.enter()?;
                for (_, child) in fields {
                    self.skip(*child)?;
                }
                self.depth -= 1;
            }
            Node::Array(items) => {
                self.enter()?;
                self.blocks(|walker| walker.skip(*items))?;
                self.depth -= 1;
            }
            Node::Map(values) => {
                self.enter()?;
                self.blocks(|walker| {
                    walker.skip_string()?;
                    walker.skip(*values)
                })?;
                self.depth -= 1;
            }
        }
        Ok(())
    }

    fn walk(&mut self, walk: &Walk) -> Step<()> {
        match walk {
            Walk::Skip(node) => self.skip(*node),
            Walk::Read(plan) => self.run(plan),
        }
    }

    /// Sets each read ending at `plan` to `leaf`, typed.
    fn finish(&mut self, plan: &Plan, leaf: Leaf<'a>) {
        for &c in &plan.ends {
            self.out[c as usize] = typed(leaf, self.reads[c as usize].declared);
        }
    }

    /// Decodes the value of `plan`'s node, following its reads.
    fn run(&mut self, plan: &Plan) -> Step<()> {
        for &c in &plan.through {
            self.out[c as usize] = Leaf::Missing;
        }
        let nodes = self.nodes;
        match &plan.step {
            PlanStep::Leaf => {
                let leaf = match &nodes[plan.node] {
                    Node::Null => return Ok(()),
                    Node::Boolean => Leaf::Bool(self.boolean()?),
                    Node::Int | Node::Long => Leaf::Int(self.long()?),
                    Node::Float => {
                        let bytes = self.take(4)?;
                        Leaf::Float(f64::from(f32::from_le_bytes(
                            bytes.try_into().expect("4 bytes"),
                        )))
                    }
                    Node::Double => {
                        let bytes = self.take(8)?;
                        Leaf::Float(f64::from_le_bytes(bytes.try_into().expect("8 bytes")))
                    }
                    Node::String => Leaf::Str(self.string()?),
                    Node::Enum(symbols) => Leaf::Str(&symbols[self.index(symbols.len())?]),
                    Node::Bytes | Node::Fixed(_) => {
                        self.skip(plan.node)?;
                        Leaf::Wrong
                    }
                    Node::Union(_) | Node::Record(_) | Node::Array(_) | Node::Map(_) => {
                        unreachable!("a container has a step of its own")
                    }
                };
                self.finish(plan, leaf);
            }
            PlanStep::Union(branches) => {
                let i = self.index(branches.len())?;
                self.run(&branches[i])?;
            }
            PlanStep::Record(fields) => {
                self.enter()?;
                self.finish(plan, Leaf::Wrong);
                for field in fields {
                    self.walk(field)?;
                }
                self.depth -= 1;
            }
            PlanStep::Array { items, read } => {
                self.enter()?;
                self.finish(plan, Leaf::Wrong);
                let mut index: u64 = 0;
                let mut next = read.iter().peekable();
                self.blocks(|walker| {
                    let here = next.next_if(|(i, _)| *i == index);
                    index += 1;
                    match here {
                        Some((_, item)) => walker.run(item),
                        None => walker.skip(*items),
                    }
                })?;
                self.depth -= 1;
            }
            PlanStep::Map { values, read } => {
                self.enter()?;
                self.finish(plan, Leaf::Wrong);
                self.blocks(|walker| {
                    let key = walker.string()?.as_bytes();
                    match read.iter().find(|(k, _)| k.as_slice() == key) {
                        Some((_, value)) => walker.run(value),
                        None => walker.skip(*values),
                    }
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
            .map(|(p, d)| {
                Read::new(
                    p[1..].split('/').map(|t| t.as_bytes().to_vec()).collect(),
                    *d,
                )
            })
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
