//! Live counts over API Gateway WebSockets, as Lambda handlers (the registry in `functions/`
//! builds them, for the bootstrap and the local stack alike):
//!
//! - [`Connect`], [`Disconnect`], [`Message`]: the WebSocket API's routes.
//! - [`Broadcaster`]: the event log's consumer that pushes coalesced counts to watchers.

mod broadcaster;
mod config;
mod connections;
mod socket;
mod token;

pub use broadcaster::Broadcaster;
pub use config::{
    BroadcastConfig, ConfigError, ConnectConfig, DisconnectConfig, LiveTables, MessageConfig,
};
pub use connections::{Connections, Posted};
pub use socket::{Connect, Disconnect, Message};
pub use token::{TokenError, TokenVerifier};
