//! `input_records`: the records a batch of input records turns into once decided, assembled as
//! `router/routing/envelope.py`'s `records_for` assembles them one record at a time (that function stays the
//! reference, and the property test in tests/unit/native/test_native_envelope.py holds the two equal). What a
//! decision's envelope holds (its topic, and its routing headers before and after the batch's stamp) is still made
//! by Python (`Envelopes.headers_of`), once per decision object: only the per-record assembly is done here, where
//! it costs no interpreter dispatch per header.

use std::collections::hash_map::Entry;
use std::fmt::Write;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::plan::FxMap;

/// A decision's destination topic and its routing headers before and after the stamp; None for a decision that
/// writes nothing (filtered, dropped).
type Envelope<'py> = Option<(Bound<'py, PyAny>, Bound<'py, PyList>, Bound<'py, PyList>)>;

/// The routed records of `messages` (each an `InputRecord`), in order: for each message the records of its
/// decisions (`routed`, aligned with `messages`), filtered and dropped decisions skipped. A decision's topic and
/// routing headers come from `made` (`Envelopes.made`, by the decision's id), or from `headers_of` on a miss.
/// Each record keeps the message's value, headers and timestamp (`now_ms` when it has none) and its key (the
/// decision's message-group key if it has one); its headers are the message's, the source header (`source`
/// named, `topic/partition/offset`), the decision's own, `version`, `routed_at`, and the decision's reason.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn input_records<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyList>,
    routed: &Bound<'py, PyList>,
    made: &Bound<'py, PyDict>,
    headers_of: &Bound<'py, PyAny>,
    source: &Bound<'py, PyString>,
    version: &Bound<'py, PyAny>,
    routed_at: &Bound<'py, PyAny>,
    skipped: &Bound<'py, PyList>,
    now_ms: i64,
) -> PyResult<Bound<'py, PyList>> {
    if messages.len() != routed.len() {
        return Err(PyValueError::new_err(format!(
            "{} decision lists for {} messages",
            routed.len(),
            messages.len()
        )));
    }
    let mut out: Vec<Bound<'py, PyAny>> = Vec::with_capacity(messages.len());
    // A decision's envelope by the decision's address, for the decisions met again in this batch (most are made
    // once per table and shared): its topic and its headers before and after the stamp.
    let mut envelopes: FxMap<usize, Envelope<'py>> = FxMap::default();
    let mut text = String::new();
    for (message, decisions) in messages.iter().zip(routed.iter()) {
        if decisions.len()? == 0 {
            continue;
        }
        let original = message.getattr(intern!(py, "headers"))?;
        let original = original.cast::<PyList>()?;
        let value = message.getattr(intern!(py, "value"))?;
        let key = message.getattr(intern!(py, "key"))?;
        let stamped: i64 = message.getattr(intern!(py, "timestamp_ms"))?.extract()?;
        let timestamp = (if stamped > 0 { stamped } else { now_ms })
            .into_pyobject(py)?
            .into_any();
        let mut source_header: Option<Bound<'py, PyAny>> = None;
        for decision in decisions.try_iter()? {
            let decision = decision?;
            let address = decision.as_ptr() as usize;
            if let Entry::Vacant(entry) = envelopes.entry(address) {
                let action = decision.getattr(intern!(py, "action"))?;
                entry.insert(if skipped.iter().any(|s| s.is(&action)) {
                    None
                } else {
                    let made = match made.get_item(address)? {
                        Some(found) => found,
                        None => headers_of.call1((&decision,))?,
                    };
                    let made = made.cast::<PyTuple>()?;
                    Some((
                        made.get_item(1)?,
                        made.get_item(2)?.cast_into::<PyList>()?,
                        made.get_item(3)?.cast_into::<PyList>()?,
                    ))
                });
            }
            let Some((destination, before, after)) = &envelopes[&address] else {
                continue; // filtered or dropped: written nowhere
            };
            let group_key = decision.getattr(intern!(py, "key"))?;
            let record_key = if group_key.is_none() {
                &key
            } else {
                &group_key
            };
            if source_header.is_none() {
                let topic = message.getattr(intern!(py, "topic"))?;
                let partition: i64 = message.getattr(intern!(py, "partition"))?.extract()?;
                let offset: i64 = message.getattr(intern!(py, "offset"))?.extract()?;
                text.clear();
                write!(
                    text,
                    "{}/{partition}/{offset}",
                    topic.cast::<PyString>()?.to_str()?
                )
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
                let value = PyBytes::new(py, text.as_bytes());
                source_header =
                    Some(PyTuple::new(py, [source.as_any(), value.as_any()])?.into_any());
            }
            let source_header = source_header.as_ref().expect("made above");
            let mut headers: Vec<Bound<'py, PyAny>> =
                Vec::with_capacity(original.len() + before.len() + after.len() + 3);
            headers.extend(original.iter());
            headers.push(source_header.clone());
            headers.extend(before.iter());
            headers.push(version.clone());
            headers.push(routed_at.clone());
            headers.extend(after.iter());
            out.push(
                PyTuple::new(
                    py,
                    [
                        destination.clone(),
                        value.clone(),
                        record_key.clone(),
                        PyList::new(py, headers)?.into_any(),
                        timestamp.clone(),
                    ],
                )?
                .into_any(),
            );
        }
    }
    PyList::new(py, out)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(input_records, m)?)
}
