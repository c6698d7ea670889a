//! The shared plan: every subscription's checked, normalized tree as one DAG of nodes (built in Python, where
//! equal sub-expressions are already one node), with the gates that index subscriptions by a required
//! conjunct. Semantics are those of `expressions/interpreter.py` for both dialects; only "matches or not"
//! is computed, so an evaluation error is just `Err(())`.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::decode::{decode, Decoded, PropType};
use crate::like::{code_points, LikePattern};
use crate::prefetch::{prefetch, AHEAD};

/// A small multiplicative hash (the Fx hash of rustc): the tables hash short strings and integers on every
/// record, where SipHash's flooding resistance buys nothing (keys come from the configuration, not from
/// records, and a lookup cannot change a table).
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        let rest = chunks.remainder();
        last[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(last) ^ (rest.len() as u64) << 56);
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_i64(&mut self, n: i64) {
        self.add(n as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A value during evaluation: literals borrow the plan, strings of properties borrow the record's headers.
#[derive(Clone, Copy, Debug)]
pub enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a [u8]),
}

type R<'a> = Result<V<'a>, ()>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl ArithOp {
    /// The operator spelled as in the expressions' AST (`subroute.expressions.ast.ARITHMETIC_OPS`).
    pub fn from_symbol(symbol: &str) -> Result<ArithOp, String> {
        Ok(match symbol {
            "+" => ArithOp::Add,
            "-" => ArithOp::Sub,
            "*" => ArithOp::Mul,
            "/" => ArithOp::Div,
            "%" => ArithOp::Rem,
            _ => return Err(format!("bad arithmetic operator {symbol:?}")),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    /// The operator spelled as in the expressions' AST (`subroute.expressions.ast.COMPARISON_OPS`).
    pub fn from_symbol(symbol: &str) -> Result<CmpOp, String> {
        Ok(match symbol {
            "==" => CmpOp::Eq,
            "!=" => CmpOp::Ne,
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            _ => return Err(format!("bad comparison operator {symbol:?}")),
        })
    }

    fn holds(self, o: Ordering) -> bool {
        match self {
            CmpOp::Eq => o == Ordering::Equal,
            CmpOp::Ne => o != Ordering::Equal,
            CmpOp::Lt => o == Ordering::Less,
            CmpOp::Le => o != Ordering::Greater,
            CmpOp::Gt => o == Ordering::Greater,
            CmpOp::Ge => o != Ordering::Less,
        }
    }
}

/// A number as sql92 holds it; ints and floats compare exactly (as Python compares int with float).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    I(i64),
    F(f64),
}

/// `i` against `f` exactly; None when `f` is NaN.
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    // `whole` is an integer in int64's range, so the cast is exact.
    match i.cmp(&(whole as i64)) {
        Ordering::Equal => 0.0f64.partial_cmp(&(f - whole)),
        o => Some(o),
    }
}

pub fn cmp_num(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (Num::I(x), Num::F(y)) => cmp_int_float(x, y),
        (Num::F(x), Num::I(y)) => cmp_int_float(y, x).map(Ordering::reverse),
    }
}

fn as_num(v: V<'_>) -> Option<Num> {
    match v {
        V::Int(i) => Some(Num::I(i)),
        V::Float(f) => Some(Num::F(f)),
        _ => None,
    }
}

/// One node of the DAG; children are indexes of earlier nodes.
#[derive(Debug)]
pub enum Node {
    Int(i64),
    Float(f64),
    Str(Vec<u8>),
    Bool(bool),
    Null,
    Prop(usize),
    Exists(usize),
    Not(usize),
    Neg(usize),
    Pos(usize),
    Arith(ArithOp, usize, usize),
    Cmp(CmpOp, usize, usize),
    And(Vec<usize>),
    Or(Vec<usize>),
    Between(usize, usize, usize, bool),
    /// Sorted values, for binary search.
    In(usize, Vec<Vec<u8>>, bool),
    Like(usize, Box<LikePattern>, bool),
    IsNull(usize, bool),
}

impl Node {
    fn children(&self) -> Vec<usize> {
        match self {
            Node::Prop(_)
            | Node::Exists(_)
            | Node::Int(_)
            | Node::Float(_)
            | Node::Str(_)
            | Node::Bool(_)
            | Node::Null => vec![],
            Node::Not(x) | Node::Neg(x) | Node::Pos(x) => vec![*x],
            Node::In(x, _, _) | Node::Like(x, _, _) | Node::IsNull(x, _) => vec![*x],
            Node::Arith(_, a, b) | Node::Cmp(_, a, b) => vec![*a, *b],
            Node::And(items) | Node::Or(items) => items.clone(),
            Node::Between(x, lo, hi, _) => vec![*x, *lo, *hi],
        }
    }
}

/// A node as handed over, with its dialect (sql92 or bmq). `Plan::build` checks that children are earlier
/// nodes and slots are the plan's.
#[derive(Debug)]
pub struct NodeSpec {
    pub sql: bool,
    pub node: Node,
}

/// An equality-index key. Numbers of sql92 (`Num`) compare across int and float, so they are keyed by the
/// integer when the value is integral and in int64, else by the float's bits; bmq ints are their own class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Int(i64),
    NumI(i64),
    NumF(u64),
    Str(Vec<u8>),
    Bool(bool),
}

pub fn num_key(n: Num) -> Key {
    match n {
        Num::I(i) => Key::NumI(i),
        Num::F(f) => {
            const TWO_63: f64 = 9_223_372_036_854_775_808.0;
            if f.fract() == 0.0 && (-TWO_63..TWO_63).contains(&f) {
                Key::NumI(f as i64)
            } else {
                Key::NumF(f.to_bits())
            }
        }
    }
}

/// What makes a subscription a candidate for a record. Every gate is implied by a required conjunct being
/// true, so a subscription whose gate does not hold cannot match.
#[derive(Debug, Clone)]
pub enum GateSpec {
    /// Evaluated for every record.
    None,
    /// The property's value is one of the keys.
    Eq { slot: usize, keys: Vec<Key> },
    /// `property OP bound` holds.
    Range { slot: usize, op: CmpOp, bound: Num },
    /// `low <= property <= high` (int bounds); the bounds stay in the residual, which decides exactly.
    Interval { slot: usize, low: i64, high: i64 },
}

#[derive(Debug, Clone)]
pub struct SubSpec {
    pub gate: GateSpec,
    /// The conjuncts still to evaluate once the gate holds; the subscription matches when each is true.
    pub residual: Vec<usize>,
    /// The group this subscription opens when it matches (an entry of an app's filter).
    pub opens: Option<u32>,
    /// The group that must be open for this subscription to be evaluated at all (the app's filter passed).
    pub requires: Option<u32>,
}

/// The equality index of one property slot while a plan is built, a map per key class.
#[derive(Default)]
struct EqTable {
    int: FxMap<i64, Vec<Cand>>,
    num_i: FxMap<i64, Vec<Cand>>,
    num_f: FxMap<u64, Vec<Cand>>,
    str: FxMap<Vec<u8>, Vec<Cand>>,
    bool: [Vec<Cand>; 2],
}

impl EqTable {
    fn list(&mut self, key: Key) -> &mut Vec<Cand> {
        match key {
            Key::Int(i) => self.int.entry(i).or_default(),
            Key::NumI(i) => self.num_i.entry(i).or_default(),
            Key::NumF(f) => self.num_f.entry(f).or_default(),
            Key::Str(s) => self.str.entry(s).or_default(),
            Key::Bool(b) => &mut self.bool[usize::from(b)],
        }
    }

    fn freeze(self) -> EqIndex {
        let ints = |map: FxMap<i64, Vec<Cand>>| map.into_iter().map(|(k, v)| (k as u64, v));
        EqIndex {
            int: Keyed::build(ints(self.int).collect()),
            num_i: Keyed::build(ints(self.num_i).collect()),
            num_f: Keyed::build(self.num_f.into_iter().collect()),
            str: Keyed::build(self.str.into_iter().collect()),
            bool: self.bool,
        }
    }
}

/// The equality index of one property slot, a table per key class (strings are looked up without a copy).
struct EqIndex {
    int: Keyed<u64>,
    num_i: Keyed<u64>,
    num_f: Keyed<u64>,
    str: Keyed<Vec<u8>>,
    bool: [Vec<Cand>; 2],
}

impl EqIndex {
    fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        let lists = [&self.int.cands, &self.num_i.cands, &self.num_f.cands];
        let lists = lists.into_iter().chain([&self.str.cands]);
        lists.chain(self.bool.iter()).flatten().map(|c| c.sub)
    }

    /// Asks for what `probe` of `v` will read at `step`.
    fn ask(&self, v: V<'_>, step: Step) {
        match v {
            V::Int(i) => {
                self.int.ask(&(i as u64), step);
                self.num_i.ask(&(i as u64), step);
            }
            V::Float(f) => match num_key(Num::F(f)) {
                Key::NumI(i) => self.num_i.ask(&(i as u64), step),
                Key::NumF(bits) => self.num_f.ask(&bits, step),
                _ => {}
            },
            V::Str(s) => self.str.ask(s, step),
            V::Null | V::Bool(_) => {} // two short lists of their own
        }
    }

    fn probe(&self, v: V<'_>, out: &mut Vec<Cand>) {
        match v {
            V::Null => {}
            V::Int(i) => {
                out.extend_from_slice(self.int.get(&(i as u64)));
                out.extend_from_slice(self.num_i.get(&(i as u64)));
            }
            V::Float(f) => match num_key(Num::F(f)) {
                Key::NumI(i) => out.extend_from_slice(self.num_i.get(&(i as u64))),
                Key::NumF(bits) => out.extend_from_slice(self.num_f.get(&bits)),
                _ => {}
            },
            V::Str(s) => out.extend_from_slice(self.str.get(s)),
            V::Bool(b) => out.extend_from_slice(&self.bool[usize::from(b)]),
        }
    }
}

/// An equality index's table once built: open addressing over one array of slots (at most half full), each
/// holding its key (a string's as its range in one array of key bytes) and where its candidates are in one
/// array. A probe reads one slot, then the candidates: a `HashMap` of vectors read its control bytes, the
/// bucket, the key's own allocation and then the vector's, at 100,000 subscriptions each a cache miss.
struct Keyed<K> {
    slots: Vec<Slot>,
    /// Key bytes of string tables.
    keys: Vec<u8>,
    cands: Vec<Cand>,
    shift: u32,
    _key: std::marker::PhantomData<K>,
}

/// A slot of a `Keyed` table: an int key (or a string's hash), the string's bytes in `Keyed::keys`, and its
/// candidates `cands[start..start + len]` (`len` 0: empty).
#[derive(Clone, Copy, Default)]
struct Slot {
    key: u64,
    key_start: u32,
    key_end: u32,
    start: u32,
    len: u32,
}

trait KeyedKey: Sized {
    type Probe: ?Sized;
    fn hash_of(probe: &Self::Probe) -> u64;
    /// Whether `slot` holds `probe`, whose hash is `hash`.
    fn holds(slot: &Slot, probe: &Self::Probe, hash: u64, keys: &[u8]) -> bool;
    /// Fills `slot`'s key from `self` (a string's bytes go to `keys`).
    fn store(&self, slot: &mut Slot, keys: &mut Vec<u8>);
}

impl KeyedKey for u64 {
    type Probe = u64;
    fn hash_of(probe: &u64) -> u64 {
        *probe // `Keyed::home` mixes it
    }
    fn holds(slot: &Slot, probe: &u64, _: u64, _: &[u8]) -> bool {
        slot.key == *probe
    }
    fn store(&self, slot: &mut Slot, _: &mut Vec<u8>) {
        slot.key = *self;
    }
}

impl KeyedKey for Vec<u8> {
    type Probe = [u8];
    fn hash_of(probe: &[u8]) -> u64 {
        let mut h = FxHasher::default();
        h.write(probe);
        h.finish()
    }
    fn holds(slot: &Slot, probe: &[u8], hash: u64, keys: &[u8]) -> bool {
        slot.key == hash && &keys[slot.key_start as usize..slot.key_end as usize] == probe
    }
    fn store(&self, slot: &mut Slot, keys: &mut Vec<u8>) {
        slot.key = Self::hash_of(self);
        slot.key_start = keys.len() as u32;
        keys.extend_from_slice(self);
        slot.key_end = keys.len() as u32;
    }
}

impl<K: KeyedKey> Keyed<K> {
    fn build(mut entries: Vec<(K, Vec<Cand>)>) -> Keyed<K> {
        entries.retain(|(_, cands)| !cands.is_empty());
        let mut table = Keyed {
            slots: Vec::new(),
            keys: Vec::new(),
            cands: Vec::new(),
            shift: 64,
            _key: std::marker::PhantomData,
        };
        if entries.is_empty() {
            return table;
        }
        let size = (entries.len() * 2).next_power_of_two();
        table.shift = 64 - size.trailing_zeros();
        table.slots = vec![Slot::default(); size];
        for (key, cands) in entries {
            let mut slot = Slot {
                start: table.cands.len() as u32,
                len: cands.len() as u32,
                ..Slot::default()
            };
            key.store(&mut slot, &mut table.keys);
            table.cands.extend_from_slice(&cands);
            let mut i = table.home(slot.key);
            while table.slots[i].len != 0 {
                i = (i + 1) & (size - 1);
            }
            table.slots[i] = slot;
        }
        table
    }

    /// The first slot to look in for a key hashed (or, for ints, keyed) `h`.
    fn home(&self, h: u64) -> usize {
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// Asks for what `get(probe)` will read at `step`: its home slot, or (that slot cached) the candidates
    /// it holds.
    fn ask(&self, probe: &K::Probe, step: Step) {
        if self.slots.is_empty() {
            return;
        }
        match step {
            Step::Slots => prefetch(&self.slots[self.home(K::hash_of(probe))]),
            Step::Candidates => ask_list(self.get(probe)),
        }
    }

    fn get(&self, probe: &K::Probe) -> &[Cand] {
        if self.slots.is_empty() {
            return &[];
        }
        let mask = self.slots.len() - 1;
        let hash = K::hash_of(probe);
        let mut i = self.home(hash);
        loop {
            let slot = &self.slots[i];
            if slot.len == 0 {
                return &[];
            }
            if K::holds(slot, probe, hash, &self.keys) {
                let start = slot.start as usize;
                return &self.cands[start..start + slot.len as usize];
            }
            i = (i + 1) & mask;
        }
    }
}

struct RangeBucket {
    op: CmpOp,
    bounds: Vec<Num>,
    subs: Vec<Cand>,
}

/// Intervals no wider than `width`, by ascending lower bound: one holding v has its lower bound in
/// [v - width, v].
struct IntervalClass {
    width: i128,
    lows: Vec<i64>,
    subs: Vec<Cand>,
}

/// Residual conjuncts a `Cand` holds itself; longer residuals are in `Plan::spill`.
const INLINE: usize = 2;
/// The longest string literal a `Conj` holds itself.
const SHORT: usize = 16;

/// How a residual conjunct is evaluated: most are a property compared with a literal, which the evaluator
/// computes from the `Conj` alone, with no read of the node, memo and dialect arrays (three misses per node
/// at 100,000 subscriptions) and no recursion; any other conjunct is evaluated as its node.
#[derive(Clone, Copy, Debug)]
enum Fast {
    Node,
    /// `property OP literal`, in the conjunct's dialect.
    Cmp(CmpOp),
    /// sql92 `property [NOT] BETWEEN low AND high`, int bounds (`Conj::lit`, `Conj::high`).
    Between(bool),
}

/// A literal a `Conj` holds itself (a string of at most `SHORT` bytes).
#[derive(Clone, Copy, Debug)]
enum Lit {
    Int(i64),
    Float(f64),
    Str(u8, [u8; SHORT]),
}

/// A distinct residual conjunct: its node, and what its fast form reads. Node results are pure functions of
/// the record's properties, so computing a conjunct here instead of through its memo slot gives the same value.
#[derive(Clone, Copy, Debug)]
struct Conj {
    node: u32,
    slot: u32,
    sql: bool,
    fast: Fast,
    lit: Lit,
    high: i64,
}

impl Conj {
    /// The conjunct of node `n`: a fast form when it is a property (read in its own dialect) against literals.
    fn of(nodes: &[Node], sql: &[bool], n: usize) -> Conj {
        let slow = Conj {
            node: n as u32,
            slot: 0,
            sql: sql[n],
            fast: Fast::Node,
            lit: Lit::Int(0),
            high: 0,
        };
        let prop = |x: usize| match nodes[x] {
            Node::Prop(slot) if sql[x] == sql[n] => u32::try_from(slot).ok(),
            _ => None,
        };
        let lit = |x: usize| match &nodes[x] {
            Node::Int(i) => Some(Lit::Int(*i)),
            Node::Float(f) => Some(Lit::Float(*f)),
            Node::Str(s) if s.len() <= SHORT => {
                let mut bytes = [0u8; SHORT];
                bytes[..s.len()].copy_from_slice(s);
                Some(Lit::Str(s.len() as u8, bytes))
            }
            _ => None,
        };
        match nodes[n] {
            Node::Cmp(op, a, b) => match (prop(a), lit(b)) {
                (Some(slot), Some(lit)) => Conj {
                    slot,
                    fast: Fast::Cmp(op),
                    lit,
                    ..slow
                },
                _ => slow,
            },
            Node::Between(x, low, high, negated) if sql[n] => {
                match (prop(x), lit(low), lit(high)) {
                    (Some(slot), Some(Lit::Int(low)), Some(Lit::Int(high))) => Conj {
                        slot,
                        fast: Fast::Between(negated),
                        lit: Lit::Int(low),
                        high,
                        ..slow
                    },
                    _ => slow,
                }
            }
            _ => slow,
        }
    }
}
/// `Cand::opens` of a subscription that opens no group.
const NO_GROUP: u32 = u32::MAX;

/// A subscription as the indexes list it: with all its evaluation reads besides the nodes (its residual
/// conjuncts, the group it opens), so that a candidate costs no look-up in a table of every subscription:
/// at 100,000 subscriptions those look-ups were most of the decision path's cache misses.
#[derive(Clone, Copy, Debug)]
struct Cand {
    sub: u32,
    /// The group it opens, or `NO_GROUP`.
    opens: u32,
    /// How many residual conjuncts (indexes into `Plan::conjs`); beyond `INLINE`, `conjuncts[0]` is where
    /// they start in `Plan::spill`.
    len: u32,
    conjuncts: [u32; INLINE],
}

/// Interval gates by width class while a plan is built: (lower bound, subscription) each.
type IntervalsByWidth = HashMap<i128, Vec<(i64, u32)>>;

/// `Plan::stats`: subscriptions always evaluated and by each index, memoized nodes, nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanStats {
    pub unindexed: usize,
    pub indexed_equality: usize,
    pub indexed_range: usize,
    pub indexed_interval: usize,
    pub memoized: usize,
    pub nodes: usize,
}

pub struct Plan {
    /// Distinct header names and, for each, the slots (one per declared type) it fills (body slots are in no
    /// name's list).
    names: Vec<String>,
    name_slots: Vec<Vec<(usize, PropType)>>,
    slot_count: usize,
    nodes: Vec<Node>,
    sql: Vec<bool>,
    /// Memo slot of each node read by more than one parent or subscription.
    memo: Vec<Option<u32>>,
    memo_count: usize,
    subscription_count: usize,
    /// The residual conjuncts of the subscriptions with more than `INLINE` of them (`Cand`).
    spill: Vec<u32>,
    /// Every distinct residual conjunct (`Cand::conjuncts` and `spill` index it).
    conjs: Vec<Conj>,
    group_count: usize,
    /// The indexes, one per part: `parts[0]` holds the subscriptions that require no group, `parts[g + 1]`
    /// those that require group g. A record probes only the parts of the groups it opened, so its
    /// candidates are its own apps' subscriptions, not those of every app whose keys it shares.
    parts: Vec<Index>,
}

/// The indexes of one part of the subscriptions (`Plan::parts`).
#[derive(Default)]
struct Index {
    always: Vec<Cand>,
    eq: Vec<(usize, EqIndex)>,
    ranges: Vec<(usize, RangeBucket)>,
    intervals: Vec<(usize, Vec<IntervalClass>)>,
}

/// One header the plan reads: the index of its name in `Plan::names` and its value (a range of the batch's
/// bytes), None for a null header.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub name: u32,
    pub value: Option<(usize, usize)>,
}

/// A property value read from a record's body, already typed (its slot is never filled from a header); a
/// string is a range of the batch's bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Typed {
    Str(usize, usize),
    Int(i64),
    Bool(bool),
    Float(f64),
}

/// A batch of records: every header value in one buffer, the headers of all records in one list, and each
/// record as a range of that list (so a batch costs a few allocations, not a few per header). Values read from
/// the records' bodies are `(slot, value)` in one list, each record's a range of it (`typed_records`, aligned
/// with `records`, or empty: no record has any).
#[derive(Default, Debug)]
pub struct Batch {
    pub bytes: Vec<u8>,
    pub headers: Vec<Header>,
    pub records: Vec<(usize, usize)>,
    pub typed: Vec<(u32, Typed)>,
    pub typed_records: Vec<(usize, usize)>,
}

impl Batch {
    /// Record `r`'s headers and typed (body) values.
    pub fn record(&self, r: usize) -> (&[Header], &[(u32, Typed)]) {
        let (start, end) = self.records[r];
        let typed = (self.typed_records.get(r)).map_or(&[][..], |&(s, e)| &self.typed[s..e]);
        (&self.headers[start..end], typed)
    }

    pub fn push_header(&mut self, name: u32, value: Option<&[u8]>) {
        let value = value.map(|v| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(v);
            (start, self.bytes.len())
        });
        self.headers.push(Header { name, value });
    }

    /// After the first record: room for `count` records of its headers and bytes.
    pub fn reserve_like_first(&mut self, count: usize) {
        let rest = count.saturating_sub(1);
        self.headers.reserve(self.headers.len() * rest);
        self.bytes.reserve(self.bytes.len() * rest);
    }

    /// Close the current record: the headers pushed since the previous one are its headers.
    pub fn end_record(&mut self) {
        let start = self.records.last().map_or(0, |r| r.1);
        self.records.push((start, self.headers.len()));
    }

    /// A string read from a body, kept in the batch's bytes.
    pub fn push_str(&mut self, text: &[u8]) -> Typed {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(text);
        Typed::Str(start, self.bytes.len())
    }

    /// Close the typed values of the next record: those pushed to `typed` since the previous one.
    pub fn end_typed(&mut self) {
        let start = self.typed_records.last().map_or(0, |r| r.1);
        self.typed_records.push((start, self.typed.len()));
    }
}

/// What a batch's records matched, in one list for the batch (no allocation per record): per record, the
/// subscriptions matched and those whose evaluation ended in an error (ascending), and per header of the batch
/// how its value decoded under the types the plan read it as (`decoded_bits`), so the decider need not decode
/// it again to count decode failures.
#[derive(Default, Debug)]
pub struct Matches {
    matched: Vec<u32>,
    failed: Vec<u32>,
    /// Per record, where its matched and failed subscriptions end.
    ends: Vec<(usize, usize)>,
    /// Per header of the batch (`Batch::headers`): bit `t` set if it was decoded as type `t`, bit `4 + t` if
    /// that decoding failed (none for a null header, or one the plan does not read).
    pub decoded: Vec<u8>,
}

impl Matches {
    /// Empty, with room for every header's decoding outcome of `batch`.
    fn for_batch(batch: &Batch) -> Matches {
        Matches {
            decoded: Vec::with_capacity(batch.headers.len()),
            ..Matches::default()
        }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Record `r`'s (matched, failed) subscriptions.
    pub fn record(&self, r: usize) -> (&[u32], &[u32]) {
        let (from_m, from_f) = if r == 0 { (0, 0) } else { self.ends[r - 1] };
        let (to_m, to_f) = self.ends[r];
        (&self.matched[from_m..to_m], &self.failed[from_f..to_f])
    }

    fn decoded_bits(t: PropType, ok: bool) -> u8 {
        let bit = 1u8 << (t as u8);
        if ok {
            bit
        } else {
            bit | bit << 4
        }
    }

    /// Whether header `h` of `decoded` (a record's part of `decoded`) failed to decode as `t`; None when the
    /// plan did not decode it as `t`.
    pub fn failed_in(decoded: &[u8], h: usize, t: PropType) -> Option<bool> {
        let bit = 1u8 << (t as u8);
        let outcome = *decoded.get(h)?;
        (outcome & bit != 0).then_some(outcome & bit << 4 != 0)
    }
}

/// Sorts `v[from..]` and drops its repeated values.
fn sort_dedup_from(v: &mut Vec<u32>, from: usize) {
    v[from..].sort_unstable();
    let mut kept = from;
    for i in from..v.len() {
        if kept == from || v[i] != v[kept - 1] {
            v[kept] = v[i];
            kept += 1;
        }
    }
    v.truncate(kept);
}

/// Refuses a node whose children are not earlier nodes or whose slot is not one of the plan's.
fn check_node(node: &Node, index: usize, slot_count: usize) -> Result<(), String> {
    if let Node::Prop(slot) | Node::Exists(slot) = node {
        if *slot >= slot_count {
            return Err(format!("bad property slot {slot}"));
        }
    }
    if let Node::And(items) | Node::Or(items) = node {
        if items.is_empty() {
            return Err("empty junction".into());
        }
    }
    match node.children().into_iter().find(|&c| c >= index) {
        Some(c) => Err(format!("child {c} of node {index} is not an earlier node")),
        None => Ok(()),
    }
}

/// Evaluation state of one record: its decoded properties and the memo of shared nodes.
struct Ctx<'a> {
    props: Vec<Option<V<'a>>>,
    memo_gen: Vec<u32>,
    memo_val: Vec<R<'a>>,
    generation: u32,
    candidates: Vec<Cand>,
    /// Per group, the generation (record) in which it was last opened.
    open: Vec<u32>,
    /// The groups the current record opened, in the order they were opened.
    opened: Vec<u32>,
    /// Subscriptions the indexes listed and those evaluated so far (`Plan::candidate_counts`).
    listed: usize,
    evaluated: usize,
}

impl Ctx<'_> {
    /// A new record: a new generation stamps its memo entries and opened groups.
    fn next_record(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // The stamps wrapped: clear them so no stale entry looks current.
            self.memo_gen.iter_mut().for_each(|g| *g = 0);
            self.open.iter_mut().for_each(|g| *g = 0);
            self.generation = 1;
        }
    }
}

/// The most property slots `Plan::match_all` keeps per record for its second pass (24 bytes each: at most
/// 1.5 MB for a batch of 2,000 records); a plan with more matches record by record.
const ASK_AHEAD_SLOTS: usize = 32;

/// The steps of asking ahead for an index probe, each a few records after the one before: the equality
/// tables' slots a record's values hash to, then (the slots cached) the candidate lists they point at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Slots,
    Candidates,
}

/// What `Plan::match_all`'s first pass kept of every record: its properties (`slots` per record) and the
/// groups it opened.
struct Ahead<'p, 'a> {
    props: &'p [Option<V<'a>>],
    slots: usize,
    opened: &'p [u32],
    opened_ends: &'p [usize],
}

impl<'a> Ahead<'_, 'a> {
    fn props(&self, r: usize) -> &[Option<V<'a>>] {
        &self.props[r * self.slots..(r + 1) * self.slots]
    }

    fn opened(&self, r: usize) -> &[u32] {
        let start = if r == 0 { 0 } else { self.opened_ends[r - 1] };
        &self.opened[start..self.opened_ends[r]]
    }
}

impl Plan {
    /// Build the plan. `props` are the property slots: (header name, declared type).
    pub fn build(
        props: &[(String, PropType)],
        specs: Vec<NodeSpec>,
        subs: &[SubSpec],
    ) -> Result<Plan, String> {
        Plan::build_with_body(props, &[], specs, subs)
    }

    /// `build`, with `body_slots` filled only by the batch's typed values (`Batch::typed`), never by headers.
    pub fn build_with_body(
        props: &[(String, PropType)],
        body_slots: &[usize],
        specs: Vec<NodeSpec>,
        subs: &[SubSpec],
    ) -> Result<Plan, String> {
        if body_slots.iter().any(|&s| s >= props.len()) {
            return Err("bad body slot".into());
        }
        let mut names: Vec<String> = Vec::new();
        let mut name_slots: Vec<Vec<(usize, PropType)>> = Vec::new();
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (slot, (name, t)) in props.iter().enumerate() {
            if body_slots.contains(&slot) {
                continue;
            }
            let i = *by_name.entry(name.as_str()).or_insert_with(|| {
                names.push(name.clone());
                name_slots.push(Vec::new());
                names.len() - 1
            });
            name_slots[i].push((slot, *t));
        }
        let mut nodes = Vec::with_capacity(specs.len());
        let mut sql = Vec::with_capacity(specs.len());
        for (i, mut spec) in specs.into_iter().enumerate() {
            check_node(&spec.node, i, props.len())?;
            if let Node::In(_, values, _) = &mut spec.node {
                values.sort();
                values.dedup();
            }
            nodes.push(spec.node);
            sql.push(spec.sql);
        }
        // Parents (and subscription residuals) per node: a node read from more than one place gets a memo slot.
        let mut uses = vec![0u32; nodes.len()];
        for node in &nodes {
            for c in node.children() {
                uses[c] += 1;
            }
        }
        let mut plan = Plan {
            names,
            name_slots,
            slot_count: props.len(),
            memo: Vec::new(),
            memo_count: 0,
            subscription_count: subs.len(),
            spill: Vec::new(),
            conjs: Vec::new(),
            group_count: 0,
            parts: Vec::new(),
            nodes,
            sql,
        };
        // Keyed by part first, as `Plan::parts` splits them.
        let mut always: Vec<(usize, Cand)> = Vec::new();
        let mut cands: Vec<Cand> = Vec::with_capacity(subs.len());
        let mut eq: HashMap<(usize, usize), EqTable> = HashMap::new();
        let mut ranges: HashMap<(usize, usize, u8), Vec<(Num, u32)>> = HashMap::new();
        let mut intervals: HashMap<(usize, usize), IntervalsByWidth> = HashMap::new();
        let mut conj_ids: HashMap<usize, u32> = HashMap::new();
        for (i, sub) in subs.iter().enumerate() {
            let id = u32::try_from(i).map_err(|_| "too many subscriptions")?;
            for &r in &sub.residual {
                if r >= plan.nodes.len() {
                    return Err(format!("residual node {r} out of range"));
                }
                uses[r] += 1;
            }
            if sub.opens.is_some() && sub.requires.is_some() {
                return Err("a subscription cannot both open a group and require one".into());
            }
            let too_many = || "too many nodes".to_string();
            let mut residual = Vec::with_capacity(sub.residual.len());
            for &r in &sub.residual {
                let next = u32::try_from(plan.conjs.len()).map_err(|_| too_many())?;
                let id = *conj_ids.entry(r).or_insert(next);
                if id == next {
                    plan.conjs.push(Conj::of(&plan.nodes, &plan.sql, r));
                }
                residual.push(id);
            }
            let mut conjuncts = [0u32; INLINE];
            if residual.len() <= INLINE {
                conjuncts[..residual.len()].copy_from_slice(&residual);
            } else {
                conjuncts[0] = u32::try_from(plan.spill.len()).map_err(|_| too_many())?;
                plan.spill.extend_from_slice(&residual);
            }
            let cand = Cand {
                sub: id,
                opens: sub.opens.unwrap_or(NO_GROUP),
                len: u32::try_from(sub.residual.len()).map_err(|_| too_many())?,
                conjuncts,
            };
            cands.push(cand);
            for g in sub.opens.iter().chain(&sub.requires) {
                plan.group_count = plan.group_count.max(*g as usize + 1);
            }
            let check_slot = |slot: usize| {
                if slot < props.len() {
                    Ok(slot)
                } else {
                    Err(format!("bad gate slot {slot}"))
                }
            };
            let part = sub.requires.map_or(0, |g| g as usize + 1);
            match &sub.gate {
                GateSpec::None => always.push((part, cand)),
                GateSpec::Eq { slot, keys } => {
                    let table = eq.entry((part, check_slot(*slot)?)).or_default();
                    let mut keys = keys.clone();
                    keys.dedup();
                    for key in keys {
                        let list = table.list(key);
                        // A value repeated in the gate must not list the subscription twice.
                        if list.last().map(|c| c.sub) != Some(id) {
                            list.push(cand);
                        }
                    }
                }
                GateSpec::Range { slot, op, bound } => {
                    if matches!(bound, Num::F(f) if f.is_nan())
                        || matches!(op, CmpOp::Eq | CmpOp::Ne)
                    {
                        return Err("bad range gate".into());
                    }
                    ranges
                        .entry((part, check_slot(*slot)?, *op as u8))
                        .or_default()
                        .push((*bound, id));
                }
                GateSpec::Interval { slot, low, high } => {
                    let width = i128::from(*high) - i128::from(*low);
                    let class = if width <= 0 {
                        0
                    } else {
                        // The smallest power of two at least the width (at most 2^64).
                        (width as u128).next_power_of_two() as i128
                    };
                    intervals
                        .entry((part, check_slot(*slot)?))
                        .or_default()
                        .entry(class)
                        .or_default()
                        .push((*low, id));
                }
            }
        }
        let mut parts: Vec<Index> = (0..=plan.group_count).map(|_| Index::default()).collect();
        for (part, id) in always {
            parts[part].always.push(id);
        }
        for ((part, slot), table) in eq {
            parts[part].eq.push((slot, table.freeze()));
        }
        for ((part, slot, _), mut bucket) in ranges {
            let op = match &subs[bucket[0].1 as usize].gate {
                GateSpec::Range { op, .. } => *op,
                _ => unreachable!("a range bucket holds range gates"),
            };
            // Bounds are finite or infinite numbers, never NaN, so the order is total.
            bucket.sort_by(|a, b| {
                cmp_num(a.0, b.0)
                    .unwrap_or(Ordering::Equal)
                    .then(a.1.cmp(&b.1))
            });
            let (bounds, subs) = (bucket.iter())
                .map(|&(bound, id)| (bound, cands[id as usize]))
                .unzip();
            parts[part]
                .ranges
                .push((slot, RangeBucket { op, bounds, subs }));
        }
        for ((part, slot), classes) in intervals {
            let mut out: Vec<IntervalClass> = classes
                .into_iter()
                .map(|(width, mut bucket)| {
                    bucket.sort();
                    let (lows, subs) = (bucket.iter())
                        .map(|&(low, id)| (low, cands[id as usize]))
                        .unzip();
                    IntervalClass { width, lows, subs }
                })
                .collect();
            out.sort_by_key(|c| c.width);
            parts[part].intervals.push((slot, out));
        }
        for index in &mut parts {
            index.eq.sort_by_key(|(slot, _)| *slot);
            index.ranges.sort_by_key(|(slot, b)| (*slot, b.op as u8));
            index.intervals.sort_by_key(|(slot, _)| *slot);
        }
        plan.parts = parts;
        let mut count = 0u32;
        plan.memo = plan
            .nodes
            .iter()
            .zip(&uses)
            .map(|(node, &n)| {
                // Leaves are cheaper to evaluate again than to memoize.
                (n > 1 && !node.children().is_empty()).then(|| {
                    count += 1;
                    count - 1
                })
            })
            .collect();
        plan.memo_count = count as usize;
        Ok(plan)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn subscription_count(&self) -> usize {
        self.subscription_count
    }

    /// How the subscriptions are reached and how many nodes there are.
    pub fn stats(&self) -> PlanStats {
        let eq: usize = {
            let mut ids: Vec<u32> = (self.parts.iter())
                .flat_map(|p| p.eq.iter().flat_map(|(_, t)| t.ids()))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        };
        let ranges = (self.parts.iter())
            .flat_map(|p| p.ranges.iter().map(|(_, b)| b.subs.len()))
            .sum();
        let intervals = (self.parts.iter())
            .flat_map(|p| p.intervals.iter())
            .flat_map(|(_, cs)| cs.iter().map(|c| c.subs.len()))
            .sum();
        PlanStats {
            unindexed: self.parts.iter().map(|p| p.always.len()).sum(),
            indexed_equality: eq,
            indexed_range: ranges,
            indexed_interval: intervals,
            memoized: self.memo_count,
            nodes: self.nodes.len(),
        }
    }

    /// The matched subscriptions (ascending indexes) of each record.
    pub fn match_batch(&self, batch: &Batch) -> Vec<Vec<u32>> {
        self.match_batch_with_errors(batch, false)
            .into_iter()
            .map(|(matched, _)| matched)
            .collect()
    }

    /// The matched subscriptions of each record and, with `errors`, those whose evaluation ended in an error
    /// (as `Plan.match_with_errors` counts them: only subscriptions actually evaluated, so a subscription
    /// whose gate does not hold reports no error; a sql92 UNKNOWN is no error).
    pub fn match_batch_with_errors(
        &self,
        batch: &Batch,
        errors: bool,
    ) -> Vec<(Vec<u32>, Vec<u32>)> {
        let matches = self.match_all(batch, errors);
        (0..matches.len())
            .map(|r| {
                let (matched, failed) = matches.record(r);
                (matched.to_vec(), failed.to_vec())
            })
            .collect()
    }

    /// `match_batch_with_errors` into one `Matches`, with each header's decoding outcomes.
    ///
    /// In two passes, so that each record's index probes can be asked for ahead (`ask_ahead`): the first
    /// decodes every record and matches what requires no group (which settles the groups a record opens); the
    /// second probes and evaluates each record's opened groups, knowing already what the records after it will
    /// probe. The matches are those `match_record` makes record by record: a record's memo starts afresh in
    /// the second pass, and a node's value is a pure function of the record's properties.
    pub fn match_all(&self, batch: &Batch, errors: bool) -> Matches {
        if self.slot_count > ASK_AHEAD_SLOTS {
            return self.match_one_by_one(batch, errors);
        }
        let n = batch.records.len();
        let mut ctx = self.context();
        let mut out = Matches::for_batch(batch);
        let mut first = Matches::default();
        let mut props = Vec::with_capacity(n * self.slot_count);
        let (mut opened, mut opened_ends) = (Vec::new(), Vec::with_capacity(n));
        for r in 0..n {
            let (headers, typed) = batch.record(r);
            self.read_record(headers, typed, &batch.bytes, &mut ctx, &mut out.decoded);
            self.match_groupless(&mut ctx, errors, &mut first.matched, &mut first.failed);
            first.ends.push((first.matched.len(), first.failed.len()));
            props.extend_from_slice(&ctx.props);
            opened.extend_from_slice(&ctx.opened);
            opened_ends.push(opened.len());
        }
        let ahead = Ahead {
            props: &props,
            slots: self.slot_count,
            opened: &opened,
            opened_ends: &opened_ends,
        };
        for r in 0..n {
            self.ask_ahead(&ahead, r + 2 * AHEAD, Step::Slots);
            self.ask_ahead(&ahead, r + AHEAD, Step::Candidates);
            ctx.next_record();
            ctx.props.copy_from_slice(ahead.props(r));
            let (matched, failed) = first.record(r);
            let (out_start, failed_start) = (out.matched.len(), out.failed.len());
            out.matched.extend_from_slice(matched);
            out.failed.extend_from_slice(failed);
            for &g in ahead.opened(r) {
                self.match_group(g, &mut ctx, errors, &mut out.matched, &mut out.failed);
            }
            sort_dedup_from(&mut out.matched, out_start);
            sort_dedup_from(&mut out.failed, failed_start);
            out.ends.push((out.matched.len(), out.failed.len()));
        }
        out
    }

    /// `match_all` record by record, nothing asked for ahead: for plans of more property slots than the first
    /// pass should keep for a whole batch.
    fn match_one_by_one(&self, batch: &Batch, errors: bool) -> Matches {
        let mut ctx = self.context();
        let mut out = Matches::for_batch(batch);
        for r in 0..batch.records.len() {
            let (headers, typed) = batch.record(r);
            self.match_record(headers, typed, &batch.bytes, &mut ctx, errors, &mut out);
        }
        out
    }

    /// Asks for what record `r`'s opened groups' probes will read at `step`.
    fn ask_ahead(&self, ahead: &Ahead<'_, '_>, r: usize, step: Step) {
        if r < ahead.opened_ends.len() {
            for &g in ahead.opened(r) {
                self.parts[g as usize + 1].ask(ahead.props(r), step);
            }
        }
    }

    /// Per record, how many subscriptions the indexes listed (their gates hold) and how many of those were
    /// evaluated (in groups the record opened); for the benchmarks: the matched ones are among them.
    pub fn candidate_counts(&self, batch: &Batch) -> Vec<(usize, usize)> {
        let mut ctx = self.context();
        (0..batch.records.len())
            .map(|r| {
                let before = (ctx.listed, ctx.evaluated);
                let (headers, typed) = batch.record(r);
                let matches = &mut Matches::default();
                self.match_record(headers, typed, &batch.bytes, &mut ctx, true, matches);
                (ctx.listed - before.0, ctx.evaluated - before.1)
            })
            .collect()
    }

    fn context(&self) -> Ctx<'_> {
        Ctx {
            props: vec![None; self.slot_count],
            memo_gen: vec![0; self.memo_count],
            memo_val: vec![Err(()); self.memo_count],
            generation: 0,
            candidates: Vec::new(),
            open: vec![0; self.group_count],
            opened: Vec::new(),
            listed: 0,
            evaluated: 0,
        }
    }

    /// One record matched on its own: what `match_all` makes of it.
    fn match_record<'a>(
        &'a self,
        headers: &[Header],
        typed: &[(u32, Typed)],
        bytes: &'a [u8],
        ctx: &mut Ctx<'a>,
        errors: bool,
        matches: &mut Matches,
    ) {
        self.read_record(headers, typed, bytes, ctx, &mut matches.decoded);
        let (out, failed) = (&mut matches.matched, &mut matches.failed);
        let (out_start, failed_start) = (out.len(), failed.len());
        self.match_groupless(ctx, errors, out, failed);
        for i in 0..ctx.opened.len() {
            self.match_group(ctx.opened[i], ctx, errors, out, failed);
        }
        sort_dedup_from(out, out_start);
        sort_dedup_from(failed, failed_start);
        matches.ends.push((out.len(), failed.len()));
    }

    /// Starts a record: its properties decoded from its headers and typed (body) values into `ctx`, each
    /// header's decoding outcomes pushed to `decoded`.
    fn read_record<'a>(
        &'a self,
        headers: &[Header],
        typed: &[(u32, Typed)],
        bytes: &'a [u8],
        ctx: &mut Ctx<'a>,
        decoded: &mut Vec<u8>,
    ) {
        ctx.next_record();
        ctx.props.iter_mut().for_each(|p| *p = None);
        // The last header of a name wins; a null or undecodable one removes the property.
        for header in headers {
            let mut outcome = 0u8;
            if let Some(slots) = self.name_slots.get(header.name as usize) {
                let raw = header.value.map(|(start, end)| &bytes[start..end]);
                for &(slot, t) in slots {
                    let decoded = raw.and_then(|raw| decode(raw, t));
                    if raw.is_some() {
                        outcome |= Matches::decoded_bits(t, decoded.is_some());
                    }
                    ctx.props[slot] = decoded.map(|d| match d {
                        Decoded::Str(s) => V::Str(s),
                        Decoded::Int(i) => V::Int(i),
                        Decoded::Bool(b) => V::Bool(b),
                        Decoded::Float(f) => V::Float(f),
                    });
                }
            }
            decoded.push(outcome);
        }
        for &(slot, value) in typed {
            if let Some(p) = ctx.props.get_mut(slot as usize) {
                *p = Some(match value {
                    Typed::Str(s, e) => V::Str(&bytes[s..e]),
                    Typed::Int(i) => V::Int(i),
                    Typed::Bool(b) => V::Bool(b),
                    Typed::Float(f) => V::Float(f),
                });
            }
        }
    }

    /// The subscriptions that require no group, into `out` and `failed`: they settle which groups are open
    /// (`ctx.opened`), and only the open groups' parts are probed.
    fn match_groupless<'a>(
        &'a self,
        ctx: &mut Ctx<'a>,
        errors: bool,
        out: &mut Vec<u32>,
        failed: &mut Vec<u32>,
    ) {
        let mut cands = std::mem::take(&mut ctx.candidates);
        let mut opened = std::mem::take(&mut ctx.opened);
        cands.clear();
        opened.clear();
        self.parts[0].candidates(&ctx.props, &mut cands);
        self.evaluate(&cands, ctx, errors, out, failed, &mut opened);
        ctx.candidates = cands;
        ctx.opened = opened;
    }

    /// The subscriptions of open group `g`, into `out` and `failed`.
    fn match_group<'a>(
        &'a self,
        g: u32,
        ctx: &mut Ctx<'a>,
        errors: bool,
        out: &mut Vec<u32>,
        failed: &mut Vec<u32>,
    ) {
        let mut cands = std::mem::take(&mut ctx.candidates);
        cands.clear();
        self.parts[g as usize + 1].candidates(&ctx.props, &mut cands);
        self.evaluate(&cands, ctx, errors, out, failed, &mut Vec::new());
        ctx.candidates = cands;
    }

    /// Evaluates the residuals of `cands` into `out` (matched) and, with `errors`, `failed`; each group a
    /// match opens first in this record is added to `opened`.
    fn evaluate<'a>(
        &'a self,
        cands: &[Cand],
        ctx: &mut Ctx<'a>,
        errors: bool,
        out: &mut Vec<u32>,
        failed: &mut Vec<u32>,
        opened: &mut Vec<u32>,
    ) {
        // Every candidate listed is evaluated: none waits on a group that is not open.
        ctx.listed += cands.len();
        ctx.evaluated += cands.len();
        for cand in cands {
            let (sub, len) = (cand.sub, cand.len as usize);
            let residual = if len <= INLINE {
                &cand.conjuncts[..len]
            } else {
                let start = cand.conjuncts[0] as usize;
                &self.spill[start..start + len]
            };
            let matched = if errors {
                match self.conjunction(residual, ctx) {
                    Ok(m) => m,
                    Err(()) => {
                        failed.push(sub);
                        false
                    }
                }
            } else {
                // Only "all true" matches, so the first conjunct that is not true settles it.
                (residual.iter()).all(|&c| matches!(self.conj(c, ctx), Ok(V::Bool(true))))
            };
            if matched {
                out.push(sub);
                let g = cand.opens;
                if g != NO_GROUP && ctx.open[g as usize] != ctx.generation {
                    ctx.open[g as usize] = ctx.generation;
                    opened.push(g);
                }
            }
        }
    }

    /// A residual as the reference evaluates it: one conjunct is the whole expression (its value must be a
    /// boolean, or sql92's UNKNOWN), several are an AND chain with its short-circuit and type rules.
    /// Ok(true) matches, Ok(false) does not, Err is an evaluation error.
    fn conjunction<'a>(&'a self, residual: &[u32], ctx: &mut Ctx<'a>) -> Result<bool, ()> {
        let Some(&first) = residual.first() else {
            return Ok(true);
        };
        let sql = self.conjs[first as usize].sql;
        let mut unknown = false;
        for &c in residual {
            match self.conj(c, ctx)? {
                V::Bool(true) => {}
                V::Bool(false) => return Ok(false),
                V::Null if sql => unknown = true,
                _ => return Err(()),
            }
        }
        Ok(!unknown)
    }

    /// Residual conjunct `c`: as its node evaluates (`Conj`).
    fn conj<'a>(&'a self, c: u32, ctx: &mut Ctx<'a>) -> R<'a> {
        let conj = &self.conjs[c as usize];
        let lit = || match &conj.lit {
            Lit::Int(i) => V::Int(*i),
            Lit::Float(f) => V::Float(*f),
            Lit::Str(len, bytes) => V::Str(&bytes[..*len as usize]),
        };
        // A property as its Prop node evaluates: missing is an error in bmq, NULL in sql92.
        let prop = |ctx: &Ctx<'a>| match ctx.props[conj.slot as usize] {
            Some(v) => Ok(v),
            None if conj.sql => Ok(V::Null),
            None => Err(()),
        };
        if let Fast::Cmp(op) = conj.fast {
            // An int against an int, and a string against a string in bmq or under = and <> in sql92, compare
            // alike in both dialects: as `op` holds on their order (sql92 orders only numbers).
            match (ctx.props[conj.slot as usize], &conj.lit) {
                (Some(V::Int(x)), Lit::Int(y)) => return Ok(V::Bool(op.holds(x.cmp(y)))),
                (Some(V::Str(x)), Lit::Str(len, bytes))
                    if !conj.sql || matches!(op, CmpOp::Eq | CmpOp::Ne) =>
                {
                    return Ok(V::Bool(op.holds(x.cmp(&bytes[..*len as usize]))));
                }
                _ => {}
            }
        }
        match conj.fast {
            Fast::Node => self.eval(conj.node as usize, ctx),
            Fast::Cmp(op) if conj.sql => Ok(bool3(compare3(op, prop(ctx)?, lit()))),
            Fast::Cmp(op) => bmq_cmp(op, prop(ctx)?, lit()),
            Fast::Between(negated) => {
                let (x, low, high) = (prop(ctx)?, lit(), V::Int(conj.high));
                Ok(bool3(between3(x, low, high, negated)))
            }
        }
    }

    fn eval<'a>(&'a self, n: usize, ctx: &mut Ctx<'a>) -> R<'a> {
        match self.memo[n] {
            None => self.compute(n, ctx),
            Some(m) => {
                let m = m as usize;
                if ctx.memo_gen[m] == ctx.generation {
                    return ctx.memo_val[m];
                }
                let r = self.compute(n, ctx);
                ctx.memo_gen[m] = ctx.generation;
                ctx.memo_val[m] = r;
                r
            }
        }
    }

    fn compute<'a>(&'a self, n: usize, ctx: &mut Ctx<'a>) -> R<'a> {
        if self.sql[n] {
            self.sql(n, ctx)
        } else {
            self.bmq(n, ctx)
        }
    }

    fn literal(&self, n: usize) -> Option<V<'_>> {
        Some(match &self.nodes[n] {
            Node::Int(i) => V::Int(*i),
            Node::Float(f) => V::Float(*f),
            Node::Str(s) => V::Str(s),
            Node::Bool(b) => V::Bool(*b),
            Node::Null => V::Null,
            _ => return None,
        })
    }

    fn bmq<'a>(&'a self, n: usize, ctx: &mut Ctx<'a>) -> R<'a> {
        if let Some(v) = self.literal(n) {
            return Ok(v);
        }
        match &self.nodes[n] {
            // A missing property is an error; decoded values are always of a bmq type.
            Node::Prop(slot) => ctx.props[*slot].ok_or(()),
            Node::Exists(slot) => Ok(V::Bool(ctx.props[*slot].is_some())),
            Node::Not(x) => match self.eval(*x, ctx)? {
                V::Bool(b) => Ok(V::Bool(!b)),
                _ => Err(()),
            },
            Node::Neg(x) => match self.eval(*x, ctx)? {
                V::Int(i) => i.checked_neg().map(V::Int).ok_or(()),
                _ => Err(()),
            },
            Node::Arith(op, a, b) => {
                let a = self.eval(*a, ctx)?;
                let b = self.eval(*b, ctx)?;
                match (a, b) {
                    (V::Int(a), V::Int(b)) => int_arith(*op, a, b),
                    _ => Err(()),
                }
            }
            Node::And(items) | Node::Or(items) => {
                let stop = matches!(self.nodes[n], Node::Or(_));
                for &item in items {
                    match self.eval(item, ctx)? {
                        V::Bool(b) if b == stop => return Ok(V::Bool(stop)),
                        V::Bool(_) => {}
                        _ => return Err(()),
                    }
                }
                Ok(V::Bool(!stop))
            }
            Node::Cmp(op, a, b) => {
                let a = self.eval(*a, ctx)?;
                let b = self.eval(*b, ctx)?;
                bmq_cmp(*op, a, b)
            }
            _ => Err(()),
        }
    }

    fn sql<'a>(&'a self, n: usize, ctx: &mut Ctx<'a>) -> R<'a> {
        if let Some(v) = self.literal(n) {
            return Ok(v);
        }
        match &self.nodes[n] {
            Node::Prop(slot) => Ok(ctx.props[*slot].unwrap_or(V::Null)),
            Node::Exists(slot) => Ok(V::Bool(ctx.props[*slot].is_some())),
            Node::Not(x) => match self.eval(*x, ctx)? {
                V::Bool(b) => Ok(V::Bool(!b)),
                V::Null => Ok(V::Null),
                _ => Err(()),
            },
            Node::Neg(x) | Node::Pos(x) => {
                let negate = matches!(self.nodes[n], Node::Neg(_));
                match self.eval(*x, ctx)? {
                    V::Null => Ok(V::Null),
                    V::Int(i) if negate => i.checked_neg().map(V::Int).ok_or(()),
                    V::Float(f) if negate => Ok(V::Float(-f)),
                    v @ (V::Int(_) | V::Float(_)) => Ok(v),
                    _ => Err(()),
                }
            }
            Node::Arith(op, a, b) => {
                let a = self.eval(*a, ctx)?;
                let b = self.eval(*b, ctx)?;
                sql_arith(*op, a, b)
            }
            Node::And(items) | Node::Or(items) => {
                let stop = matches!(self.nodes[n], Node::Or(_));
                let mut unknown = false;
                for &item in items {
                    match self.eval(item, ctx)? {
                        V::Bool(b) if b == stop => return Ok(V::Bool(stop)),
                        V::Bool(_) => {}
                        V::Null => unknown = true,
                        _ => return Err(()),
                    }
                }
                Ok(if unknown { V::Null } else { V::Bool(!stop) })
            }
            Node::Cmp(op, a, b) => {
                let a = self.eval(*a, ctx)?;
                let b = self.eval(*b, ctx)?;
                Ok(bool3(compare3(*op, a, b)))
            }
            Node::Between(x, low, high, negated) => {
                let x = self.eval(*x, ctx)?;
                let low = self.eval(*low, ctx)?;
                let high = self.eval(*high, ctx)?;
                Ok(bool3(between3(x, low, high, *negated)))
            }
            Node::In(x, values, negated) => Ok(match self.eval(*x, ctx)? {
                V::Null => V::Null,
                V::Str(s) => {
                    V::Bool(values.binary_search_by(|v| v.as_slice().cmp(s)).is_ok() != *negated)
                }
                _ => V::Bool(*negated),
            }),
            Node::Like(x, pattern, negated) => Ok(match self.eval(*x, ctx)? {
                V::Null => V::Null,
                V::Str(s) => V::Bool(pattern.matches(&code_points(s)) != *negated),
                _ => V::Bool(*negated),
            }),
            Node::IsNull(x, negated) => {
                Ok(V::Bool(matches!(self.eval(*x, ctx)?, V::Null) != *negated))
            }
            _ => Err(()),
        }
    }
}

impl Index {
    /// Asks for what `candidates` will read for a record with these properties, at `step`. The interval
    /// classes' bounds are searched at the second step (and found cached when `candidates` searches them
    /// again); their candidates are asked for then.
    fn ask(&self, props: &[Option<V<'_>>], step: Step) {
        for (slot, table) in &self.eq {
            if let Some(v) = props[*slot] {
                table.ask(v, step);
            }
        }
        if step == Step::Candidates {
            for (slot, classes) in &self.intervals {
                if let Some(v) = interval_point(props[*slot]) {
                    for class in classes {
                        let (i, j) = class.holding(v);
                        ask_list(&class.subs[i..j]);
                    }
                }
            }
        }
    }

    /// The subscriptions of this part whose gate holds for the record's properties.
    fn candidates(&self, props: &[Option<V<'_>>], out: &mut Vec<Cand>) {
        out.extend_from_slice(&self.always);
        for (slot, table) in &self.eq {
            if let Some(v) = props[*slot] {
                table.probe(v, out);
            }
        }
        for (slot, bucket) in &self.ranges {
            let Some(v) = props[*slot].and_then(as_num) else {
                continue;
            };
            if matches!(v, Num::F(f) if f.is_nan()) {
                continue;
            }
            // Bounds ascend; "p > b" holds for the bounds below v, "p < b" for those above, and so on.
            let below = |b: &Num| cmp_num(*b, v) == Some(Ordering::Less);
            let at_most = |b: &Num| cmp_num(*b, v) != Some(Ordering::Greater);
            let b = &bucket.bounds;
            match bucket.op {
                CmpOp::Gt => out.extend_from_slice(&bucket.subs[..b.partition_point(below)]),
                CmpOp::Ge => out.extend_from_slice(&bucket.subs[..b.partition_point(at_most)]),
                CmpOp::Lt => out.extend_from_slice(&bucket.subs[b.partition_point(at_most)..]),
                CmpOp::Le => out.extend_from_slice(&bucket.subs[b.partition_point(below)..]),
                CmpOp::Eq | CmpOp::Ne => {}
            }
        }
        for (slot, classes) in &self.intervals {
            let Some(v) = interval_point(props[*slot]) else {
                continue;
            };
            for class in classes {
                let (i, j) = class.holding(v);
                out.extend_from_slice(&class.subs[i..j]);
            }
        }
    }
}

/// The point an interval gate is tested at: an int interval holds v only if it holds floor(v); far outside
/// int64 none does.
fn interval_point(v: Option<V<'_>>) -> Option<i128> {
    match v {
        Some(V::Int(i)) => Some(i128::from(i)),
        Some(V::Float(f)) if f.is_finite() => Some(f.floor().clamp(-1e20, 1e20) as i128),
        _ => None,
    }
}

impl IntervalClass {
    /// The range of `subs` whose intervals hold `v`.
    fn holding(&self, v: i128) -> (usize, usize) {
        let lowest = v - self.width;
        let lows = &self.lows;
        let j = lows.partition_point(|&l| i128::from(l) <= v);
        // The bounds in [lowest, v] end at j: step back over them (each one found is a candidate copied
        // anyway) rather than search the array a second time.
        let mut i = j;
        while i > 0 && i128::from(lows[i - 1]) >= lowest {
            i -= 1;
        }
        (i, j)
    }
}

/// Asks for a candidate list's first and last cache lines (lists are short: most fit in one or two).
fn ask_list(cands: &[Cand]) {
    if let (Some(first), Some(last)) = (cands.first(), cands.last()) {
        prefetch(first);
        prefetch(last);
    }
}

/// A bmq comparison: ints with ints, strings with strings, booleans only for equality; else an error.
fn bmq_cmp(op: CmpOp, a: V<'_>, b: V<'_>) -> R<'static> {
    let o = match (a, b) {
        (V::Int(x), V::Int(y)) => x.cmp(&y),
        // Byte order of UTF-8 is code point order, which is how Python orders str.
        (V::Str(x), V::Str(y)) => x.cmp(y),
        (V::Bool(x), V::Bool(y)) if matches!(op, CmpOp::Eq | CmpOp::Ne) => x.cmp(&y),
        _ => return Err(()),
    };
    Ok(V::Bool(op.holds(o)))
}

/// sql92 `x [NOT] BETWEEN low AND high`; JMS: BETWEEN is x >= low AND x <= high; NOT BETWEEN is x < low OR
/// x > high.
fn between3(x: V<'_>, low: V<'_>, high: V<'_>, negated: bool) -> Option<bool> {
    if negated {
        or3(compare3(CmpOp::Lt, x, low), compare3(CmpOp::Gt, x, high))
    } else {
        and3(compare3(CmpOp::Ge, x, low), compare3(CmpOp::Le, x, high))
    }
}

fn bool3(v: Option<bool>) -> V<'static> {
    v.map_or(V::Null, V::Bool)
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// A sql92 comparison: UNKNOWN with a NULL; values of different kinds are never equal; only numbers order.
fn compare3(op: CmpOp, a: V<'_>, b: V<'_>) -> Option<bool> {
    if matches!(a, V::Null) || matches!(b, V::Null) {
        return None;
    }
    let equal = |a: V<'_>, b: V<'_>| match (a, b) {
        (V::Str(x), V::Str(y)) => x == y,
        (V::Bool(x), V::Bool(y)) => x == y,
        _ => match (as_num(a), as_num(b)) {
            (Some(x), Some(y)) => cmp_num(x, y) == Some(Ordering::Equal),
            _ => false,
        },
    };
    Some(match op {
        CmpOp::Eq => equal(a, b),
        CmpOp::Ne => !equal(a, b),
        _ => match (as_num(a), as_num(b)) {
            (Some(x), Some(y)) => cmp_num(x, y).is_some_and(|o| op.holds(o)),
            _ => false,
        },
    })
}

/// int64 arithmetic as C with overflow an error: truncating division, remainder with the dividend's sign.
fn int_arith(op: ArithOp, a: i64, b: i64) -> R<'static> {
    let r = match op {
        ArithOp::Add => a.checked_add(b),
        ArithOp::Sub => a.checked_sub(b),
        ArithOp::Mul => a.checked_mul(b),
        ArithOp::Div => {
            if b == 0 {
                None
            } else {
                a.checked_div(b)
            }
        }
        ArithOp::Rem => {
            if b == 0 {
                None
            } else {
                // MIN % -1 is 0 (Rust's checked_rem calls it an overflow).
                Some(a.checked_rem(b).unwrap_or(0))
            }
        }
    };
    r.map(V::Int).ok_or(())
}

/// sql92 arithmetic: NULL with a NULL operand; int with int as bmq; with a float, Python's float arithmetic.
/// The result never borrows (it is a number or NULL).
fn sql_arith(op: ArithOp, a: V<'_>, b: V<'_>) -> R<'static> {
    let na = as_num(a);
    let nb = as_num(b);
    if (na.is_none() && !matches!(a, V::Null)) || (nb.is_none() && !matches!(b, V::Null)) {
        return Err(());
    }
    let (Some(x), Some(y)) = (na, nb) else {
        return Ok(V::Null);
    };
    let zero = match y {
        Num::I(i) => i == 0,
        Num::F(f) => f == 0.0,
    };
    if op == ArithOp::Div && zero {
        return Err(());
    }
    match (x, y) {
        (Num::I(x), Num::I(y)) => int_arith(op, x, y),
        _ => {
            let f = |n: Num| match n {
                Num::I(i) => i as f64,
                Num::F(f) => f,
            };
            let (x, y) = (f(x), f(y));
            Ok(V::Float(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div => x / y,
                ArithOp::Rem => return Err(()),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(sql: bool, node: Node) -> NodeSpec {
        NodeSpec { sql, node }
    }

    fn batch_of(plan: &Plan, records: &[&[(&str, Option<&str>)]]) -> Batch {
        let mut batch = Batch::default();
        for record in records {
            for (name, value) in record.iter() {
                if let Some(i) = plan.names().iter().position(|n| n == name) {
                    batch.push_header(i as u32, value.map(str::as_bytes));
                }
            }
            batch.end_record();
        }
        batch
    }

    fn run(plan: &Plan, records: &[&[(&str, Option<&str>)]]) -> Vec<Vec<u32>> {
        plan.match_batch(&batch_of(plan, records))
    }

    /// Slots: 0 = a:int, 1 = c:float, 2 = s:string. Nodes: a, 5, a == 5 (bmq); c, 1.5, c > 1.5 (sql92);
    /// a / 0 == 5 (an error); s (sql92), NULL test.
    fn sample_props() -> Vec<(String, PropType)> {
        vec![
            ("a".to_string(), PropType::Int),
            ("c".to_string(), PropType::Float),
            ("s".to_string(), PropType::Str),
        ]
    }

    fn sample_specs() -> Vec<NodeSpec> {
        vec![
            node(false, Node::Prop(0)),                   // 0
            node(false, Node::Int(5)),                    // 1
            node(false, Node::Cmp(CmpOp::Eq, 0, 1)),      // 2: a == 5
            node(true, Node::Prop(1)),                    // 3
            node(true, Node::Float(1.5)),                 // 4
            node(true, Node::Cmp(CmpOp::Gt, 3, 4)),       // 5: c > 1.5
            node(false, Node::Int(0)),                    // 6
            node(false, Node::Arith(ArithOp::Div, 0, 6)), // 7: a / 0
            node(false, Node::Cmp(CmpOp::Eq, 7, 1)),      // 8: a / 0 == 5
            node(true, Node::Prop(2)),                    // 9
            node(true, Node::IsNull(9, false)),           // 10: s IS NULL
        ]
    }

    fn sample(gated: bool) -> Plan {
        let subs = if gated {
            vec![
                SubSpec {
                    gate: GateSpec::Eq {
                        slot: 0,
                        keys: vec![Key::Int(5)],
                    },
                    residual: vec![],
                    opens: None,
                    requires: None,
                },
                SubSpec {
                    gate: GateSpec::Range {
                        slot: 1,
                        op: CmpOp::Gt,
                        bound: Num::F(1.5),
                    },
                    residual: vec![],
                    opens: None,
                    requires: None,
                },
                SubSpec {
                    gate: GateSpec::None,
                    residual: vec![8],
                    opens: None,
                    requires: None,
                },
                SubSpec {
                    gate: GateSpec::None,
                    residual: vec![10, 2],
                    opens: None,
                    requires: None,
                },
            ]
        } else {
            [2, 5, 8]
                .iter()
                .map(|&n| SubSpec {
                    gate: GateSpec::None,
                    residual: vec![n],
                    opens: None,
                    requires: None,
                })
                .chain([SubSpec {
                    gate: GateSpec::None,
                    residual: vec![10, 2],
                    opens: None,
                    requires: None,
                }])
                .collect()
        };
        Plan::build(&sample_props(), sample_specs(), &subs).expect("a valid plan")
    }

    #[test]
    fn gated_and_ungated_plans_agree() {
        let records: &[&[(&str, Option<&str>)]] = &[
            &[("a", Some("5"))],
            &[("a", Some("05")), ("c", Some("1.5000001"))],
            &[("a", Some("5")), ("s", Some("x"))],
            &[("a", Some("5")), ("a", None), ("c", Some("nan"))],
            &[("c", Some("+nan"))],
            &[("c", Some("2")), ("a", Some("x"))],
            &[],
        ];
        let expected = vec![
            vec![0, 3],
            vec![0, 1, 3],
            vec![0],
            vec![],
            vec![],
            vec![1],
            vec![],
        ];
        assert_eq!(run(&sample(true), records), expected);
        assert_eq!(run(&sample(false), records), expected);
    }

    #[test]
    fn each_group_is_indexed_apart_and_probed_once_open() {
        // Sub 0 (a == 5, gated) opens group 0, sub 1 (c > 1.5, gated) opens group 1. Subs 2 and 3 (a == 5)
        // and 4 and 5 (c > 1.5) are gated alike in both groups' parts; sub 6 (s IS NULL, ungated) requires
        // group 1.
        let eq = || GateSpec::Eq {
            slot: 0,
            keys: vec![Key::Int(5)],
        };
        let range = || GateSpec::Range {
            slot: 1,
            op: CmpOp::Gt,
            bound: Num::F(1.5),
        };
        let sub = |gate: GateSpec, residual: Vec<usize>, opens, requires| SubSpec {
            gate,
            residual,
            opens,
            requires,
        };
        let subs = vec![
            sub(eq(), vec![], Some(0), None),
            sub(range(), vec![], Some(1), None),
            sub(eq(), vec![], None, Some(0)),
            sub(eq(), vec![], None, Some(1)),
            sub(range(), vec![], None, Some(0)),
            sub(range(), vec![], None, Some(1)),
            sub(GateSpec::None, vec![10], None, Some(1)),
        ];
        let plan = Plan::build(&sample_props(), sample_specs(), &subs).expect("a valid plan");
        let records: &[&[(&str, Option<&str>)]] = &[
            &[("a", Some("5")), ("c", Some("2"))],
            &[("a", Some("5")), ("c", Some("1"))],
            &[("a", Some("4")), ("c", Some("2"))],
            &[("a", Some("4")), ("c", Some("1")), ("s", Some("x"))],
        ];
        let expected = vec![vec![0, 1, 2, 3, 4, 5, 6], vec![0, 2], vec![1, 5, 6], vec![]];
        assert_eq!(run(&plan, records), expected);
        // In a batch long enough to ask ahead, the two passes match as one record at a time does.
        let long: Vec<_> = (0..10).flat_map(|_| records.iter().copied()).collect();
        let repeated: Vec<Vec<u32>> = (0..10).flat_map(|_| expected.iter().cloned()).collect();
        assert_eq!(run(&plan, &long), repeated);
        let batch = batch_of(&plan, &long);
        let (two_passes, one_by_one) = (
            plan.match_all(&batch, true),
            plan.match_one_by_one(&batch, true),
        );
        assert_eq!(two_passes.decoded, one_by_one.decoded);
        assert!((0..long.len()).all(|r| two_passes.record(r) == one_by_one.record(r)));
        // Only the open groups' subscriptions are listed: none of a closed group's is even looked at.
        let listed: Vec<usize> = (plan.candidate_counts(&batch_of(&plan, records)).iter())
            .map(|c| c.0)
            .collect();
        assert_eq!(listed, vec![7, 2, 3, 0]);
    }

    #[test]
    fn keyed_tables_find_every_key_and_no_other() {
        let cand = |sub: u32| Cand {
            sub,
            opens: NO_GROUP,
            len: 0,
            conjuncts: [0; INLINE],
        };
        // Keys that share home slots (multiples of a power of two), each with one to three candidates.
        let ints: Vec<(u64, Vec<Cand>)> = (0..300u32)
            .map(|i| {
                (
                    u64::from(i) << 20,
                    (0..=i % 3).map(|j| cand(i * 3 + j)).collect(),
                )
            })
            .collect();
        let table = Keyed::build(ints.clone());
        for (key, cands) in &ints {
            let subs: Vec<u32> = table.get(key).iter().map(|c| c.sub).collect();
            assert_eq!(subs, cands.iter().map(|c| c.sub).collect::<Vec<_>>());
        }
        assert!(table.get(&1).is_empty() && table.get(&(301 << 20)).is_empty());
        let strs: Vec<(Vec<u8>, Vec<Cand>)> = (0..300u32)
            .map(|i| (format!("r{i}").into_bytes(), vec![cand(i)]))
            .collect();
        let table = Keyed::build(strs);
        for i in 0..300u32 {
            let subs: Vec<u32> = (table.get(format!("r{i}").as_bytes()).iter())
                .map(|c| c.sub)
                .collect();
            assert_eq!(subs, vec![i]);
        }
        assert!(table.get(b"r300").is_empty() && table.get(b"").is_empty());
        assert!(Keyed::<u64>::build(vec![]).get(&0).is_empty());
    }

    #[test]
    fn residuals_longer_than_inline_are_read_from_the_spill() {
        // a == 5 && c > 1.5 && s IS NULL (three conjuncts, spilled) beside two and none (inline).
        let sub = |residual: Vec<usize>| SubSpec {
            gate: GateSpec::None,
            residual,
            opens: None,
            requires: None,
        };
        let subs = [
            sub(vec![2, 5, 10]),
            sub(vec![10, 2]),
            sub(vec![]),
            sub(vec![5, 2, 10]),
        ];
        let plan = Plan::build(&sample_props(), sample_specs(), &subs).expect("a valid plan");
        let records: &[&[(&str, Option<&str>)]] = &[
            &[("a", Some("5")), ("c", Some("2"))],
            &[("a", Some("5")), ("c", Some("1"))],
            &[("a", Some("5")), ("c", Some("2")), ("s", Some("x"))],
        ];
        let expected = vec![vec![0, 1, 2, 3], vec![1, 2], vec![2]];
        assert_eq!(run(&plan, records), expected);
    }

    #[test]
    fn required_groups_gate_subscriptions() {
        // Sub 0 (a == 5) opens group 0; sub 1 (c > 1.5) requires it; sub 2 (s IS NULL, a == 5) requires
        // group 1, which nothing opens.
        let mut subs: Vec<SubSpec> = [2, 5, 10]
            .iter()
            .map(|&n| SubSpec {
                gate: GateSpec::None,
                residual: vec![n],
                opens: None,
                requires: None,
            })
            .collect();
        subs[0].opens = Some(0);
        subs[1].requires = Some(0);
        subs[2].requires = Some(1);
        let plan = Plan::build(&sample_props(), sample_specs(), &subs).expect("a valid plan");
        let records: &[&[(&str, Option<&str>)]] = &[
            &[("a", Some("5")), ("c", Some("2"))],
            &[("a", Some("4")), ("c", Some("2"))],
            &[("c", Some("2"))],
        ];
        assert_eq!(run(&plan, records), vec![vec![0, 1], vec![], vec![]]);
        let both = SubSpec {
            gate: GateSpec::None,
            residual: vec![2],
            opens: Some(0),
            requires: Some(1),
        };
        assert!(Plan::build(&sample_props(), sample_specs(), &[both]).is_err());
    }

    #[test]
    fn malformed_specs_are_refused() {
        let props = vec![("a".to_string(), PropType::Int)];
        let refused =
            |specs: Vec<NodeSpec>, subs: &[SubSpec]| Plan::build(&props, specs, subs).is_err();
        assert!(refused(vec![node(false, Node::Not(0))], &[]));
        assert!(refused(vec![node(false, Node::Prop(1))], &[]));
        assert!(refused(vec![node(false, Node::And(vec![]))], &[]));
        let sub = SubSpec {
            gate: GateSpec::None,
            residual: vec![3],
            opens: None,
            requires: None,
        };
        assert!(refused(vec![node(false, Node::Prop(0))], &[sub]));
        assert!(ArithOp::from_symbol("^").is_err() && CmpOp::from_symbol("=").is_err());
        assert_eq!(CmpOp::from_symbol("<="), Ok(CmpOp::Le));
    }

    #[test]
    fn int_arithmetic_is_c_like_and_checked() {
        assert!(matches!(int_arith(ArithOp::Div, -7, 2), Ok(V::Int(-3))));
        assert!(matches!(int_arith(ArithOp::Rem, -7, 2), Ok(V::Int(-1))));
        assert!(matches!(int_arith(ArithOp::Rem, 7, -2), Ok(V::Int(1))));
        assert!(matches!(
            int_arith(ArithOp::Rem, i64::MIN, -1),
            Ok(V::Int(0))
        ));
        assert!(int_arith(ArithOp::Div, i64::MIN, -1).is_err());
        assert!(int_arith(ArithOp::Add, i64::MAX, 1).is_err());
        assert!(int_arith(ArithOp::Rem, 1, 0).is_err());
    }

    #[test]
    fn ints_and_floats_compare_exactly() {
        let two53 = 9_007_199_254_740_992.0;
        assert_eq!(
            cmp_num(Num::I(9_007_199_254_740_993), Num::F(two53)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            cmp_num(Num::I(i64::MAX), Num::F(9_223_372_036_854_775_808.0)),
            Some(Ordering::Less)
        );
        assert_eq!(cmp_num(Num::I(-1), Num::F(-0.5)), Some(Ordering::Less));
        assert_eq!(cmp_num(Num::F(f64::NAN), Num::I(0)), None);
        assert_eq!(num_key(Num::F(-0.0)), Key::NumI(0));
        assert_eq!(num_key(Num::F(0.5)), Key::NumF(0.5f64.to_bits()));
    }
}
