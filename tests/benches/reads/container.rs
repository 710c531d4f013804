//! One warm Lambda container reading counts: the public count handlers over a client whose
//! requests are counted and whose reads are priced, the naive reads beside them, and what
//! the requests cost.

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
use crate::priced::PricedReads;
use crate::sent::SentRequests;

/// One warm Lambda container: an `App` over a client whose requests are counted and priced.
pub struct Container {
    app: App,
    store: CountsStore,
    client: Client,
    /// The table the handlers read namespace rules and item owners from.
    catalog_table: String,
    sent: SentRequests,
    priced: PricedReads,
}

/// What the reads cost since the last one: the requests on the wire, the read units of each
/// read by AWS's size rules, and the Catalog table's share of both.
pub struct Cost {
    reads: u64,
    requests: u64,
    /// Requests on the wire that are not a priced read: a write, or an attempt that failed.
    others: u64,
    half_units: u64,
    catalog_requests: u64,
    catalog_half_units: u64,
}

impl Cost {
    fn per_read(&self, n: u64) -> f64 {
        n as f64 / self.reads as f64
    }

    /// Requests and RCU per read.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{:.4} / {:.4}",
            self.per_read(self.requests),
            self.per_read(self.half_units) / 2.0
        );
        if self.others > 0 {
            line.push_str(&format!(" ({} other)", self.others));
        }
        line
    }

    /// The catalog's requests and RCU per read.
    pub fn catalog_line(&self) -> String {
        format!(
            "{:.4} / {:.4}",
            self.per_read(self.catalog_requests),
            self.per_read(self.catalog_half_units) / 2.0
        )
    }

    /// Requests a second, the reads coming `rate` a second.
    pub fn requests_per_second(&self, rate: f64) -> f64 {
        self.per_read(self.requests) * rate
    }

    /// The catalog's requests and RCU a second, the reads coming `rate` a second.
    pub fn catalog_per_second(&self, rate: f64) -> String {
        format!(
            "{:.2} / {:.2}",
            self.per_read(self.catalog_requests) * rate,
            self.per_read(self.catalog_half_units) / 2.0 * rate
        )
    }
}

impl Container {
    pub fn new(stack: &TestStack) -> Self {
        let sent = SentRequests::default();
        let priced = PricedReads::default();
        let client = Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&stack.stack.aws.sdk)
                .interceptor(sent.clone())
                .interceptor(priced.clone())
                .build(),
        );
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
            catalog_table: environment["CATALOG_TABLE"].clone(),
            sent,
            priced,
        }
    }

    /// The requests sent since the last call over `reads` reads, each read priced as it was
    /// answered.
    pub fn cost(&self, reads: u64) -> Cost {
        let sent = self.sent.take().len() as u64;
        let priced = self.priced.take();
        let catalog: Vec<_> = priced
            .iter()
            .filter(|read| read.table == self.catalog_table)
            .collect();
        Cost {
            reads,
            requests: sent,
            others: sent - priced.len() as u64,
            half_units: priced.iter().map(|read| read.half_units).sum(),
            catalog_requests: catalog.len() as u64,
            catalog_half_units: catalog.iter().map(|read| read.half_units).sum(),
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
