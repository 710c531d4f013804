//! The test harness: one local stack per test, with its own uniquely named resources, on an
//! emulator the test's process starts and stops (or on `AWS_ENDPOINT_URL` when it is set:
//! LocalStack, or one emulator `likes-local exec` shares between tests).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use likes_local::jwt::JwtAuthorizer;
use likes_local::stack::Stack;
use serde_json::Value;

pub use likes_local::stack;

pub mod aws_calls;
pub mod billing;
mod builder;
pub mod docs;
pub mod exports;
mod front;
pub mod live;
mod mappings;
mod reconcile;
mod streams;
mod tables;

pub use builder::{Aws, StackBuilder};
pub use front::{TestRequest, TestResponse};
pub use streams::LogArrival;

/// A running stack for one test.
pub struct TestStack {
    pub stack: Stack,
    authorizer: JwtAuthorizer,
}

/// A resource prefix no other test, and no earlier run against the same emulator, uses.
pub fn unique_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    format!(
        "t{}-{}-{}",
        std::process::id(),
        nanos % 1_000_000_000_000,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Records per aggregator chunk in tests. The template's value (1000) makes a batch one
/// chunk unless it touches 99 items; tests of chunk boundaries (crash after k chunks, a retry
/// ending inside a claim) need several chunks per batch, which 100-record chunks give with
/// histories moto writes in seconds. The claim logic does not depend on the size.
pub const TEST_CHUNK_RECORDS: usize = 100;

fn test_overrides() -> BTreeMap<String, String> {
    [("CHUNK_RECORDS".to_owned(), TEST_CHUNK_RECORDS.to_string())].into()
}

fn parameters_of(parameters: &[(&str, &str)]) -> BTreeMap<String, String> {
    parameters
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// The project's pinned copy of `tool` in `.venv/bin` (panics, saying how to install it,
/// when it is missing).
pub fn venv_tool(tool: &str) -> std::path::PathBuf {
    let path = likes_local::repo_root().join(".venv/bin").join(tool);
    assert!(
        path.exists(),
        "{} is missing: `make .venv` installs the project's pinned tools",
        path.display()
    );
    path
}

/// Virtual shards per stream shard for test stacks: `LIKES_STREAM_SHARDS`, 4 unless set.
pub fn stream_shards() -> usize {
    stack::stream_shards_from_env().expect("LIKES_STREAM_SHARDS")
}

impl TestStack {
    /// The plain stack ([`TestStack::builder`]), started.
    pub async fn start() -> Self {
        Self::builder().start().await
    }

    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.stack.aws.sdk)
    }

    /// The physical name of a template resource.
    pub fn name(&self, logical_id: &str) -> String {
        self.stack
            .resources
            .name(logical_id)
            .unwrap_or_else(|| panic!("{logical_id} is created from the template"))
            .to_owned()
    }

    /// A valid bearer token for `sub`.
    pub fn token(&self, sub: &str) -> String {
        self.authorizer.mint(sub, now_seconds(), 3600)
    }

    /// A valid bearer token for `sub` with the moderators' scope (`likes/moderate`).
    pub fn moderator_token(&self, sub: &str) -> String {
        self.scoped_token(sub, likes_core::moderation::MODERATE_SCOPE)
    }

    /// A token for `sub` whose `scope` claim is `scopes` (space-separated).
    pub fn scoped_token(&self, sub: &str, scopes: &str) -> String {
        self.authorizer
            .mint_scoped(sub, Some(scopes), now_seconds(), 3600)
    }

    /// `PUT path` with `body`, as the holder of `token`, answered 200.
    pub async fn put_as(&self, token: &str, path: &str, body: &Value) {
        self.request("PUT", path, None)
            .header("authorization", &format!("Bearer {token}"))
            .json(body)
            .send()
            .await
            .assert_status(200);
    }

    /// A platform's admin sets `rules` on `namespace` (`PUT /v1/namespaces/{namespace}`).
    pub async fn set_namespace_rules(&self, namespace: &str, rules: &Value) {
        let admin = self.scoped_token("platform", likes_core::namespace::ADMIN_SCOPE);
        let path = format!("/v1/namespaces/{namespace}");
        self.put_as(&admin, &path, rules).await;
    }

    /// A platform service registers `owner` as `item`'s owner (`PUT /v1/items/{item}/owner`).
    pub async fn set_item_owner(&self, item: &str, owner: &str) {
        let service = self.scoped_token("platform-svc", likes_core::namespace::ITEMS_SCOPE);
        let body = serde_json::json!({ "owner_id": owner });
        self.put_as(&service, &format!("/v1/items/{item}/owner"), &body)
            .await;
    }

    /// `GET /v1/items/{item}/like-count`, as a reader.
    pub async fn like_count(&self, item: &str) -> TestResponse {
        self.request(
            "GET",
            &format!("/v1/items/{item}/like-count"),
            Some("reader"),
        )
        .send()
        .await
    }

    /// `user` likes `item` (`PUT …/like`), which must answer 200.
    pub async fn like(&self, user: &str, item: &str) {
        self.request("PUT", &format!("/v1/items/{item}/like"), Some(user))
            .send()
            .await
            .assert_status(200);
    }

    /// Each `(user, item)` of `likes` likes, `clients` requests at once.
    pub async fn like_all(&self, clients: usize, likes: impl Iterator<Item = (String, String)>) {
        use futures_util::stream::{self, StreamExt};
        stream::iter(likes)
            .for_each_concurrent(clients, |(user, item)| async move {
                self.like(&user, &item).await;
            })
            .await;
    }

    /// Reads `GET /v1/leaderboard?<query>` (public) until its items are `expected` (panics
    /// with the last answer after 30 s): the refresher re-ranks the boards once a second
    /// after the log is applied. Returns that answer.
    pub async fn leaderboard_until(&self, query: &str, expected: &Value) -> Value {
        eventually(std::time::Duration::from_secs(30), async || {
            let response = self
                .request("GET", &format!("/v1/leaderboard?{query}"), None)
                .send()
                .await;
            response.assert_status(200);
            let board = response.json();
            if &board["items"] == expected {
                return Ok(board);
            }
            Err(format!("the board {query} is {board}, not {expected}"))
        })
        .await
    }

    /// Polls moderation job `id` as a moderator until it is done (panics after 120 s: a
    /// removal sweeps its item's likers buckets until the log and the counts show nothing
    /// left, a minute on a busy emulator); returns its last answer.
    pub async fn wait_for_retraction(&self, id: &str) -> Value {
        let moderator = format!("Bearer {}", self.moderator_token("moderator"));
        eventually(std::time::Duration::from_secs(120), async || {
            let response = self
                .request("GET", &format!("/v1/moderation/retractions/{id}"), None)
                .header("authorization", &moderator)
                .send()
                .await;
            response.assert_status(200);
            let body = response.json();
            if body["status"] == "done" {
                return Ok(body);
            }
            assert_eq!(body["status"], "running", "{body}");
            Err(format!(
                "retraction {id} is {body}; retractor {:?}",
                self.retractor().counters()
            ))
        })
        .await
    }

    /// Polls `user`'s erasure `id` until it is done (panics after `timeout`), checking each
    /// answer is a private 200; returns every answer seen.
    pub async fn wait_for_erasure(
        &self,
        user: &str,
        id: &str,
        timeout: std::time::Duration,
    ) -> Vec<Value> {
        let mut seen = Vec::new();
        eventually(timeout, async || {
            let response = self
                .request("GET", &format!("/v1/users/me/erasure/{id}"), Some(user))
                .send()
                .await;
            response.assert_status(200);
            assert_eq!(response.header("cache-control"), Some("private, no-store"));
            let body = response.json();
            seen.push(body.clone());
            if body["status"] == "done" {
                return Ok(());
            }
            assert_eq!(body["status"], "running", "{body}");
            Err(format!(
                "erasure {id} is {body}; eraser {:?}",
                self.eraser().counters()
            ))
        })
        .await;
        seen
    }

    /// A request as `sub` (or anonymous with `None`).
    pub fn request(&self, method: &str, path: &str, sub: Option<&str>) -> TestRequest {
        let mut request = TestRequest::new(self.stack.http_addr, method, path);
        if let Some(sub) = sub {
            request = request.header("authorization", &format!("Bearer {}", self.token(sub)));
        }
        request
    }

    /// A request to the web origin (the page's files, the local issuer's sign-in and keys).
    pub fn web_request(&self, method: &str, path: &str) -> TestRequest {
        TestRequest::new(self.stack.web_addr, method, path)
    }
}

/// A count from the environment (benchmark sizes), or `default`.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a count"))
        })
        .unwrap_or(default)
}

/// The nearest-rank percentile `p` (0-100) of `values`; the default (0) for none.
pub fn percentile<T: Copy + PartialOrd + Default>(values: &[T], p: f64) -> T {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Sleeps until `t_ms`.
pub async fn until(t_ms: i64) {
    let wait = t_ms - likes_core::clock::now_ms();
    if wait > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
    }
}

pub fn now_seconds() -> i64 {
    likes_core::clock::now_ms() / 1000
}

/// Waits, when UTC midnight is less than `within` away, until it has passed: a test that reads
/// today's board (the events of the current UTC day) must make and read its events on one day.
pub async fn clear_of_utc_midnight(within: std::time::Duration) {
    clear_of_window_end(likes_core::leaderboard::Window::day_of, within).await
}

/// Waits, when the end of the window `window_of` puts now in is less than `within` away,
/// until it has passed: the current hour's or day's board holds a test's events only if it
/// makes and reads them in one window.
pub async fn clear_of_window_end(
    window_of: fn(i64) -> likes_core::leaderboard::Window,
    within: std::time::Duration,
) {
    let now = likes_core::clock::now_ms();
    let later = window_of(now + within.as_millis() as i64);
    if window_of(now) != later {
        let end = later.start_ms().expect("a window that ends has a start");
        tokio::time::sleep(std::time::Duration::from_millis((end - now) as u64 + 1_000)).await;
    }
}

/// Asks `check` again every 200 ms until it answers `Ok`, and returns that answer; panics
/// after `timeout` with the last `Err`, which says what was seen instead.
pub async fn eventually<T>(
    timeout: std::time::Duration,
    check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    within(timeout, check)
        .await
        .unwrap_or_else(|seen| panic!("not within {timeout:?}: {seen}"))
}

/// As [`eventually`], answering the last `Err` after `timeout` instead of panicking, for a
/// caller that adds more to say.
pub async fn within<T>(
    timeout: std::time::Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match check().await {
            Ok(done) => return Ok(done),
            Err(seen) if std::time::Instant::now() >= deadline => return Err(seen),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}

// ------------------------------------------------------------------ count pipeline

/// Epoch length of [`StackBuilder::for_reconciliation`] stacks.
pub const TEST_EPOCH_SECONDS: i64 = 4;

/// The mapping that feeds the aggregator from the Reactions stream.
pub const AGGREGATOR_FUNCTION: &str = "AggregatorFunction";
/// The mapping that feeds the event log's publisher from the same stream.
pub const PUBLISHER_FUNCTION: &str = "PublisherFunction";

/// The mapping that feeds account erasure jobs from the Erasures stream.
pub const ERASE_FUNCTION: &str = "EraseFunction";
/// The mapping that feeds moderation actions and retraction jobs from the Moderation stream.
pub const RETRACT_FUNCTION: &str = "RetractFunction";
/// The mapping that feeds the leaderboard from the Kinesis event log.
pub const LEADERBOARD_FUNCTION: &str = "LeaderboardFunction";
/// The scheduled function that re-ranks the leaderboards.
pub const LEADERBOARD_REFRESH_FUNCTION: &str = "LeaderboardRefreshFunction";

/// The user ids of a likers page, in its order.
pub fn liker_ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|liker| liker["user_id"].as_str().expect("user_id").to_owned())
        .collect()
}

/// What a curious client reads out of a cursor the API hands out: the string itself and,
/// for it and each of its `.`-separated parts, whatever base64 (URL-safe or standard, padded
/// or not) decodes it to, as lossy UTF-8.
pub fn cursor_readings(cursor: &str) -> Vec<String> {
    use base64::alphabet::{STANDARD, URL_SAFE};
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    let lenient = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let engines = [
        GeneralPurpose::new(&URL_SAFE, lenient),
        GeneralPurpose::new(&STANDARD, lenient),
    ];
    let mut readings = vec![cursor.to_owned()];
    for part in std::iter::once(cursor).chain(cursor.split('.')) {
        for engine in &engines {
            if let Ok(bytes) = engine.decode(part) {
                readings.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    readings
}

/// Panics if any of `readings` (of `what`) holds any of `secrets`, naming which.
pub fn assert_reveals_none(what: &str, readings: &[String], secrets: &[String]) {
    for reading in readings {
        for secret in secrets {
            assert!(
                !reading.contains(secret.as_str()),
                "{what} reveals {secret:?}: {reading:?}"
            );
        }
    }
}

/// Every item's like and dislike count, recounted from the source of truth.
pub type Recount = std::collections::BTreeMap<String, likes_core::pipeline::Counts>;
