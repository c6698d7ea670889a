//! `read_inputs`: a consumed batch's records read into `envelope.InputRecord`s, each as
//! `router/routing/envelope.py`'s `InputRecord.of` reads one (that method stays the reference, and the property
//! test in tests/unit/native/test_native_inputs.py holds the two equal), sorted out as the worker's batch needs
//! them: records of input topics, records of pending topics, and errors; with the input offsets each input
//! partition's records span. Read in Python, a record cost the poll loop a dozen interpreter steps besides the
//! client's own calls (issue 26).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::python::Maker;

/// The fields of `envelope.InputRecord` set here (exported in `MAKES`, checked at import).
pub(crate) const INPUT_FIELDS: [&str; 7] = [
    "topic",
    "headers",
    "timestamp_ms",
    "value",
    "partition",
    "offset",
    "key",
];

/// An input partition's records in a batch: the first offset read and the one after the last.
struct Span<'py> {
    topic: Bound<'py, PyString>,
    partition: i64,
    first: i64,
    end: i64,
}

/// A `Span` made for Python.
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
struct InputSpan {
    topic: Py<PyString>,
    partition: i64,
    /// The first offset of the partition's records in the batch.
    first: i64,
    /// The offset after the last one: the position to commit once they are routed.
    end: i64,
}

/// A consumed batch, read (`read_inputs`), each list in batch order.
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
struct ConsumedBatch {
    /// The records of input topics.
    inputs: Py<PyList>,
    /// The records of pending topics.
    pending: Py<PyList>,
    /// The messages that carry an error, as they are.
    errors: Py<PyList>,
    /// Per input partition, in the order first met, the offsets its records span.
    spans: Py<PyList>,
}

/// `batch` (confluent-kafka `Message`s) read: each record without error into a `record_type` (`InputRecord`)
/// made field by field, those of the topics in `pending_topics` apart from the others.
#[pyfunction]
fn read_inputs<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyAny>,
    record_type: &Bound<'py, PyAny>,
    pending_topics: &Bound<'py, PyDict>,
) -> PyResult<ConsumedBatch> {
    let maker = Maker::new(record_type)?;
    let names = INPUT_FIELDS.map(|name| PyString::intern(py, name).unbind());
    let mut inputs: Vec<Bound<'py, PyAny>> = Vec::with_capacity(batch.len().unwrap_or(0));
    let mut pending: Vec<Bound<'py, PyAny>> = Vec::new();
    let mut errors: Vec<Bound<'py, PyAny>> = Vec::new();
    let mut spans: Vec<Span<'py>> = Vec::new();
    let mut last = 0usize; // the span of the record before: a batch holds runs of one partition's records
    for raw in batch.try_iter()? {
        let raw = raw?;
        if !raw.call_method0(intern!(py, "error"))?.is_none() {
            errors.push(raw);
            continue;
        }
        let topic = raw.call_method0(intern!(py, "topic"))?;
        let mut headers = raw.call_method0(intern!(py, "headers"))?;
        if headers.is_none() {
            headers = PyList::empty(py).into_any();
        }
        let timestamp = raw.call_method0(intern!(py, "timestamp"))?.get_item(1)?;
        let value = raw.call_method0(intern!(py, "value"))?;
        let partition = raw.call_method0(intern!(py, "partition"))?;
        let offset = raw.call_method0(intern!(py, "offset"))?;
        let key = raw.call_method0(intern!(py, "key"))?;
        let [n_topic, n_headers, n_timestamp, n_value, n_partition, n_offset, n_key] = &names;
        let made = [
            (n_topic, &topic),
            (n_headers, &headers),
            (n_timestamp, &timestamp),
            (n_value, &value),
            (n_partition, &partition),
            (n_offset, &offset),
            (n_key, &key),
        ];
        let record = maker.make(py, &made)?;
        if pending_topics.contains(&topic)? {
            pending.push(record);
            continue;
        }
        inputs.push(record);
        let topic = topic.cast_into::<PyString>()?;
        let (partition, offset): (i64, i64) = (partition.extract()?, offset.extract()?);
        let same = |span: &Span<'py>| -> PyResult<bool> {
            Ok(span.partition == partition && span.topic.to_str()? == topic.to_str()?)
        };
        let at = match spans.get(last) {
            Some(span) if same(span)? => Some(last),
            _ => spans.iter().position(|span| same(span).unwrap_or(false)),
        };
        match at {
            Some(at) => {
                spans[at].end = offset + 1;
                last = at;
            }
            None => {
                last = spans.len();
                spans.push(Span {
                    topic,
                    partition,
                    first: offset,
                    end: offset + 1,
                });
            }
        }
    }
    let spans = spans
        .into_iter()
        .map(|span| {
            Py::new(
                py,
                InputSpan {
                    topic: span.topic.unbind(),
                    partition: span.partition,
                    first: span.first,
                    end: span.end,
                },
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(ConsumedBatch {
        inputs: PyList::new(py, inputs)?.unbind(),
        pending: PyList::new(py, pending)?.unbind(),
        errors: PyList::new(py, errors)?.unbind(),
        spans: PyList::new(py, spans)?.unbind(),
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumedBatch>()?;
    m.add_class::<InputSpan>()?;
    m.add_function(wrap_pyfunction!(read_inputs, m)?)
}
