//! The Python module: a plan built from the flat form `router/routing/native_plan.py` lowers, and batch matching.
//! The GIL is held only to read Python objects; building and evaluating run with it released.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::decide::{
    self, AppSpec, Decided, Decider, Fairness, GroupKey, Made, Route, State, Waiting,
};
use crate::decode::PropType;
use crate::plan::{num_key, Batch, CmpOp, FxMap, GateSpec, Key, NodeSpec, Num, Plan, SubSpec};

/// (tag, sql, ints, float, text, texts)
type NodeTuple = (
    String,
    bool,
    Vec<i64>,
    f64,
    PyBackedBytes,
    Vec<PyBackedBytes>,
);
/// (class, int, float, bytes): 0 bmq int, 1 sql92 int, 2 sql92 float, 3 string, 4 bool (int 0/1)
type KeyTuple = (u8, i64, f64, PyBackedBytes);
/// (gate kind 0 none / 1 equality / 2 range / 3 interval, slot, comparison code, keys, residual nodes)
type EntryTuple = (u8, usize, i64, Vec<KeyTuple>, Vec<usize>);

fn key(k: &KeyTuple) -> Result<Key, String> {
    Ok(match k.0 {
        0 => Key::Int(k.1),
        1 => Key::NumI(k.1),
        2 => num_key(Num::F(k.2)),
        3 => Key::Str(k.3.to_vec()),
        4 => Key::Bool(k.1 != 0),
        other => return Err(format!("bad key class {other}")),
    })
}

fn num(k: &KeyTuple) -> Result<Num, String> {
    match k.0 {
        0 | 1 => Ok(Num::I(k.1)),
        2 => Ok(Num::F(k.2)),
        other => Err(format!("bad bound class {other}")),
    }
}

fn gate_spec(t: &EntryTuple) -> Result<GateSpec, String> {
    let (kind, slot, op, keys, _) = t;
    Ok(match kind {
        0 => GateSpec::None,
        1 => GateSpec::Eq {
            slot: *slot,
            keys: keys.iter().map(key).collect::<Result<_, _>>()?,
        },
        2 => {
            let op = match op {
                2 => CmpOp::Lt,
                3 => CmpOp::Le,
                4 => CmpOp::Gt,
                5 => CmpOp::Ge,
                _ => return Err(format!("bad range operator {op}")),
            };
            let bound = num(keys.first().ok_or("range gate without a bound")?)?;
            GateSpec::Range {
                slot: *slot,
                op,
                bound,
            }
        }
        3 => match (keys.first().map(num), keys.get(1).map(num)) {
            (Some(Ok(Num::I(low))), Some(Ok(Num::I(high)))) => GateSpec::Interval {
                slot: *slot,
                low,
                high,
            },
            _ => return Err("an interval gate takes two int bounds".into()),
        },
        other => return Err(format!("bad gate kind {other}")),
    })
}

fn group(g: i64) -> Result<Option<u32>, String> {
    if g < 0 {
        Ok(None)
    } else {
        u32::try_from(g)
            .map(Some)
            .map_err(|_| format!("bad group {g}"))
    }
}

/// One subscription lowered: its gate and residual, without its groups. Made once from Python and shared by
/// every plan that holds the subscription, so a rebuild hands over an object per subscription instead of
/// converting its keys and residual again with the GIL held.
#[pyclass(frozen, module = "router._native")]
struct Entry {
    gate: GateSpec,
    residual: Vec<usize>,
    kind: u8,
}

#[pymethods]
impl Entry {
    /// From `(gate kind, slot, comparison code, keys, residual nodes)`.
    #[new]
    fn new(
        kind: u8,
        slot: usize,
        op: i64,
        keys: Vec<KeyTuple>,
        residual: Vec<usize>,
    ) -> PyResult<Entry> {
        let t = (kind, slot, op, keys, residual);
        let gate = gate_spec(&t).map_err(PyValueError::new_err)?;
        Ok(Entry {
            gate,
            residual: t.4,
            kind,
        })
    }

    /// The gate kind: 0 none, 1 equality, 2 range, 3 interval.
    #[getter]
    fn kind(&self) -> u8 {
        self.kind
    }
}

/// A compiled plan. Build it with the slots `[(header name, type code)]` (type codes: 0 string, 1 int,
/// 2 bool, 3 float), the nodes (children before parents) and the subscriptions.
#[pyclass(frozen, module = "router._native")]
struct NativePlan {
    plan: Arc<Plan>,
    names: FxMap<String, u32>,
}

#[pymethods]
impl NativePlan {
    /// The plan of `entries` (each opening group `opens[i]` and requiring `requires[i]`, -1 for none) over
    /// the slots and nodes. Only reading the arguments holds the GIL: converting and building run without it.
    #[new]
    fn new(
        py: Python<'_>,
        props: Vec<(String, u8)>,
        nodes: Vec<NodeTuple>,
        entries: Vec<Py<Entry>>,
        opens: Vec<i64>,
        requires: Vec<i64>,
    ) -> PyResult<NativePlan> {
        if opens.len() != entries.len() || requires.len() != entries.len() {
            return Err(PyValueError::new_err(
                "opens and requires are aligned with the entries",
            ));
        }
        let plan = py
            .detach(|| {
                let props = props
                    .into_iter()
                    .map(|(name, code)| {
                        PropType::from_code(code)
                            .map(|t| (name, t))
                            .ok_or_else(|| format!("bad type code {code}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let specs: Vec<NodeSpec> = nodes
                    .into_iter()
                    .map(|(tag, sql, ints, num, text, texts)| NodeSpec {
                        tag,
                        sql,
                        ints,
                        num,
                        text: text.to_vec(),
                        texts: texts.iter().map(|t| t.to_vec()).collect(),
                    })
                    .collect();
                let subs = entries
                    .iter()
                    .zip(opens.iter().zip(&requires))
                    .map(|(entry, (&o, &r))| {
                        let entry = entry.get();
                        Ok(SubSpec {
                            gate: entry.gate.clone(),
                            residual: entry.residual.clone(),
                            opens: group(o)?,
                            requires: group(r)?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Plan::build(&props, &specs, &subs)
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

    /// For each record (an iterable of `(name, bytes | None)` headers, or None), the ascending indexes of the
    /// subscriptions it matches.
    fn match_batch(&self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
        let batch = self.read_batch(records)?;
        let plan = Arc::clone(&self.plan);
        Ok(py.detach(move || plan.match_batch(&batch)))
    }

    /// `match_batch` with, per record, also the subscriptions whose evaluation ended in an error.
    fn match_batch_with_errors(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(Vec<u32>, Vec<u32>)>> {
        let batch = self.read_batch(records)?;
        let plan = Arc::clone(&self.plan);
        Ok(py.detach(move || plan.match_batch_with_errors(&batch, true)))
    }

    /// How the subscriptions are reached: always evaluated, by equality, range or interval index; memoized
    /// nodes; nodes.
    fn stats(&self) -> [usize; 6] {
        self.plan.stats()
    }

    fn __len__(&self) -> usize {
        self.plan.subscription_count()
    }
}

impl NativePlan {
    /// The headers the plan reads, copied out of the Python objects (the only part that needs the GIL).
    fn read_batch(&self, records: &Bound<'_, PyAny>) -> PyResult<Batch> {
        read_batch(&self.names, records)
    }
}

/// The headers of `records` whose names are in `names` (by index), copied into one batch.
fn read_batch(names: &FxMap<String, u32>, records: &Bound<'_, PyAny>) -> PyResult<Batch> {
    let mut batch = Batch::default();
    for record in records.try_iter()? {
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
    }
    Ok(batch)
}

/// Per candidate: (priority, max_unconfirmed, (app, group) slot, group name, plan position or -1 for a group
/// without subscriptions, its routed `Decision`).
type CandidateTuple = (i64, Option<i64>, u32, String, i64, Py<PyAny>);
/// (span start, span end, filter positions, priority threshold positions, environment, first cursor)
type LayoutTuple = (u32, u32, Vec<u32>, Vec<u32>, u32, u32);
/// (fairness 0 round-robin / 1 proportional / 2 fast, spillover, presence required, group_by header,
/// default group, expiration ms)
type BehaviourTuple = (u8, bool, bool, Option<String>, Vec<u8>, Option<i64>);
/// Six Python objects, passed as one tuple.
type SixObjects = (
    Py<PyAny>,
    Py<PyAny>,
    Py<PyAny>,
    Py<PyAny>,
    Py<PyAny>,
    Py<PyAny>,
);
/// The app's name and its prebuilt decisions: (name, expired, pending, pending capacity, pending no-consumer,
/// filtered)
type ObjectsTuple = SixObjects;
type AppTuple = (
    LayoutTuple,
    BehaviourTuple,
    Vec<CandidateTuple>,
    ObjectsTuple,
);
/// (RouteResult, Decision, Action.ROUTE, Action.PENDING, "capacity", "no-consumer")
type KindsTuple = SixObjects;

/// The Python objects a decision is made of.
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

/// A table's decisions (router/routing/decide.rs): built once with the table, then one call per batch decides
/// every record with the GIL released, as `Router.route` would one by one.
#[pyclass(frozen, module = "router._native")]
struct NativeDecider {
    plan: Arc<Plan>,
    names: FxMap<String, u32>,
    decider: Arc<Decider>,
    apps: Vec<AppObjects>,
    kinds: KindsTuple,
    /// Copied on write: a batch takes the list without holding a lock while it runs.
    routes: Mutex<Arc<Vec<Route>>>,
    filtered: Mutex<Filtered>,
}

#[pymethods]
impl NativeDecider {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        plan: &Bound<'_, NativePlan>,
        apps: Vec<AppTuple>,
        owner: Vec<u32>,
        exact: Vec<bool>,
        filter_count: u32,
        environments: Vec<Vec<(String, u8)>>,
        expiration_name: String,
        kinds: KindsTuple,
    ) -> PyResult<NativeDecider> {
        let plan = plan.get();
        let mut names = plan.names.clone();
        let name_of = |name: &str, names: &mut FxMap<String, u32>| -> u32 {
            let next = names.len() as u32;
            *names.entry(name.to_owned()).or_insert(next)
        };
        let expiration = name_of(&expiration_name, &mut names);
        let mut typed: Vec<Vec<(u32, PropType)>> = Vec::new();
        for env in &environments {
            let mut out = Vec::new();
            for (name, code) in env {
                let t = PropType::from_code(*code)
                    .ok_or_else(|| PyValueError::new_err(format!("bad type code {code}")))?;
                out.push((name_of(name, &mut names), t));
            }
            typed.push(out);
        }
        let mut specs = Vec::with_capacity(apps.len());
        let mut objects = Vec::with_capacity(apps.len());
        for (layout, behaviour, candidates, objs) in apps {
            let (start, end, filters, bands, env, cursor_base) = layout;
            let (fairness, spillover, presence_required, group_by, default_group, expiration_ms) =
                behaviour;
            let fairness = match fairness {
                0 => Fairness::RoundRobin,
                1 => Fairness::Proportional,
                2 => Fairness::Fast,
                other => return Err(PyValueError::new_err(format!("bad fairness {other}"))),
            };
            let mut cands = Vec::with_capacity(candidates.len());
            let mut routed = Vec::with_capacity(candidates.len());
            let mut group_slots = FxMap::default();
            for (priority, max_unconfirmed, slot, group, position, decision) in candidates {
                group_slots.insert(group.clone(), slot);
                cands.push(decide::Candidate {
                    priority,
                    max_unconfirmed,
                    slot,
                    group_hash: decide::stable_hash(group.as_bytes()),
                    position: u32::try_from(position).ok(),
                });
                let bound = decision.bind(py);
                routed.push((
                    decision.clone_ref(py),
                    bound.getattr("group")?.unbind(),
                    bound.getattr("subscription")?.unbind(),
                ));
            }
            let (name, expired, pending, capacity, no_consumer, filtered) = objs;
            objects.push(AppObjects {
                name,
                expired,
                pending,
                capacity,
                no_consumer,
                filtered,
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
                env,
                cursor_base,
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
        let decider = Decider::new(
            specs,
            owner,
            exact,
            filter_count,
            env_types,
            Some(expiration),
        )
        .map_err(PyValueError::new_err)?;
        Ok(NativeDecider {
            plan: Arc::clone(&plan.plan),
            names,
            decider: Arc::new(decider),
            apps: objects,
            kinds,
            routes: Mutex::new(Arc::new(Vec::new())),
            filtered: Mutex::new(Filtered::default()),
        })
    }

    /// (app-group slots, cursors): the sizes of the state arrays.
    fn sizes(&self) -> (usize, usize) {
        (self.decider.slot_count, self.decider.cursor_count)
    }

    /// Register the apps of a record's topic, by environment `[(env, [app])]`; returns its route index.
    fn add_route(&self, groups: Vec<(u32, Vec<u32>)>) -> PyResult<usize> {
        let route = self.decider.route(groups).map_err(PyValueError::new_err)?;
        let mut routes = self.routes.lock().map_err(|_| poisoned())?;
        let mut next = Vec::clone(&routes);
        next.push(route);
        *routes = Arc::new(next);
        Ok(routes.len() - 1)
    }

    /// Decide the records in order: `(decided, results, moved cursors [(cursor, value)], routed
    /// [(slot, count)], held [(app, key, group)])`. `decided` < len(records): the record there needs
    /// `Router.route` (the state returned is after the records decided). `counts` are `(slot, unconfirmed,
    /// whether routing adds to it)`, `cursors` every cursor's value, `absent` the absent slots. `holders`
    /// (`Holders.by_app`: app name -> message-group key -> consumer group name), when given, holds message groups
    /// on their consumer group, and `held` is then each keyed record's placement, in order; None: nothing is held.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    #[pyo3(signature = (records, routes, timestamps, now_ms, counts, cursors, absent, *, holders=None))]
    fn decide<'py>(
        &self,
        py: Python<'py>,
        records: &Bound<'py, PyAny>,
        routes: Vec<u32>,
        timestamps: Vec<i64>,
        now_ms: i64,
        counts: Vec<(u32, i64, bool)>,
        cursors: Vec<i64>,
        absent: Vec<u32>,
        holders: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(
        usize,
        Bound<'py, PyList>,
        Vec<(u32, i64)>,
        Vec<(u32, u32)>,
        Bound<'py, PyList>,
    )> {
        let batch = read_batch(&self.names, records)?;
        let decider = Arc::clone(&self.decider);
        let mut state = State::new(decider.slot_count, decider.cursor_count);
        if cursors.len() != decider.cursor_count {
            return Err(PyValueError::new_err("one value per cursor"));
        }
        state.cursors = cursors;
        for (slot, count, tracked) in counts {
            let s = slot as usize;
            if s >= decider.slot_count {
                return Err(PyValueError::new_err("bad slot"));
            }
            state.counts[s] = count;
            state.tracked[s] = tracked;
        }
        for slot in absent {
            if let Some(a) = state.absent.get_mut(slot as usize) {
                *a = true;
            }
        }
        let all_routes = Arc::clone(&*self.routes.lock().map_err(|_| poisoned())?);
        if let Some(holders) = holders {
            state.holding = true;
            self.look_up_holders(holders, &batch, &all_routes, &routes, &mut state)?;
        }
        let plan = Arc::clone(&self.plan);
        let (decided, state) = py.detach(move || {
            let outcomes = plan.match_batch_with_errors(&batch, true);
            let decided = decider.decide(
                &batch,
                &outcomes,
                &all_routes,
                &routes,
                &timestamps,
                now_ms,
                &mut state,
            );
            (decided.map(|d| (d, batch)), state)
        });
        let (decided, batch) = decided.map_err(PyValueError::new_err)?;
        let results = self.results(py, &decided, &batch.bytes)?;
        let moved = state
            .moved
            .iter()
            .enumerate()
            .filter(|(_, m)| **m)
            .map(|(i, _)| (i as u32, state.cursors[i]))
            .collect();
        let routed = state
            .routed
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (i as u32, *n))
            .collect();
        let held = PyList::empty(py);
        for &(app, key, candidate) in &state.placed {
            let objs = &self.apps[app as usize];
            let key = match key {
                GroupKey::Header(s, e) => PyBytes::new(py, &batch.bytes[s..e]),
                GroupKey::Default => objs.default_group.bind(py).clone(),
            };
            let group = &objs.routed[candidate as usize].1;
            held.append((objs.name.bind(py), key, group.bind(py)))?;
        }
        Ok((decided.records.len(), results, moved, routed, held))
    }
}

fn poisoned() -> PyErr {
    PyValueError::new_err("a native decider's lock was poisoned")
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

    /// The `RouteResult` of each decided record, made of the prebuilt decisions wherever they apply.
    fn results<'py>(
        &self,
        py: Python<'py>,
        decided: &Decided,
        bytes: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        let (result_type, decision_type, route_action, pending_action, capacity, no_consumer) =
            &self.kinds;
        let key_of = |app: &AppObjects, key: GroupKey| -> Bound<'py, PyAny> {
            match key {
                GroupKey::Header(s, e) => PyBytes::new(py, &bytes[s..e]).into_any(),
                GroupKey::Default => app.default_group.bind(py).clone().into_any(),
            }
        };
        let out = PyList::empty(py);
        for record in &decided.records {
            let routed = PyList::empty(py);
            for made in &decided.made[record.made.0..record.made.1] {
                let decision = match *made {
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
                            decision_type.bind(py).call1((
                                objs.name.bind(py),
                                route_action.bind(py),
                                group.bind(py),
                                label.bind(py),
                                key.map(|k| key_of(objs, k)),
                                py.None(),
                                band,
                            ))?
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
                                    Waiting::Unmatched => py.None().into_bound(py),
                                    Waiting::Capacity => capacity.bind(py).clone(),
                                    Waiting::NoConsumer => no_consumer.bind(py).clone(),
                                };
                                decision_type.bind(py).call1((
                                    objs.name.bind(py),
                                    pending_action.bind(py),
                                    py.None(),
                                    py.None(),
                                    key_of(objs, k),
                                    why,
                                    0u8,
                                ))?
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
            let result = result_type.bind(py).call1((
                routed,
                filtered,
                counts(record.evaluation_errors)?,
                counts(record.decode_errors)?,
            ))?;
            out.append(result)?;
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativePlan>()?;
    m.add_class::<Entry>()?;
    m.add_class::<NativeDecider>()
}
