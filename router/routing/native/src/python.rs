//! The Python module: a plan built from the flat form `router/routing/native_plan.py` lowers, and batch matching.
//! The GIL is held only to read Python objects; building and evaluating run with it released.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyString, PyTuple};

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
                    let Some(&index) = self.names.get(name.to_str()?) else {
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
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativePlan>()?;
    m.add_class::<Entry>()
}
