//! subroute's native routing core: the shared plan of all subscriptions evaluated on batches of records'
//! headers. `plan`, `decode`, `like` and `decide` are plain Rust (tested by `cargo test`); `python` is the PyO3
//! module, `boundary` the structures it reads from Python by key.

pub mod body_json;
pub mod decide;
pub mod decode;
pub mod like;
pub mod plan;

#[cfg(feature = "extension-module")]
mod boundary;
#[cfg(feature = "extension-module")]
mod python;
