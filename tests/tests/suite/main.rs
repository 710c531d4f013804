//! Every integration and end-to-end test, in one binary: one link instead of one per file.
//! Each module is the tests of one part (`http_*` the HTTP API, `pipeline_*` the stream
//! consumers, `reconcile_*` reconciliation, `live_*` the WebSocket API, `contract` the
//! API document, `web_client` the reference web client in a browser); nextest still runs
//! each test in a process of its own.

// The billing arithmetic and the scale simulation's parts the benches use, checked here.
#[allow(dead_code)]
#[path = "../../benches/dynamodb/capacity.rs"]
mod capacity;
#[allow(dead_code)]
#[path = "../../benches/scale/kinesis.rs"]
mod kinesis;
#[allow(dead_code)]
#[path = "../../benches/scale/mapping.rs"]
mod mapping;
#[allow(dead_code)]
#[path = "../../benches/scale/meter.rs"]
mod meter;
#[allow(dead_code)]
#[path = "../../benches/scale/table.rs"]
mod table;
#[allow(dead_code)]
#[path = "../../benches/scale/traffic.rs"]
mod traffic;

mod aws_events;
mod contract;
mod http_bad_requests;
mod http_catalog;
mod http_cors;
mod http_counts;
mod http_erasure;
mod http_idempotency;
mod http_leaderboard;
mod http_liked_items;
mod http_likers;
mod http_limits;
mod http_moderation;
mod http_privacy;
mod http_private_answers;
mod http_reactions;
mod live_connections;
mod live_pushes;
mod live_subscriptions;
mod live_support;
mod pipeline_count_rows;
mod pipeline_faults;
mod pipeline_freshness;
mod pipeline_histories;
mod pipeline_hot_item;
mod pipeline_http;
mod pipeline_likers_entries;
mod pipeline_records;
mod pipeline_score_index;
mod pipeline_shards;
mod pipeline_two_consumers;
mod pipeline_two_consumers_log;
mod reactions_races;
mod reactions_store;
mod reactions_tables;
mod reconcile_athena_judge;
mod reconcile_athena_runs;
mod reconcile_bounds;
mod reconcile_by_size;
mod reconcile_cuts;
mod reconcile_drift;
mod reconcile_export;
mod reconcile_local_export;
mod reconcile_long_life;
mod reconcile_read_models;
mod reconcile_removed;
mod reconcile_support;
mod scale_model;
mod simulator_agreement;
mod template_permissions;
mod web_client;
