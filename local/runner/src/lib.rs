//! The offline local stack of Likes, a module per AWS part it stands in for: the emulator,
//! resources created from `template.yaml`, the HTTP API ([`http_api`], routing, authorizer and
//! CORS as the template declares them), the WebSocket API ([`websocket_api`]), the event
//! source mappings that feed the template's stream functions ([`event_source_mapping`], with
//! fault injection for tests), EventBridge Scheduler ([`scheduler`]), and the reference web
//! client's origin. `make run` and the tests both start it through [`stack::Stack`], on the
//! AWS that [`aws::AwsTarget`] names: the emulator, an endpoint, or the in-process simulator.

pub mod aws;
pub mod cors;
pub mod emulator;
pub mod event_source_mapping;
pub mod faults;
pub mod http_api;
pub mod jwt;
pub mod lambda;
pub mod operator;
pub mod resources;
pub mod scheduler;
pub mod stack;
pub mod template;
pub mod throttle;
pub mod web;
pub mod websocket_api;

use std::path::PathBuf;

/// The checkout this crate was built from: where `template.yaml`, `local/` and `.venv` are.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}
