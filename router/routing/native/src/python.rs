//! The Python module `subroute.routing._native`: the plan (`NativePlan`, built from the entries and nodes
//! `router/routing/native_plan.py` lowers) and a table's decider (`NativeDecider`). What Python hands over is
//! read by key (`boundary.rs`); what is made for Python is a class of this module with named attributes, or an
//! object of a Python class whose fields are set by name (`Maker`). The GIL is held only to read and make Python
//! objects; building, evaluating and deciding run with it released.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple, PyType};

use crate::bodies::{self, BodyProperty, Schemas, Source};
use crate::body_avro::Schema as AvroSchema;
use crate::body_json::{self, Got, Value};
use crate::boundary::{
    self, AppSpec as AppIn, ArithmeticNode, AvroNode, BatchState, BetweenNode, BodyRead,
    CompareNode, DeciderSpec, EntrySpec, EqualityGate, InNode, IntervalGate, IsNullNode,
    JunctionNode, LikeNode, PlanSpec, PropertyNode, RangeGate, RouteGroup, UnaryNode, ValueNode,
};
use crate::decide::{
    self, AppSpec, Decided, Decider, Fairness, GroupKey, Made, RecordValue, Route, State, Waiting,
};
use crate::decode::PropType;
use crate::like::LikePattern;
use crate::plan::{
    num_key, ArithOp, Batch, CmpOp, FxMap, GateSpec, Key, Node, NodeSpec, Num, Plan, SubSpec,
};
use crate::prefetch::{prefetch, AHEAD};
use crate::python_avro;

/// The fields of the Python classes made here (`Maker`), by class name: exported as `MAKES` for the check at
/// import. Each is set by name, so their order means nothing.
const RESULT_FIELDS: [&str; 4] = ["routed", "filtered", "evaluation_errors", "decode_errors"];
const DECISION_FIELDS: [&str; 7] = [
    "app",
    "action",
    "group",
    "subscription",
    "key",
    "reason",
    "band",
];

fn item<'py>(obj: &Bound<'py, PyAny>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    obj.get_item(PyString::intern(obj.py(), key))
}

fn declared(name: &str) -> PyResult<PropType> {
    PropType::from_name(name)
        .ok_or_else(|| PyValueError::new_err(format!("bad declared type {name:?}")))
}

/// An int or a float, as a Python number is.
fn number(value: &Bound<'_, PyAny>) -> PyResult<Num> {
    if let Ok(f) = value.cast::<PyFloat>() {
        Ok(Num::F(f.value()))
    } else {
        Ok(Num::I(value.extract()?))
    }
}

fn value_error(message: String) -> PyErr {
    PyValueError::new_err(message)
}

/// A node structure (by its "tag") as the plan's node.
fn node_spec(obj: &Bound<'_, PyAny>) -> PyResult<NodeSpec> {
    let tag: String = item(obj, "tag")?.extract()?;
    let (sql, node) = match tag.as_str() {
        "int" | "float" | "str" | "bool" | "null" => {
            let n: ValueNode = obj.extract()?;
            let value = n.value.bind(obj.py());
            let node = match tag.as_str() {
                "int" => Node::Int(value.extract()?),
                "float" => Node::Float(value.extract()?),
                "str" => Node::Str(value.extract()?),
                "bool" => Node::Bool(value.extract()?),
                _ => Node::Null,
            };
            (n.sql, node)
        }
        "prop" | "exists" => {
            let n: PropertyNode = obj.extract()?;
            let node = if tag == "prop" {
                Node::Prop(n.slot)
            } else {
                Node::Exists(n.slot)
            };
            (n.sql, node)
        }
        "not" | "neg" | "pos" => {
            let n: UnaryNode = obj.extract()?;
            let node = match tag.as_str() {
                "not" => Node::Not(n.operand),
                "neg" => Node::Neg(n.operand),
                _ => Node::Pos(n.operand),
            };
            (n.sql, node)
        }
        "arith" => {
            let n: ArithmeticNode = obj.extract()?;
            let op = ArithOp::from_symbol(&n.op).map_err(value_error)?;
            (n.sql, Node::Arith(op, n.left, n.right))
        }
        "cmp" => {
            let n: CompareNode = obj.extract()?;
            let op = CmpOp::from_symbol(&n.op).map_err(value_error)?;
            (n.sql, Node::Cmp(op, n.left, n.right))
        }
        "and" | "or" => {
            let n: JunctionNode = obj.extract()?;
            let node = if tag == "and" {
                Node::And(n.items)
            } else {
                Node::Or(n.items)
            };
            (n.sql, node)
        }
        "between" => {
            let n: BetweenNode = obj.extract()?;
            (n.sql, Node::Between(n.operand, n.low, n.high, n.negated))
        }
        "in" => {
            let n: InNode = obj.extract()?;
            (n.sql, Node::In(n.operand, n.values, n.negated))
        }
        "like" => {
            let n: LikeNode = obj.extract()?;
            let pattern = Box::new(LikePattern::new(&n.pattern, n.escape));
            (n.sql, Node::Like(n.operand, pattern, n.negated))
        }
        "isnull" => {
            let n: IsNullNode = obj.extract()?;
            (n.sql, Node::IsNull(n.operand, n.negated))
        }
        other => return Err(value_error(format!("unknown node tag {other:?}"))),
    };
    Ok(NodeSpec { sql, node })
}

/// An equality key by its kind.
fn key(k: &boundary::Key, py: Python<'_>) -> PyResult<Key> {
    let value = k.value.bind(py);
    Ok(match k.kind.as_str() {
        "int" => Key::Int(value.extract()?),
        "number" => match number(value)? {
            Num::I(i) => Key::NumI(i),
            f => num_key(f),
        },
        "string" => Key::Str(value.extract()?),
        "bool" => Key::Bool(value.extract()?),
        other => return Err(value_error(format!("bad key kind {other:?}"))),
    })
}

/// A gate structure (by its "kind") as the plan's gate; None is no gate.
fn gate_spec(gate: Option<&Bound<'_, PyAny>>) -> PyResult<GateSpec> {
    let Some(obj) = gate.filter(|g| !g.is_none()) else {
        return Ok(GateSpec::None);
    };
    let kind: String = item(obj, "kind")?.extract()?;
    Ok(match kind.as_str() {
        "equality" => {
            let g: EqualityGate = obj.extract()?;
            let keys = g.keys.iter().map(|k| key(k, obj.py()));
            GateSpec::Eq {
                slot: g.slot,
                keys: keys.collect::<PyResult<_>>()?,
            }
        }
        "range" => {
            let g: RangeGate = obj.extract()?;
            let op = CmpOp::from_symbol(&g.op).map_err(value_error)?;
            if matches!(op, CmpOp::Eq | CmpOp::Ne) {
                return Err(value_error(format!("bad range operator {:?}", g.op)));
            }
            GateSpec::Range {
                slot: g.slot,
                op,
                bound: number(g.bound.bind(obj.py()))?,
            }
        }
        "interval" => {
            let g: IntervalGate = obj.extract()?;
            GateSpec::Interval {
                slot: g.slot,
                low: g.low,
                high: g.high,
            }
        }
        other => return Err(value_error(format!("bad gate kind {other:?}"))),
    })
}

/// Objects of one Python class made field by field, by name, without calling its `__init__` (which, run for
/// each record, would cost more than deciding it). `router/routing/native_boundary.py` checks at import that
/// the class has exactly the fields set here (`MAKES`) and no `__post_init__`. Fields are set as
/// `object.__setattr__` sets them, so a frozen dataclass is made as its own `__init__` makes it.
pub(crate) struct Maker {
    /// `object.__new__` and its argument, the class.
    new: Py<PyAny>,
    args: Py<PyTuple>,
}

impl Maker {
    pub(crate) fn new(cls: &Bound<'_, PyAny>) -> PyResult<Maker> {
        let py = cls.py();
        let cls = cls.cast::<PyType>()?;
        let object = py.get_type::<PyAny>();
        Ok(Maker {
            new: object.getattr("__new__")?.unbind(),
            args: PyTuple::new(py, [cls])?.unbind(),
        })
    }

    pub(crate) fn make<'py>(
        &self,
        py: Python<'py>,
        fields: &[(&Py<PyString>, &Bound<'py, PyAny>)],
    ) -> PyResult<Bound<'py, PyAny>> {
        let made = self.new.bind(py).call1(self.args.bind(py))?;
        for (name, value) in fields {
            // SAFETY: both pointers are live objects held by the caller, and the GIL is held (`py`).
            let status = unsafe {
                ffi::PyObject_GenericSetAttr(made.as_ptr(), name.as_ptr(), value.as_ptr())
            };
            if status < 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(made)
    }
}

/// The interned names of `RESULT_FIELDS` and `DECISION_FIELDS`.
struct FieldNames {
    routed: Py<PyString>,
    filtered: Py<PyString>,
    evaluation_errors: Py<PyString>,
    decode_errors: Py<PyString>,
    app: Py<PyString>,
    action: Py<PyString>,
    group: Py<PyString>,
    subscription: Py<PyString>,
    key: Py<PyString>,
    reason: Py<PyString>,
    band: Py<PyString>,
}

impl FieldNames {
    fn new(py: Python<'_>) -> FieldNames {
        let name = |n: &str| PyString::intern(py, n).unbind();
        FieldNames {
            routed: name(RESULT_FIELDS[0]),
            filtered: name(RESULT_FIELDS[1]),
            evaluation_errors: name(RESULT_FIELDS[2]),
            decode_errors: name(RESULT_FIELDS[3]),
            app: name(DECISION_FIELDS[0]),
            action: name(DECISION_FIELDS[1]),
            group: name(DECISION_FIELDS[2]),
            subscription: name(DECISION_FIELDS[3]),
            key: name(DECISION_FIELDS[4]),
            reason: name(DECISION_FIELDS[5]),
            band: name(DECISION_FIELDS[6]),
        }
    }
}

/// One subscription lowered: its gate and residual, without its groups. Made once from Python and shared by
/// every plan that holds the subscription, so a rebuild hands over an object per subscription instead of
/// converting its keys and residual again with the GIL held.
#[pyclass(frozen, module = "subroute.routing._native")]
pub struct Entry {
    gate: GateSpec,
    residual: Vec<usize>,
}

#[pymethods]
impl Entry {
    /// From an `EntrySpec`.
    #[new]
    fn new(spec: &Bound<'_, PyAny>) -> PyResult<Entry> {
        let entry: EntrySpec = spec.extract()?;
        let gate = gate_spec(entry.gate.as_ref().map(|g| g.bind(spec.py())))?;
        Ok(Entry {
            gate,
            residual: entry.residual,
        })
    }

    /// The gate's kind: "equality", "range", "interval", or None (evaluated for every record).
    #[getter]
    fn kind(&self) -> Option<&'static str> {
        match self.gate {
            GateSpec::None => None,
            GateSpec::Eq { .. } => Some("equality"),
            GateSpec::Range { .. } => Some("range"),
            GateSpec::Interval { .. } => Some("interval"),
        }
    }
}

/// Per record, the matched entries and those whose evaluation ended in an error (ascending positions).
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
struct Matches {
    matched: Vec<Vec<u32>>,
    errors: Vec<Vec<u32>>,
}

/// Per record, how many entries the indexes listed and how many of those were evaluated.
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
struct Candidates {
    listed: Vec<usize>,
    evaluated: Vec<usize>,
}

/// A compiled plan (`PlanSpec`).
#[pyclass(frozen, module = "subroute.routing._native")]
struct NativePlan {
    plan: Arc<Plan>,
    names: FxMap<String, u32>,
}

#[pymethods]
impl NativePlan {
    /// Only reading the spec holds the GIL: checking and building run without it.
    #[new]
    fn new(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<NativePlan> {
        let spec: PlanSpec = spec.extract()?;
        if spec.opens.len() != spec.entries.len() || spec.requires.len() != spec.entries.len() {
            return Err(PyValueError::new_err(
                "opens and requires are aligned with the entries",
            ));
        }
        let props = spec
            .slots
            .iter()
            .map(|s| Ok((s.name.clone(), declared(&s.declared)?)))
            .collect::<PyResult<Vec<_>>>()?;
        let nodes = spec
            .nodes
            .iter()
            .map(|n| node_spec(n.bind(py)))
            .collect::<PyResult<Vec<_>>>()?;
        let entries = spec.entries;
        let (opens, requires, body_slots) = (spec.opens, spec.requires, spec.body_slots);
        let plan = py
            .detach(|| {
                let subs: Vec<SubSpec> = entries
                    .iter()
                    .zip(opens.iter().zip(&requires))
                    .map(|(entry, (&opens, &requires))| {
                        let entry = entry.get();
                        SubSpec {
                            gate: entry.gate.clone(),
                            residual: entry.residual.clone(),
                            opens,
                            requires,
                        }
                    })
                    .collect();
                Plan::build_with_body(&props, &body_slots, nodes, &subs)
            })
            .map_err(PyValueError::new_err)?;
        let names = plan
            .names()
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        Ok(NativePlan {
            plan: Arc::new(plan),
            names,
        })
    }

    /// For each record (its headers, or None), the ascending positions of the entries it matches.
    fn match_batch(&self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
        let batch = read_batch(&self.names, records)?;
        let plan = Arc::clone(&self.plan);
        Ok(py.detach(move || plan.match_batch(&batch)))
    }

    /// `match_batch` with, per record, also the entries whose evaluation ended in an error.
    fn match_batch_with_errors(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<Matches> {
        let batch = read_batch(&self.names, records)?;
        let plan = Arc::clone(&self.plan);
        let outcomes = py.detach(move || plan.match_batch_with_errors(&batch, true));
        let (matched, errors) = outcomes.into_iter().unzip();
        Ok(Matches { matched, errors })
    }

    /// For each record, how many entries the indexes listed and how many of those were evaluated (the
    /// benchmarks report them).
    fn candidate_counts(&self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<Candidates> {
        let batch = read_batch(&self.names, records)?;
        let plan = Arc::clone(&self.plan);
        let (listed, evaluated) = py
            .detach(move || plan.candidate_counts(&batch))
            .into_iter()
            .unzip();
        Ok(Candidates { listed, evaluated })
    }

    /// How the entries are reached (unindexed, indexed_equality, indexed_range, indexed_interval), memoized
    /// nodes and nodes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.plan.stats();
        let out = PyDict::new(py);
        out.set_item("unindexed", s.unindexed)?;
        out.set_item("indexed_equality", s.indexed_equality)?;
        out.set_item("indexed_range", s.indexed_range)?;
        out.set_item("indexed_interval", s.indexed_interval)?;
        out.set_item("memoized", s.memoized)?;
        out.set_item("nodes", s.nodes)?;
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.plan.subscription_count()
    }
}

/// The headers of `records` whose names are in `names` (by index), copied into one batch.
fn read_batch(names: &FxMap<String, u32>, records: &Bound<'_, PyAny>) -> PyResult<Batch> {
    let mut batch = Batch::default();
    let count = records.len().unwrap_or(0);
    batch.records.reserve(count);
    for (r, record) in records.try_iter()?.enumerate() {
        let record = record?;
        if !record.is_none() {
            for header in record.try_iter()? {
                let header = header?;
                let pair = header.cast::<PyTuple>()?;
                if pair.len() != 2 {
                    return Err(PyValueError::new_err("a header is a (name, value) pair"));
                }
                let name_obj = pair.get_item(0)?;
                let name = name_obj.cast::<PyString>()?;
                // Headers the plan does not read are neither copied nor decoded.
                let Some(&index) = names.get(name.to_str()?) else {
                    continue;
                };
                let value = pair.get_item(1)?;
                if value.is_none() {
                    batch.push_header(index, None);
                } else {
                    batch.push_header(index, Some(value.cast::<PyBytes>()?.as_bytes()));
                }
            }
        }
        batch.end_record();
        if r == 0 {
            // Room for the batch as if every record were the first: grown by doubling instead, the lists are
            // copied a dozen times over a 2,000-record batch, each time into memory not yet in the caches.
            batch.reserve_like_first(count);
        }
    }
    Ok(batch)
}

/// An app's Python objects, which its decisions are made of.
struct AppObjects {
    name: Py<PyAny>,
    expired: Py<PyAny>,
    pending: Py<PyAny>,
    capacity: Py<PyAny>,
    no_consumer: Py<PyAny>,
    filtered: Py<PyAny>,
    default_group: Py<PyBytes>,
    /// Per candidate: its routed decision, group and label.
    routed: Vec<(Py<PyAny>, Py<PyAny>, Py<PyAny>)>,
    /// Its groups' (app, group) slots by group name: where a message group's holder, named, is.
    group_slots: FxMap<String, u32>,
}

/// The filtered decisions of a set of apps, made once (a workload has few such sets).
#[derive(Default)]
struct Filtered {
    tuples: FxMap<Vec<u32>, Py<PyTuple>>,
}

/// What results are made of: the makers of `RouteResult` and `Decision`, the field names, two actions and the
/// two waiting reasons (`Vocabulary`).
struct Making {
    result: Maker,
    decision: Maker,
    fields: FieldNames,
    route: Py<PyAny>,
    pending: Py<PyAny>,
    capacity: Py<PyAny>,
    no_consumer: Py<PyAny>,
}

/// What one `NativeDecider.decide` did: how many records it decided (fewer than given: the record there needs
/// `Router.route`, and the state here is after the ones decided), their results, and the state it moved: each
/// moved cursor's value, the records routed to each slot, and each keyed record's placement in order (three
/// aligned lists: app name, message-group key, consumer group name).
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
struct BatchOutcome {
    decided: usize,
    results: Py<PyList>,
    moved: Py<PyDict>,
    routed: Py<PyDict>,
    held_apps: Py<PyList>,
    held_keys: Py<PyList>,
    held_groups: Py<PyList>,
}

/// A table's decisions (decide.rs): built once with the table (`DeciderSpec`), then one call per batch decides
/// every record with the GIL released, as `Router.route` would one by one.
#[pyclass(frozen, module = "subroute.routing._native")]
struct NativeDecider {
    plan: Arc<Plan>,
    names: FxMap<String, u32>,
    /// Each name by its index: the property label of decode failures.
    labels: Vec<Py<PyString>>,
    decider: Arc<Decider>,
    apps: Vec<AppObjects>,
    making: Making,
    /// Copied on write: a batch takes the list without holding a lock while it runs.
    routes: Mutex<Arc<Vec<Route>>>,
    filtered: Mutex<Filtered>,
    /// The writer schemas of the schema ids met in values in Confluent's wire format (copied on write, as
    /// `routes`): each asked for once (`BatchState::schemas`); an id the registry lacked is asked again by the
    /// next batch that holds it.
    schemas: Mutex<Arc<Schemas>>,
}

#[pymethods]
impl NativeDecider {
    /// The decider of the apps in `spec` on `plan`.
    #[new]
    fn new(
        py: Python<'_>,
        plan: &Bound<'_, NativePlan>,
        spec: &Bound<'_, PyAny>,
    ) -> PyResult<NativeDecider> {
        let spec: DeciderSpec = spec.extract()?;
        let plan = plan.get();
        let mut names = plan.names.clone();
        let name_of = |name: &str, names: &mut FxMap<String, u32>| -> u32 {
            let next = names.len() as u32;
            *names.entry(name.to_owned()).or_insert(next)
        };
        let expiration = name_of(&spec.expiration_header, &mut names);
        let mut typed: Vec<Vec<(u32, PropType)>> = Vec::new();
        for env in &spec.environments {
            let mut out = Vec::new();
            for header in env {
                out.push((
                    name_of(&header.name, &mut names),
                    declared(&header.declared)?,
                ));
            }
            typed.push(out);
        }
        let mut specs = Vec::with_capacity(spec.apps.len());
        let mut objects = Vec::with_capacity(spec.apps.len());
        for app in spec.apps {
            let AppIn {
                name,
                start,
                end,
                filters,
                bands,
                environment,
                first_cursor,
                fairness,
                spillover,
                presence_required,
                group_by,
                default_group,
                expiration_ms,
                candidates,
                decisions,
            } = app;
            let fairness = match fairness.as_str() {
                "round-robin" => Fairness::RoundRobin,
                "proportional" => Fairness::Proportional,
                "fast" => Fairness::Fast,
                other => return Err(value_error(format!("bad fairness {other:?}"))),
            };
            let mut cands = Vec::with_capacity(candidates.len());
            let mut routed = Vec::with_capacity(candidates.len());
            let mut group_slots = FxMap::default();
            for c in candidates {
                group_slots.insert(c.group.clone(), c.slot);
                cands.push(decide::Candidate {
                    priority: c.priority,
                    max_unconfirmed: c.max_unconfirmed,
                    slot: c.slot,
                    group_hash: decide::stable_hash(c.group.as_bytes()),
                    position: c.position,
                });
                let decision = c.routed.bind(py);
                routed.push((
                    c.routed.clone_ref(py),
                    decision.getattr("group")?.unbind(),
                    decision.getattr("subscription")?.unbind(),
                ));
            }
            objects.push(AppObjects {
                name,
                expired: decisions.expired,
                pending: decisions.pending,
                capacity: decisions.waiting_capacity,
                no_consumer: decisions.waiting_no_consumer,
                filtered: decisions.filtered,
                default_group: PyBytes::new(py, &default_group).unbind(),
                routed,
                group_slots,
            });
            specs.push(AppSpec {
                span: (start, end),
                filters,
                candidates: cands,
                fairness,
                spillover,
                presence_required,
                group_by: group_by.map(|g| name_of(&g, &mut names)),
                default_group,
                expiration_ms,
                bands,
                env: environment,
                cursor_base: first_cursor,
            });
        }
        let mut env_types = Vec::with_capacity(typed.len());
        for env in typed {
            let mut dense = vec![None; names.len()];
            for (name, t) in env {
                dense[name as usize] = Some(t);
            }
            env_types.push(dense);
        }
        let sources = spec
            .sources
            .into_iter()
            .map(|s| match (s.format.as_str(), s.schema) {
                ("json", None) => Ok(Source::Json),
                ("avro", None) => Ok(Source::Framed),
                ("avro", Some(nodes)) => Ok(Source::Avro(Arc::new(python_avro::schema(nodes)?))),
                (other, _) => Err(value_error(format!("bad body source {other:?}"))),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let body = spec
            .body
            .iter()
            .map(|p| {
                Ok(BodyProperty {
                    read: body_json::Read {
                        tokens: p.read.tokens.clone(),
                        declared: declared(&p.read.declared)?,
                    },
                    source: p.source as u32,
                    slot: p.slot.map(|s| s as u32),
                    label: name_of(&p.read.name, &mut names),
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let decider = Decider::new(
            specs,
            spec.owner,
            spec.exact,
            spec.filter_count,
            env_types,
            sources,
            body,
            spec.bodies,
            Some(expiration),
        )
        .map_err(PyValueError::new_err)?;
        let words = spec.vocabulary;
        let making = Making {
            result: Maker::new(words.result.bind(py))?,
            decision: Maker::new(words.decision.bind(py))?,
            fields: FieldNames::new(py),
            route: words.route,
            pending: words.pending,
            capacity: words.capacity,
            no_consumer: words.no_consumer,
        };
        // Indexes are dense (`name_of` numbers each new name by the count so far).
        let mut by_index: Vec<(&String, u32)> = names.iter().map(|(n, &i)| (n, i)).collect();
        by_index.sort_unstable_by_key(|&(_, i)| i);
        let labels = by_index
            .into_iter()
            .map(|(name, _)| PyString::new(py, name).unbind())
            .collect();
        Ok(NativeDecider {
            plan: Arc::clone(&plan.plan),
            names,
            labels,
            decider: Arc::new(decider),
            apps: objects,
            making,
            routes: Mutex::new(Arc::new(Vec::new())),
            filtered: Mutex::new(Filtered::default()),
            schemas: Mutex::new(Arc::new(Schemas::default())),
        })
    }

    /// Register the apps a record of one topic is routed for (`[RouteGroup]`); returns its route index.
    fn add_route(&self, groups: Vec<RouteGroup>) -> PyResult<usize> {
        let groups = groups
            .into_iter()
            .map(|g| (g.environment, g.apps))
            .collect();
        let route = self.decider.route(groups).map_err(PyValueError::new_err)?;
        let mut routes = self.routes.lock().map_err(|_| poisoned())?;
        let mut next = Vec::clone(&routes);
        next.push(route);
        *routes = Arc::new(next);
        Ok(routes.len() - 1)
    }

    /// Decide the records (each its headers, or None) in order, with `state` (`BatchState`).
    fn decide<'py>(
        &self,
        py: Python<'py>,
        records: &Bound<'py, PyAny>,
        state: &Bound<'py, PyAny>,
    ) -> PyResult<BatchOutcome> {
        let given: BatchState = state.extract()?;
        let mut batch = read_batch(&self.names, records)?;
        let decider = Arc::clone(&self.decider);
        let mut state = State::new(decider.slot_count, decider.cursor_count);
        if given.cursors.len() != decider.cursor_count {
            return Err(PyValueError::new_err("one value per cursor"));
        }
        state.cursors = given.cursors;
        for (slot, count) in given.unconfirmed.bind(py).iter() {
            let s: usize = slot.extract()?;
            if s >= decider.slot_count {
                return Err(PyValueError::new_err("bad slot"));
            }
            state.counts[s] = count.extract()?;
        }
        for slot in given.tracked {
            match state.tracked.get_mut(slot as usize) {
                Some(t) => *t = true,
                None => return Err(PyValueError::new_err("bad slot")),
            }
        }
        for slot in given.absent {
            if let Some(a) = state.absent.get_mut(slot as usize) {
                *a = true;
            }
        }
        let all_routes = Arc::clone(&*self.routes.lock().map_err(|_| poisoned())?);
        let routes = given.routes;
        // Kept until the batch is decided: `values` points into these objects' buffers.
        let (owners, values) = match &given.values {
            Some(values) => record_values(values.bind(py), &all_routes, &routes)?,
            None => (Vec::new(), Vec::new()),
        };
        let schemas = match &given.schemas {
            Some(ask) => self.learn_schemas(ask.bind(py), &values, &all_routes, &routes)?,
            None => Arc::clone(&*self.schemas.lock().map_err(|_| poisoned())?),
        };
        if let Some(holders) = &given.holders {
            state.holding = true;
            self.look_up_holders(holders.bind(py), &batch, &all_routes, &routes, &mut state)?;
        }
        let plan = Arc::clone(&self.plan);
        let (timestamps, now_ms) = (given.timestamps, given.now_ms);
        let (decided, state) = py.detach(move || {
            let values: Vec<RecordValue<'_>> = values.iter().map(|v| v.get()).collect();
            let failures = decider.read_bodies(&mut batch, &all_routes, &routes, &values, &schemas);
            let matches = plan.match_all(&batch, true);
            let decided = decider.decide(
                &batch,
                &failures,
                &matches,
                &all_routes,
                &routes,
                &timestamps,
                now_ms,
                &mut state,
            );
            (decided.map(|d| (d, batch)), state)
        });
        drop(owners); // the values were read
        let (decided, batch) = decided.map_err(PyValueError::new_err)?;
        let results = self.results(py, &decided, &batch.bytes)?;
        let moved = PyDict::new(py);
        for (cursor, _) in state.moved.iter().enumerate().filter(|(_, m)| **m) {
            moved.set_item(cursor, state.cursors[cursor])?;
        }
        let routed = PyDict::new(py);
        for (slot, count) in state.routed.iter().enumerate().filter(|(_, n)| **n > 0) {
            routed.set_item(slot, count)?;
        }
        let (held_apps, held_keys, held_groups) =
            (PyList::empty(py), PyList::empty(py), PyList::empty(py));
        for &(app, key, candidate) in &state.placed {
            let objs = &self.apps[app as usize];
            held_apps.append(objs.name.bind(py))?;
            held_keys.append(match key {
                GroupKey::Header(s, e) => PyBytes::new(py, &batch.bytes[s..e]),
                GroupKey::Default => objs.default_group.bind(py).clone(),
            })?;
            held_groups.append(objs.routed[candidate as usize].1.bind(py))?;
        }
        Ok(BatchOutcome {
            decided: decided.records.len(),
            results: results.unbind(),
            moved: moved.unbind(),
            routed: routed.unbind(),
            held_apps: held_apps.unbind(),
            held_keys: held_keys.unbind(),
            held_groups: held_groups.unbind(),
        })
    }
}

/// A record's value as `RecordValue`, its bytes borrowed from a Python `bytes` object without a copy, to be read
/// with the GIL released.
#[derive(Clone, Copy)]
enum Borrowed {
    Unread,
    Undecodable,
    Bytes(*const u8, usize),
}

// SAFETY: a `Bytes` points into the buffer of a Python `bytes` object, which is immutable and which the batch
// holds a reference to (`record_values`' owners) until it is decided, so reading it from another thread, and
// without the GIL, is sound.
unsafe impl Send for Borrowed {}

impl Borrowed {
    fn get(&self) -> RecordValue<'_> {
        match *self {
            Borrowed::Unread => RecordValue::Unread,
            Borrowed::Undecodable => RecordValue::Undecodable,
            // SAFETY: see `impl Send for Borrowed`: the object outlives the batch, and its buffer holds `len`
            // bytes.
            Borrowed::Bytes(data, len) => {
                RecordValue::Bytes(unsafe { std::slice::from_raw_parts(data, len) })
            }
        }
    }
}

/// Each record's value (`Borrowed`), and the objects holding those read: only records whose route reads a
/// body, and only values small enough to be read.
fn record_values<'py>(
    values: &Bound<'py, PyList>,
    all_routes: &[Route],
    routes: &[u32],
) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<Borrowed>)> {
    if values.len() != routes.len() {
        return Err(PyValueError::new_err("one value per record"));
    }
    let mut owners = Vec::new();
    let mut out = Vec::with_capacity(routes.len());
    for (value, &route) in values.iter().zip(routes) {
        let reads = all_routes
            .get(route as usize)
            .is_some_and(Route::reads_body);
        out.push(if !reads {
            Borrowed::Unread
        } else if value.is_none() {
            Borrowed::Undecodable
        } else {
            let object = value.cast_into::<PyBytes>()?;
            let bytes = object.as_bytes();
            if bytes.len() > body_json::MAX_BODY_BYTES {
                Borrowed::Undecodable
            } else {
                let borrowed = Borrowed::Bytes(bytes.as_ptr(), bytes.len());
                owners.push(object);
                borrowed
            }
        });
    }
    Ok((owners, out))
}

fn poisoned() -> PyErr {
    PyValueError::new_err("a native decider's lock was poisoned")
}

impl NativeDecider {
    /// The writer schemas the batch's values in Confluent's wire format are read with: those learned before,
    /// and those of the ids met now for the first time, each asked for once (`ask(id)`: a node table, or None
    /// when the registry does not have the id: absent here, so its values are undecodable, and asked again by
    /// a later batch, as the id may come). What `ask` raises (a registry that cannot be read) goes to the
    /// caller before anything is decided.
    fn learn_schemas(
        &self,
        ask: &Bound<'_, PyAny>,
        values: &[Borrowed],
        all_routes: &[Route],
        routes: &[u32],
    ) -> PyResult<Arc<Schemas>> {
        let known = Arc::clone(&*self.schemas.lock().map_err(|_| poisoned())?);
        let mut learned: Vec<(u32, Arc<AvroSchema>)> = Vec::new();
        let mut lacking: Vec<u32> = Vec::new();
        for (value, &route) in values.iter().zip(routes) {
            let framed = all_routes
                .get(route as usize)
                .is_some_and(Route::reads_framed);
            let RecordValue::Bytes(bytes) = value.get() else {
                continue;
            };
            let Some(id) = framed.then(|| bodies::schema_id(bytes)).flatten() else {
                continue;
            };
            if known.contains_key(&id)
                || lacking.contains(&id)
                || learned.iter().any(|(i, _)| *i == id)
            {
                continue;
            }
            let answer = ask.call1((id,))?;
            if answer.is_none() {
                lacking.push(id);
            } else {
                let nodes: Vec<AvroNode> = answer.extract()?;
                learned.push((id, Arc::new(python_avro::schema(nodes)?)));
            }
        }
        if learned.is_empty() {
            return Ok(known);
        }
        let mut kept = self.schemas.lock().map_err(|_| poisoned())?;
        let mut next = Schemas::clone(&kept);
        next.extend(learned);
        *kept = Arc::new(next);
        Ok(Arc::clone(&kept))
    }
}

impl NativeDecider {
    /// Each message-group key the batch's records carry for an app that holds some, with the slot holding it
    /// (`decide::NONE`: not held), into `state.held`: looked up here, with the GIL, so that
    /// deciding needs no Python object.
    fn look_up_holders(
        &self,
        holders: &Bound<'_, PyDict>,
        batch: &Batch,
        all_routes: &[Route],
        routes: &[u32],
        state: &mut State,
    ) -> PyResult<()> {
        let py = holders.py();
        let mut by_app: Vec<Option<Bound<'_, PyDict>>> = Vec::with_capacity(self.apps.len());
        for objs in &self.apps {
            let keys = holders.get_item(objs.name.bind(py))?;
            by_app.push(match keys {
                Some(k) if !k.is_none() => Some(k.cast_into::<PyDict>()?),
                _ => None,
            });
        }
        if by_app.iter().all(Option::is_none) {
            return Ok(());
        }
        for (r, &(start, end)) in batch.records.iter().enumerate() {
            let Some(route) = routes.get(r).and_then(|&i| all_routes.get(i as usize)) else {
                continue; // refused when deciding
            };
            for &a in route.members() {
                let Some(keys) = &by_app[a as usize] else {
                    continue;
                };
                let headers = &batch.headers[start..end];
                let Some(key) = self.decider.group_key_of(a, headers, &batch.bytes) else {
                    continue;
                };
                let held = state.held.entry(a).or_default();
                if held.contains_key(key) {
                    continue;
                }
                let slot = match keys.get_item(PyBytes::new(py, key))? {
                    Some(group) => {
                        let name = group.cast::<PyString>()?;
                        let slots = &self.apps[a as usize].group_slots;
                        slots.get(name.to_str()?).copied().unwrap_or(decide::NONE)
                    }
                    None => decide::NONE,
                };
                held.insert(key.to_vec(), slot);
            }
        }
        Ok(())
    }

    /// Asks for what making decision `i + AHEAD` will read: its prebuilt object, whose entry was asked for
    /// `AHEAD` decisions before (at 100,000 subscriptions each is a cache miss among 100,000 candidates').
    fn ask_ahead(&self, made: &[Made], i: usize) {
        let entry = |m: Option<&Made>| match m {
            Some(&Made::Routed { app, candidate, .. }) => {
                (self.apps.get(app as usize)).and_then(|objs| objs.routed.get(candidate as usize))
            }
            _ => None,
        };
        if let Some(later) = entry(made.get(i + 2 * AHEAD)) {
            prefetch(later);
        }
        if let Some((decision, _, _)) = entry(made.get(i + AHEAD)) {
            prefetch(decision.as_ptr());
        }
    }

    /// The `RouteResult` of each decided record, made of the prebuilt decisions wherever they apply.
    fn results<'py>(
        &self,
        py: Python<'py>,
        decided: &Decided,
        bytes: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        let making = &self.making;
        let f = &making.fields;
        let key_of = |app: &AppObjects, key: GroupKey| -> Bound<'py, PyAny> {
            match key {
                GroupKey::Header(s, e) => PyBytes::new(py, &bytes[s..e]).into_any(),
                GroupKey::Default => app.default_group.bind(py).clone().into_any(),
            }
        };
        let none = py.None().into_bound(py);
        let out = PyList::empty(py);
        for record in &decided.records {
            let routed = PyList::empty(py);
            for i in record.made.0..record.made.1 {
                self.ask_ahead(&decided.made, i);
                let decision = match decided.made[i] {
                    Made::Expired(a) => self.apps[a as usize].expired.bind(py).clone(),
                    Made::Routed {
                        app,
                        candidate,
                        band,
                        key,
                    } => {
                        let objs = &self.apps[app as usize];
                        let (made, group, label) = &objs.routed[candidate as usize];
                        if key.is_none() && band == 0 {
                            made.bind(py).clone()
                        } else {
                            let key = key.map_or_else(|| none.clone(), |k| key_of(objs, k));
                            making.decision.make(
                                py,
                                &[
                                    (&f.app, objs.name.bind(py)),
                                    (&f.action, making.route.bind(py)),
                                    (&f.group, group.bind(py)),
                                    (&f.subscription, label.bind(py)),
                                    (&f.key, &key),
                                    (&f.reason, &none),
                                    (&f.band, &band.into_pyobject(py)?.into_any()),
                                ],
                            )?
                        }
                    }
                    Made::Pending { app, reason, key } => {
                        let objs = &self.apps[app as usize];
                        match key {
                            None => match reason {
                                Waiting::Unmatched => objs.pending.bind(py).clone(),
                                Waiting::Capacity => objs.capacity.bind(py).clone(),
                                Waiting::NoConsumer => objs.no_consumer.bind(py).clone(),
                            },
                            Some(k) => {
                                let why = match reason {
                                    Waiting::Unmatched => &none,
                                    Waiting::Capacity => making.capacity.bind(py),
                                    Waiting::NoConsumer => making.no_consumer.bind(py),
                                };
                                making.decision.make(
                                    py,
                                    &[
                                        (&f.app, objs.name.bind(py)),
                                        (&f.action, making.pending.bind(py)),
                                        (&f.group, &none),
                                        (&f.subscription, &none),
                                        (&f.key, &key_of(objs, k)),
                                        (&f.reason, why),
                                        (&f.band, &0u8.into_pyobject(py)?.into_any()),
                                    ],
                                )?
                            }
                        }
                    }
                };
                routed.append(decision)?;
            }
            let filtered =
                self.filtered_tuple(py, &decided.filtered[record.filtered.0..record.filtered.1])?;
            let counts = |(from, to): (usize, usize)| -> PyResult<Bound<'py, PyDict>> {
                let dict = PyDict::new(py);
                for (app, n) in &decided.counts[from..to] {
                    dict.set_item(self.apps[*app as usize].name.bind(py), n)?;
                }
                Ok(dict)
            };
            let result = making.result.make(
                py,
                &[
                    (&f.routed, routed.as_any()),
                    (&f.filtered, filtered.as_any()),
                    (
                        &f.evaluation_errors,
                        counts(record.evaluation_errors)?.as_any(),
                    ),
                    (
                        &f.decode_errors,
                        self.decode_counts(py, decided, record.decode_errors)?
                            .as_any(),
                    ),
                ],
            )?;
            out.append(result)?;
        }
        Ok(out)
    }

    /// A record's decode failures: app name -> property name -> count.
    fn decode_counts<'py>(
        &self,
        py: Python<'py>,
        decided: &Decided,
        (from, to): (usize, usize),
    ) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let mut current: Option<(u32, Bound<'py, PyDict>)> = None;
        for &(app, label, n) in &decided.decode[from..to] {
            if current.as_ref().is_none_or(|(a, _)| *a != app) {
                let inner = PyDict::new(py);
                out.set_item(self.apps[app as usize].name.bind(py), &inner)?;
                current = Some((app, inner));
            }
            if let Some((_, inner)) = &current {
                let name = self.labels[label as usize].bind(py);
                let before: u32 = match inner.get_item(name)? {
                    Some(v) => v.extract()?,
                    None => 0,
                };
                inner.set_item(name, before + n)?;
            }
        }
        Ok(out)
    }

    fn filtered_tuple<'py>(&self, py: Python<'py>, apps: &[u32]) -> PyResult<Bound<'py, PyTuple>> {
        if apps.is_empty() {
            return Ok(PyTuple::empty(py));
        }
        // No Python code runs while the lock is held (a thread switch there could wait on it with the GIL).
        let mut cache = self.filtered.lock().map_err(|_| poisoned())?;
        if let Some(found) = cache.tuples.get(apps) {
            return Ok(found.bind(py).clone());
        }
        if cache.tuples.len() >= 4096 {
            cache.tuples.clear(); // filters that vary without bound: keep it bounded
        }
        let made = PyTuple::new(
            py,
            apps.iter()
                .map(|&a| self.apps[a as usize].filtered.bind(py)),
        )?;
        cache.tuples.insert(apps.to_vec(), made.clone().unbind());
        Ok(made)
    }
}

/// What `read_json` found: the values by property name, and the properties that failed (each counted once).
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
struct BodyReading {
    props: Py<PyDict>,
    failures: Py<PyDict>,
}

/// The properties `reads` (`[BodyRead]`) name in one JSON record value (None: a record without one), as
/// `routing/body.py`'s `read_json` reads them.
#[pyfunction]
fn read_json<'py>(
    py: Python<'py>,
    value: Option<&Bound<'py, PyBytes>>,
    reads: Vec<BodyRead>,
) -> PyResult<BodyReading> {
    let specs = reads
        .iter()
        .map(|r| {
            Ok(body_json::Read {
                tokens: r.tokens.clone(),
                declared: declared(&r.declared)?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let bytes = value.map(|v| v.as_bytes().to_vec());
    let got = py.detach(move || body_json::read_json(bytes.as_deref(), &specs));
    let (props, failures) = (PyDict::new(py), PyDict::new(py));
    for (read, got) in reads.iter().zip(got) {
        match got {
            Got::Missing => {}
            Got::Failed => failures.set_item(&read.name, 1)?,
            Got::Found(Value::Str(s)) => {
                let text =
                    std::str::from_utf8(&s).map_err(|e| PyValueError::new_err(e.to_string()))?;
                props.set_item(&read.name, text)?;
            }
            Got::Found(Value::Int(i)) => props.set_item(&read.name, i)?,
            Got::Found(Value::Bool(b)) => props.set_item(&read.name, b)?,
            Got::Found(Value::Float(f)) => props.set_item(&read.name, f)?,
        }
    }
    Ok(BodyReading {
        props: props.unbind(),
        failures: failures.unbind(),
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(read_json, m)?)?;
    m.add_class::<BodyReading>()?;
    m.add_class::<NativePlan>()?;
    m.add_class::<Entry>()?;
    m.add_class::<Matches>()?;
    m.add_class::<Candidates>()?;
    m.add_class::<NativeDecider>()?;
    m.add_class::<BatchOutcome>()?;
    crate::python_avro::register(m)?;
    crate::python_envelope::register(m)?;
    crate::python_inputs::register(m)?;
    let reads = PyDict::new(py);
    for (name, keys) in boundary::READS {
        reads.set_item(name, PyList::new(py, *keys)?)?;
    }
    m.add("READS", reads)?;
    let makes = PyDict::new(py);
    makes.set_item("RouteResult", PyList::new(py, RESULT_FIELDS)?)?;
    makes.set_item("Decision", PyList::new(py, DECISION_FIELDS)?)?;
    makes.set_item(
        "InputRecord",
        PyList::new(py, crate::python_inputs::INPUT_FIELDS)?,
    )?;
    m.add("MAKES", makes)
}
