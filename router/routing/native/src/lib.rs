//! subroute's native routing core: the shared plan of all subscriptions evaluated on batches of records'
//! headers. `plan`, `decode` and `like` are plain Rust (tested by `cargo test`); `python` is the PyO3 module.

pub mod decide;
pub mod decode;
pub mod like;
pub mod plan;

#[cfg(feature = "extension-module")]
mod python;
