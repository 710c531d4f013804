//! The offline local stack of Likes: the emulator, resources created from `template.yaml`,
//! the HTTP front that routes like the template's HTTP API (its CORS too), the reference web
//! client's origin, and the event source mappings
//! that feed the template's stream functions (with fault injection for tests). `make run` and the tests
//! both start it through [`stack::Stack`].

pub mod cors;
pub mod emulator;
pub mod faults;
pub mod front;
pub mod jwt;
pub mod operator;
pub mod poller;
pub mod resources;
pub mod schedule;
pub mod socket_front;
pub mod stack;
pub mod template;
pub mod web;

use std::path::PathBuf;

/// The checkout this crate was built from: where `template.yaml`, `localstack/` and `.venv` are.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}
