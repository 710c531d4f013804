//! The offline local stack of Likes: the emulator, resources created from `template.yaml`,
//! and the HTTP front that routes like the template's HTTP API. `make run` and the tests
//! both start it through [`stack::Stack`].

pub mod emulator;
pub mod front;
pub mod jwt;
pub mod resources;
pub mod stack;
pub mod template;

use std::path::PathBuf;

/// The checkout this crate was built from: where `template.yaml`, `localstack/` and `.venv` are.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}
