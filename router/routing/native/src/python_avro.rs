//! `AvroBodyReader`: the native Avro body reader (`body_avro.rs`) for Python, built from the node table
//! `router/routing/native_avro.py` lowers a writer schema to, and the reads of one app.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::body_avro::{self, Leaf, Node, Read, Schema};
use crate::boundary::{AvroNode, AvroRead};
use crate::decode::PropType;

fn node(spec: AvroNode) -> PyResult<Node> {
    let AvroNode {
        kind,
        size,
        children,
        names,
    } = spec;
    let only = |children: &[usize]| match children {
        [child] => Ok(*child),
        _ => Err(PyValueError::new_err(format!(
            "a {kind} node has one child"
        ))),
    };
    Ok(match kind.as_str() {
        "null" => Node::Null,
        "boolean" => Node::Boolean,
        "int" => Node::Int,
        "long" => Node::Long,
        "float" => Node::Float,
        "double" => Node::Double,
        "bytes" => Node::Bytes,
        "string" => Node::String,
        "fixed" => Node::Fixed(size),
        "enum" => Node::Enum(names),
        "array" => Node::Array(only(&children)?),
        "map" => Node::Map(only(&children)?),
        "union" => Node::Union(children),
        "record" => {
            if names.len() != children.len() {
                return Err(PyValueError::new_err(
                    "a record node names each of its fields",
                ));
            }
            Node::Record(names.into_iter().zip(children).collect())
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown Avro node kind {other:?}"
            )))
        }
    })
}

/// The schema of a node table `native_avro.lower` made.
pub fn schema(nodes: Vec<AvroNode>) -> PyResult<Schema> {
    let nodes = nodes.into_iter().map(node).collect::<PyResult<Vec<_>>>()?;
    Schema::new(nodes).map_err(PyValueError::new_err)
}

/// What one body gave: the properties read, and the failures by property (1 each), as `body_avro.read_plain`.
#[pyclass(frozen, get_all, module = "subroute.routing._native")]
pub struct AvroReading {
    props: Py<PyDict>,
    failures: Py<PyDict>,
}

/// Reads the properties of one app from plain Avro bodies of one writer schema.
#[pyclass(frozen, module = "subroute.routing._native")]
pub struct AvroBodyReader {
    schema: Schema,
    reads: Vec<Read>,
    names: Vec<Py<PyString>>,
}

#[pymethods]
impl AvroBodyReader {
    #[new]
    fn new(py: Python<'_>, nodes: Vec<AvroNode>, reads: Vec<AvroRead>) -> PyResult<AvroBodyReader> {
        let schema = schema(nodes)?;
        let mut names = Vec::with_capacity(reads.len());
        let mut parsed = Vec::with_capacity(reads.len());
        for AvroRead {
            name,
            tokens,
            declared,
        } in reads
        {
            let declared = match declared {
                None => None,
                Some(t) => Some(
                    PropType::from_name(&t)
                        .ok_or_else(|| PyValueError::new_err(format!("bad declared type {t:?}")))?,
                ),
            };
            names.push(PyString::new(py, &name).unbind());
            parsed.push(Read::new(
                tokens.into_iter().map(String::into_bytes).collect(),
                declared,
            ));
        }
        Ok(AvroBodyReader {
            schema,
            reads: parsed,
            names,
        })
    }

    /// The properties of one body and the failures by property, as `body_avro.read_plain` gives them.
    fn read(&self, py: Python<'_>, body: &Bound<'_, PyBytes>) -> PyResult<AvroReading> {
        let props = PyDict::new(py);
        let failures = PyDict::new(py);
        match body_avro::read(&self.schema, &self.reads, body.as_bytes()) {
            Err(_) => {
                for name in &self.names {
                    failures.set_item(name.bind(py), 1)?;
                }
            }
            Ok(leaves) => {
                for (name, leaf) in self.names.iter().zip(leaves) {
                    let name = name.bind(py);
                    match leaf {
                        Leaf::Missing => {}
                        Leaf::Wrong => failures.set_item(name, 1)?,
                        Leaf::Int(i) => props.set_item(name, i)?,
                        Leaf::Float(f) => props.set_item(name, f)?,
                        Leaf::Bool(b) => props.set_item(name, b)?,
                        Leaf::Str(s) => props.set_item(name, s)?,
                    }
                }
            }
        }
        Ok(AvroReading {
            props: props.unbind(),
            failures: failures.unbind(),
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AvroBodyReader>()?;
    m.add_class::<AvroReading>()
}
