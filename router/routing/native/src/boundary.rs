//! What Python hands over, read by key: one struct per TypedDict of `router/routing/native_boundary.py`, with
//! the same name and keys. `READS` lists them with their keys; the module exports it, and the Python side
//! compares it with its declarations at import, so a module built from other sources fails there by name.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::python::Entry;

/// Declares structures read from Python dicts by key (each field is the key of its name) and `READS`, their
/// names with their keys. `by tag` marks one of a union of structures told apart by the key `tag`, which the
/// reader looks at before it reads the structure (so the struct has no field for it).
macro_rules! read_by_key {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident $(by $tag:ident)? {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
        }
    )*) => {
        $(
            $(#[$meta])*
            #[derive(FromPyObject)]
            #[pyo3(from_item_all)]
            pub struct $name {
                $($(#[$field_meta])* pub $field: $ty,)*
            }
        )*

        /// Every structure read, by name, with its keys.
        pub const READS: &[(&str, &[&str])] =
            &[$((stringify!($name), &[$(stringify!($tag),)? $(stringify!($field)),*])),*];
    };
}

read_by_key! {
    /// A header read as one declared type ("string", "int", "bool", "float"): a plan's property slot, or a
    /// header an environment decodes.
    pub struct TypedHeader {
        pub name: String,
        pub declared: String,
    }

    /// A property read from a JSON record value: its name, the JSON Pointer's reference tokens (UTF-8) and its
    /// declared type.
    pub struct BodyRead {
        pub name: String,
        pub tokens: Vec<Vec<u8>>,
        pub declared: String,
    }

    /// A literal node: the value's Python type follows the tag ("int", "float", "str" bytes, "bool", "null").
    pub struct ValueNode by tag {
        pub sql: bool,
        pub value: Py<PyAny>,
    }

    /// "prop" or "exists" of a slot.
    pub struct PropertyNode by tag {
        pub sql: bool,
        pub slot: usize,
    }

    /// "not", "neg" or "pos".
    pub struct UnaryNode by tag {
        pub sql: bool,
        pub operand: usize,
    }

    pub struct ArithmeticNode by tag {
        pub sql: bool,
        pub op: String,
        pub left: usize,
        pub right: usize,
    }

    pub struct CompareNode by tag {
        pub sql: bool,
        pub op: String,
        pub left: usize,
        pub right: usize,
    }

    /// "and" or "or", flattened.
    pub struct JunctionNode by tag {
        pub sql: bool,
        pub items: Vec<usize>,
    }

    pub struct BetweenNode by tag {
        pub sql: bool,
        pub operand: usize,
        pub low: usize,
        pub high: usize,
        pub negated: bool,
    }

    pub struct InNode by tag {
        pub sql: bool,
        pub operand: usize,
        pub values: Vec<Vec<u8>>,
        pub negated: bool,
    }

    /// The pattern and escape as code points.
    pub struct LikeNode by tag {
        pub sql: bool,
        pub operand: usize,
        pub pattern: Vec<u32>,
        pub escape: Option<u32>,
        pub negated: bool,
    }

    pub struct IsNullNode by tag {
        pub sql: bool,
        pub operand: usize,
        pub negated: bool,
    }

    /// An equality key: kind "int" (bmq), "number" (sql92 int or float), "string" (bytes) or "bool".
    pub struct Key {
        pub kind: String,
        pub value: Py<PyAny>,
    }

    pub struct EqualityGate by kind {
        pub slot: usize,
        pub keys: Vec<Key>,
    }

    /// The bound is an int or a float.
    pub struct RangeGate by kind {
        pub slot: usize,
        pub op: String,
        pub bound: Py<PyAny>,
    }

    pub struct IntervalGate by kind {
        pub slot: usize,
        pub low: i64,
        pub high: i64,
    }

    /// The gate is one of the three gate structures (by its "kind"), or None.
    pub struct EntrySpec {
        pub gate: Option<Py<PyAny>>,
        pub residual: Vec<usize>,
    }

    /// The nodes are node structures (by their "tag").
    pub struct PlanSpec {
        pub slots: Vec<TypedHeader>,
        /// Slots filled from record bodies by the decider, never from headers.
        pub body_slots: Vec<usize>,
        pub nodes: Vec<Py<PyAny>>,
        pub entries: Vec<Py<Entry>>,
        pub opens: Vec<Option<u32>>,
        pub requires: Vec<Option<u32>>,
    }

    pub struct CandidateSpec {
        pub priority: i64,
        pub max_unconfirmed: Option<i64>,
        pub slot: u32,
        pub group: String,
        pub position: Option<u32>,
        /// The `Decision` a record routed by it gets (no message-group key, band 0).
        pub routed: Py<PyAny>,
    }

    /// An app's prebuilt `Decision`s.
    pub struct AppDecisions {
        pub expired: Py<PyAny>,
        pub pending: Py<PyAny>,
        pub waiting_capacity: Py<PyAny>,
        pub waiting_no_consumer: Py<PyAny>,
        pub filtered: Py<PyAny>,
    }

    pub struct AppSpec {
        pub name: Py<PyAny>,
        pub start: u32,
        pub end: u32,
        pub filters: Vec<u32>,
        pub bands: Vec<u32>,
        pub environment: u32,
        pub first_cursor: u32,
        pub fairness: String,
        pub spillover: bool,
        pub presence_required: bool,
        pub group_by: Option<String>,
        pub default_group: Vec<u8>,
        pub expiration_ms: Option<i64>,
        pub candidates: Vec<CandidateSpec>,
        pub decisions: AppDecisions,
    }

    /// The classes and values results are made of: `RouteResult`, `Decision`, `Action.ROUTE`, `Action.PENDING`,
    /// and the waiting reasons.
    pub struct Vocabulary {
        pub result: Py<PyAny>,
        pub decision: Py<PyAny>,
        pub route: Py<PyAny>,
        pub pending: Py<PyAny>,
        pub capacity: Py<PyAny>,
        pub no_consumer: Py<PyAny>,
    }

    /// A property read from record values, the source it is read from (an index into `DeciderSpec::sources`)
    /// and the plan slot it fills (None: only its failures count).
    pub struct BodyProperty {
        pub read: BodyRead,
        pub source: usize,
        pub slot: Option<usize>,
    }

    /// How record values are encoded: "json", or "avro" plain under `schema` (a node table) or, without one,
    /// in Confluent's wire format.
    pub struct BodySource {
        pub format: String,
        pub schema: Option<Vec<AvroNode>>,
    }

    pub struct DeciderSpec {
        pub apps: Vec<AppSpec>,
        pub owner: Vec<u32>,
        pub exact: Vec<bool>,
        pub filter_count: u32,
        pub environments: Vec<Vec<TypedHeader>>,
        /// The sources of body properties, every body property read, and per environment those it reads
        /// (indexes into `body`).
        pub sources: Vec<BodySource>,
        pub body: Vec<BodyProperty>,
        pub bodies: Vec<Vec<u32>>,
        pub expiration_header: String,
        pub vocabulary: Vocabulary,
    }

    pub struct RouteGroup {
        pub environment: u32,
        pub apps: Vec<u32>,
    }

    /// `unconfirmed`: slot -> count; `holders`: app name -> message-group key -> consumer group name.
    pub struct BatchState {
        pub routes: Vec<u32>,
        pub timestamps: Vec<i64>,
        pub now_ms: i64,
        pub unconfirmed: Py<PyDict>,
        pub tracked: Vec<u32>,
        pub cursors: Vec<i64>,
        pub absent: Vec<u32>,
        pub holders: Option<Py<PyDict>>,
        /// Each record's value (bytes or None); None when the decider reads no body.
        pub values: Option<Py<PyList>>,
        /// The writer schema (a node table, None: the registry has none) of a schema id the decider has not
        /// met: called for each such id of the batch's values in Confluent's wire format (None: no such reads).
        pub schemas: Option<Py<PyAny>>,
    }

    /// A writer schema's node: `kind` is an Avro type name; `children` node positions; `names` a record's field
    /// names or an enum's symbols; `size` a fixed's byte count.
    pub struct AvroNode {
        pub kind: String,
        pub size: usize,
        pub children: Vec<usize>,
        pub names: Vec<String>,
    }

    /// A property read from an Avro body: its JSON Pointer's tokens, its declared type (None: the leaf's).
    pub struct AvroRead {
        pub name: String,
        pub tokens: Vec<String>,
        pub declared: Option<String>,
    }
}
