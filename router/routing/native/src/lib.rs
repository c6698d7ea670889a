//! subroute's native routing core: the shared plan of all subscriptions evaluated on batches of records'
//! headers (and properties read from their bodies). `plan`, `decode`, `like`, `decide`, `bodies`, `body_json`,
//! `body_avro` and `prefetch` are plain Rust (tested by `cargo test`); `python` is the PyO3 module
//! (`python_avro` its Avro body reader, `python_envelope` the assembly of routed records, `python_inputs` the
//! reading of consumed ones),
//! `boundary` the structures it reads from Python by key.

pub mod bodies;
pub mod body_avro;
pub mod body_json;
pub mod decide;
pub mod decode;
pub mod like;
pub mod plan;
pub mod prefetch;

#[cfg(feature = "extension-module")]
mod boundary;
#[cfg(feature = "extension-module")]
mod python;
#[cfg(feature = "extension-module")]
mod python_avro;
#[cfg(feature = "extension-module")]
mod python_envelope;
#[cfg(feature = "extension-module")]
mod python_inputs;
