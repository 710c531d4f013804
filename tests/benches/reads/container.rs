//! One warm Lambda container reading counts: the public count handlers over a client whose
//! requests are counted, the naive reads beside them, and what the requests cost.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use aws_sdk_dynamodb::Client;
use lambda_http::request::LambdaRequest;
use lambda_http::{Body, Request};
use likes_api::{App, Config, Endpoint};
use likes_core::clock::now_ms;
use likes_core::ItemId;
use likes_local::http_api::GatewayRequest;
use likes_store::CountsStore;
use likes_tests::TestStack;
use serde_json::json;

use crate::capacity::Item;
use crate::sent::{Sent, SentRequests};

/// One warm Lambda container: an `App` over a client whose requests are counted.
pub struct Container {
    app: App,
    store: CountsStore,
    client: Client,
    pub sent: SentRequests,
}

/// What the reads cost since the last one.
pub struct Cost {
    pub queries: u64,
    pub gets: u64,
    pub others: u64,
    pub reads: u64,
    pub half_units: f64,
}

impl Cost {
    pub fn line(&self) -> String {
        let per = |n: u64| n as f64 / self.reads as f64;
        let mut line = format!(
            "{:.4} / {:.4}",
            per(self.queries + self.gets + self.others),
            self.half_units / 2.0 / self.reads as f64
        );
        if self.others > 0 {
            line.push_str(&format!(" ({} other)", self.others));
        }
        line
    }
}

impl Container {
    pub fn new(stack: &TestStack) -> Self {
        let (client, sent) = SentRequests::client(&stack.stack.aws.sdk);
        let table = stack.name("CountsTable");
        // As the template configures the count read (the batch read shares it).
        let environment = stack
            .stack
            .function_environment("GetLikeCountFunction")
            .expect("the get-like-count function's environment");
        let config = Config::from_lookup(Endpoint::GetLikeCount, |name| {
            environment.get(name).cloned()
        })
        .expect("the count read's configuration");
        Self {
            app: App::with_clients(
                config,
                client.clone(),
                aws_sdk_secretsmanager::Client::new(&stack.stack.aws.sdk),
            ),
            store: CountsStore::new(client.clone(), table),
            client,
            sent,
        }
    }

    /// The requests sent since the last call, priced: each Query at `query_half_units` (the
    /// mean over the partitions of the items read), each GetItem one `as_of` replica.
    pub fn cost(&self, reads: u64, query_half_units: f64, as_of_half_units: f64) -> Cost {
        let sent = self.sent.take();
        let count = |name: &str| {
            sent.iter()
                .filter(|s| matches!(s, Sent::Other(op) if op == name))
                .count() as u64
        };
        let (queries, gets) = (count("Query"), count("GetItem"));
        Cost {
            queries,
            gets,
            others: sent.len() as u64 - queries - gets,
            reads,
            half_units: queries as f64 * query_half_units + gets as f64 * as_of_half_units,
        }
    }

    pub async fn get_like_count(&self, item: &str) {
        let route = "/v1/items/{item_id}/like-count";
        let path = route.replace("{item_id}", item);
        let params = serde_json::Map::from_iter([("item_id".to_owned(), json!(item))]);
        let status = self
            .call(Endpoint::GetLikeCount, "GET", route, &path, params, b"")
            .await;
        assert_eq!(status, 200);
    }

    pub async fn batch_get_like_counts(&self, items: &[ItemId]) {
        let route = "/v1/items/like-counts:batchGet";
        let body = json!({ "item_ids": items }).to_string();
        let status = self
            .call(
                Endpoint::BatchGetLikeCounts,
                "POST",
                route,
                route,
                serde_json::Map::new(),
                body.as_bytes(),
            )
            .await;
        assert_eq!(status, 200);
    }

    /// The handler as Lambda calls it, with the v2 event a public route gets (no authorizer).
    async fn call(
        &self,
        endpoint: Endpoint,
        method: &str,
        route: &str,
        path: &str,
        path_parameters: serde_json::Map<String, serde_json::Value>,
        body: &[u8],
    ) -> u16 {
        let now_ms = now_ms();
        let event = GatewayRequest {
            method,
            route_path: route,
            path,
            raw_query: "",
            headers: vec![("content-type".into(), "application/json".into())],
            body,
            path_parameters,
            claims: None,
            source_ip: "127.0.0.1".to_owned(),
            request_id: format!("bench-{now_ms}"),
            now_ms,
        }
        .event();
        let event: LambdaRequest = serde_json::from_value(event).expect("a v2 event");
        let request: Request = event.into();
        let response = self.app.handle(endpoint, request).await;
        assert!(matches!(response.body(), Body::Text(_)));
        response.status().as_u16()
    }

    /// What the handlers did before the cache: Query the item's partitions, and `as_of`.
    pub async fn naive_read(&self, item: &ItemId) {
        let (counts, _) = tokio::join!(self.store.read(item), self.store.as_of());
        counts.expect("count read");
    }

    pub async fn naive_page(&self, items: &[ItemId]) {
        let (counts, _) = tokio::join!(self.store.read_many(items), self.store.as_of());
        assert_eq!(counts.expect("count reads").len(), items.len());
    }

    /// One BatchGetItem of one row per item: what reading a materialized total would cost.
    pub async fn batch_get_rows(&self, table: &str, items: &[ItemId]) -> usize {
        let keys: Vec<Item> = items
            .iter()
            .map(|item| {
                HashMap::from([
                    ("item_id".to_owned(), AttributeValue::S(item.to_string())),
                    ("shard".to_owned(), AttributeValue::S("D#0".into())),
                ])
            })
            .collect();
        let output = self
            .client
            .batch_get_item()
            .request_items(
                table,
                KeysAndAttributes::builder()
                    .set_keys(Some(keys))
                    .build()
                    .expect("keys"),
            )
            .send()
            .await
            .expect("BatchGetItem");
        output
            .responses
            .and_then(|mut r| r.remove(table))
            .map_or(0, |rows| rows.len())
    }
}
