//! A record's body properties, read into the batch before its plan is matched: the properties a route's
//! environments read (each once per record, whichever environments read it), by the format of their body: JSON
//! (`body_json`), plain Avro under the app's writer schema, or Avro in Confluent's wire format under the writer
//! schema of the id in its header (`body_avro`), as `routing/body.py` reads them.

use std::sync::Arc;

use crate::body_avro::{self, Leaf, Reads, Schema};
use crate::body_json::{self, Got, Value};
use crate::plan::{Batch, FxMap, Typed};

/// Confluent's wire format: the magic byte 0, then the writer schema's id (4 bytes, big-endian), then the body.
pub const WIRE_HEADER_BYTES: usize = 5;

/// How the values an environment reads are encoded.
#[derive(Clone, Debug)]
pub enum Source {
    Json,
    /// Plain (schemaless) Avro written with the app's schema.
    Avro(Arc<Schema>),
    /// Avro in Confluent's wire format: the writer schema is the id's (`Schemas`).
    Framed,
}

/// The writer schemas of the ids met so far: registry ids never change their schema, so each is learned once.
pub type Schemas = FxMap<u32, Arc<Schema>>;

/// The schema id of a value in Confluent's wire format (None: its frame is not one), as `body_avro.schema_id`.
pub fn schema_id(value: &[u8]) -> Option<u32> {
    match value {
        [0, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// A property read from record values (`routing/body.py`), the source it is read from (an index into the
/// decider's sources), and the plan slot it fills (None: no entry reads it; only its failures count).
#[derive(Clone, Debug)]
pub struct BodyProperty {
    pub read: body_json::Read,
    pub source: u32,
    pub slot: Option<u32>,
    /// Its name, as the index of a name (shared with header names) its decode failures are counted under.
    pub label: u32,
}

/// The properties of one source a route reads: their indexes (ascending) and their reads in that order (plain
/// Avro: compiled against the app's schema).
#[derive(Clone, Debug)]
struct Part {
    source: u32,
    body: Vec<u32>,
    json: body_json::JsonReads,
    avro: Vec<body_avro::Read>,
    plain: Option<Arc<Reads>>,
}

/// What reading a batch's bodies keeps from record to record: the JSON reader's buffers, the leaves of the last
/// Avro body, and the reads of values in Confluent's wire format compiled against their writer schemas, by
/// (route, part, schema id), made the first time a record of that route carries that id.
#[derive(Default)]
pub struct Scratch<'a> {
    json: body_json::JsonReader,
    leaves: Vec<Leaf<'a>>,
    compiled: FxMap<(u32, u32, u32), Reads>,
}

/// What a route reads from its records' values, by source.
#[derive(Clone, Debug, Default)]
pub struct RouteBodies {
    parts: Vec<Part>,
    framed: bool,
}

impl RouteBodies {
    /// The reads of `body` (indexes into `props`, ascending, each once), grouped by source.
    pub fn new(props: &[BodyProperty], sources: &[Source], body: &[u32]) -> RouteBodies {
        let mut parts: Vec<Part> = Vec::new();
        let mut json: Vec<Vec<body_json::Read>> = Vec::new(); // per part
        for &i in body {
            let prop = &props[i as usize];
            let at = match parts.iter().position(|p| p.source == prop.source) {
                Some(at) => at,
                None => {
                    parts.push(Part {
                        source: prop.source,
                        body: Vec::new(),
                        json: body_json::JsonReads::default(),
                        avro: Vec::new(),
                        plain: None,
                    });
                    json.push(Vec::new());
                    parts.len() - 1
                }
            };
            let part = &mut parts[at];
            part.body.push(i);
            match sources[prop.source as usize] {
                Source::Json => json[at].push(prop.read.clone()),
                Source::Avro(_) | Source::Framed => part.avro.push(body_avro::Read::new(
                    prop.read.tokens.clone(),
                    Some(prop.read.declared),
                )),
            }
        }
        for (part, reads) in parts.iter_mut().zip(json) {
            part.json = body_json::JsonReads::new(reads);
            if let Source::Avro(schema) = &sources[part.source as usize] {
                part.plain = Some(Arc::new(Reads::new(schema, &part.avro)));
            }
        }
        let framed = parts
            .iter()
            .any(|p| matches!(sources[p.source as usize], Source::Framed));
        RouteBodies { parts, framed }
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Whether some value is read in Confluent's wire format (its schema id must be known before it is read).
    pub fn reads_framed(&self) -> bool {
        self.framed
    }

    /// Reads one record's value (None: undecodable without reading it) of route `route` into `batch` (typed
    /// values of their slots) and `failed` (the properties that failed: an undecodable value, or a leaf of the
    /// wrong type). A framed value whose id is not in `schemas` is undecodable: the caller has asked for every
    /// id of the batch.
    #[allow(clippy::too_many_arguments)]
    pub fn read<'a>(
        &self,
        route: u32,
        sources: &'a [Source],
        props: &[BodyProperty],
        schemas: &'a Schemas,
        value: Option<&'a [u8]>,
        batch: &mut Batch,
        failed: &mut Vec<u32>,
        scratch: &mut Scratch<'a>,
    ) {
        let Scratch {
            json,
            leaves,
            compiled,
        } = scratch;
        for (p, part) in self.parts.iter().enumerate() {
            let (schema, body) = match &sources[part.source as usize] {
                Source::Json => {
                    let got = json.read(value, &part.json);
                    for (&i, got) in part.body.iter().zip(got) {
                        match got {
                            Got::Missing => {}
                            Got::Failed => failed.push(i),
                            Got::Found(found) => {
                                if let Some(slot) = props[i as usize].slot {
                                    let typed = match found {
                                        Value::Str(text) => batch.push_str(text),
                                        Value::Int(n) => Typed::Int(*n),
                                        Value::Bool(b) => Typed::Bool(*b),
                                        Value::Float(f) => Typed::Float(*f),
                                    };
                                    batch.typed.push((slot, typed));
                                }
                            }
                        }
                    }
                    continue;
                }
                Source::Avro(schema) => {
                    let plan = part.plain.as_deref().expect("compiled with the route");
                    (Some((&**schema, plan)), value)
                }
                Source::Framed => match value.and_then(|v| Some((v, schema_id(v)?))) {
                    Some((v, id)) => {
                        let found = schemas.get(&id).map(|schema| {
                            let plan = compiled
                                .entry((route, p as u32, id))
                                .or_insert_with(|| Reads::new(schema, &part.avro));
                            (&**schema, &*plan)
                        });
                        (found, Some(&v[WIRE_HEADER_BYTES..]))
                    }
                    None => (None, None),
                },
            };
            let read = match (schema, body) {
                (Some((schema, plan)), Some(body)) => {
                    body_avro::read_planned(schema, plan, &part.avro, body, leaves).is_ok()
                }
                _ => false,
            };
            if !read {
                failed.extend_from_slice(&part.body);
                continue;
            }
            for (&i, &leaf) in part.body.iter().zip(leaves.iter()) {
                if leaf == Leaf::Wrong {
                    failed.push(i);
                }
                let Some(slot) = props[i as usize].slot else {
                    continue;
                };
                let typed = match leaf {
                    Leaf::Missing | Leaf::Wrong => continue,
                    Leaf::Int(n) => Typed::Int(n),
                    Leaf::Float(f) => Typed::Float(f),
                    Leaf::Bool(b) => Typed::Bool(b),
                    Leaf::Str(text) => batch.push_str(text.as_bytes()),
                };
                batch.typed.push((slot, typed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body_avro::Node;
    use crate::decode::PropType;

    fn prop(tokens: &[&str], declared: PropType, source: u32, slot: u32) -> BodyProperty {
        BodyProperty {
            read: body_json::Read {
                tokens: tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
                declared,
            },
            source,
            slot: Some(slot),
            label: slot,
        }
    }

    /// {id: long, name: string}, and {name: string, id: ["null", long]}: two writer schemas of one record.
    fn schemas() -> (Arc<Schema>, Arc<Schema>) {
        let record = |fields: &[(&str, usize)]| {
            Node::Record(fields.iter().map(|(n, c)| (n.to_string(), *c)).collect())
        };
        let first = Schema::new(vec![
            record(&[("id", 1), ("name", 2)]),
            Node::Long,
            Node::String,
        ]);
        let second = Schema::new(vec![
            record(&[("name", 1), ("id", 2)]),
            Node::String,
            Node::Union(vec![3, 4]),
            Node::Null,
            Node::Long,
        ]);
        (Arc::new(first.unwrap()), Arc::new(second.unwrap()))
    }

    #[test]
    fn framed_values_are_read_by_their_ids_schema_and_plain_ones_by_the_apps() {
        let (first, second) = schemas();
        let sources = vec![
            Source::Json,
            Source::Avro(Arc::clone(&first)),
            Source::Framed,
        ];
        let props = vec![
            prop(&["id"], PropType::Int, 1, 0),
            prop(&["name"], PropType::Str, 1, 1),
            prop(&["id"], PropType::Float, 2, 2),
            prop(&["id"], PropType::Int, 0, 3),
        ];
        let bodies = RouteBodies::new(&props, &sources, &[0, 1, 2, 3]);
        assert!(bodies.reads_framed() && !bodies.is_empty());
        let mut schemas = Schemas::default();
        schemas.insert(1, first);
        schemas.insert(2, second);
        // id 5, "ab"; framed under id 1, id 2 (fields the other way round, id a union) and id 3 (unknown)
        let plain = b"\x0a\x04ab".to_vec();
        let frame = |id: u8, body: &[u8]| [&[0, 0, 0, 0, id][..], body].concat();
        let values = [
            plain.clone(),
            frame(1, &plain),
            frame(2, b"\x04ab\x02\x0a"),
            frame(2, b"\x04ab\x00"),
            frame(3, &plain),
            b"\x01\x00\x00\x00\x01\x0a\x04ab".to_vec(),
        ];
        let mut scratch = Scratch::default();
        let mut found = Vec::new();
        for value in &values {
            let mut batch = Batch::default();
            let mut failed = Vec::new();
            bodies.read(
                0,
                &sources,
                &props,
                &schemas,
                Some(value),
                &mut batch,
                &mut failed,
                &mut scratch,
            );
            let slots: Vec<u32> = batch.typed.iter().map(|(slot, _)| *slot).collect();
            found.push((slots, failed));
        }
        assert_eq!(
            found,
            vec![
                (vec![0, 1], vec![2, 3]),   // plain: the framed read fails (magic byte 10)
                (vec![2], vec![0, 1, 3]),   // framed: plain fails (trailing bytes)
                (vec![2], vec![0, 1, 3]),   // id 2: its own field order
                (vec![], vec![0, 1, 3]),    // id 2, id null: missing, not counted
                (vec![], vec![0, 1, 2, 3]), // id 3: undecodable
                (vec![], vec![0, 1, 2, 3]), // magic byte 1: undecodable
            ]
        );
        assert_eq!(scratch.compiled.len(), 2); // one compiled plan per id met
    }
}
