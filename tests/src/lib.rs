//! The test harness: one local stack per test, with its own uniquely named resources, on an
//! emulator the test's process starts and stops (or on `AWS_ENDPOINT_URL` when it is set:
//! LocalStack, or one emulator `likes-local exec` shares between tests).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use likes_local::jwt::JwtAuthorizer;
use likes_local::stack::{AwsTarget, Schedules, Stack, StackOptions};
use serde_json::Value;
use tokio::net::TcpStream;

pub use likes_local::stack;

pub mod exports;
pub mod live;

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

/// Virtual shards per stream shard for test stacks: `LIKES_STREAM_SHARDS`, 4 unless set.
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

pub fn stream_shards() -> usize {
    stack::stream_shards_from_env().expect("LIKES_STREAM_SHARDS")
}

/// What a test's stack is started with: [`TestStack::builder`]'s plain stack, changed by
/// each method, started by [`StackBuilder::start`].
#[derive(Debug, Clone)]
pub struct StackBuilder {
    environment: BTreeMap<String, String>,
    schedules: Schedules,
    mappings: BTreeMap<String, serde_yaml::Value>,
    stream_shards: usize,
    parameters: BTreeMap<String, String>,
}

impl StackBuilder {
    /// The template's schedules that fire (none unless set).
    pub fn schedules(mut self, schedules: Schedules) -> Self {
        self.schedules = schedules;
        self
    }

    /// Every schedule of the template fires, as in `make run`: the pulse publishes `as_of`
    /// and writes probe rows.
    pub fn scheduled(self) -> Self {
        self.schedules(Schedules::All)
    }

    /// `function`'s schedules fire too (a logical id).
    pub fn fire(mut self, function: &str) -> Self {
        self.schedules = match self.schedules {
            Schedules::All => Schedules::All,
            Schedules::None => Schedules::Only(vec![function.to_owned()]),
            Schedules::Only(mut functions) => {
                functions.push(function.to_owned());
                Schedules::Only(functions)
            }
        };
        self
    }

    /// The leaderboard refresher's schedule fires too, so the boards are re-ranked as the
    /// log is applied.
    pub fn refreshing_boards(self) -> Self {
        self.fire(LEADERBOARD_REFRESH_FUNCTION)
    }

    /// Environment variables set over the template's, for every function that declares
    /// them (a live test's shorter catch-up bound, say).
    pub fn environment(mut self, variables: &[(&str, &str)]) -> Self {
        self.environment.extend(parameters_of(variables));
        self
    }

    /// Template parameters set over their defaults, as `sam deploy --parameter-overrides`
    /// sets them (a write limit of the test's own, say).
    pub fn parameters(mut self, parameters: &[(&str, &str)]) -> Self {
        self.parameters.extend(parameters_of(parameters));
        self
    }

    /// `shards` virtual shards per stream shard, and `properties` set over every
    /// DynamoDB-stream mapping's (`MaximumRetryAttempts`, say).
    pub fn mappings(mut self, shards: usize, properties: &[(&str, i64)]) -> Self {
        self.stream_shards = shards;
        self.mappings.extend(
            properties
                .iter()
                .map(|(name, value)| ((*name).to_owned(), serde_yaml::Value::from(*value))),
        );
        self
    }

    /// Exactly as template.yaml declares it: none of the test's variables, every schedule
    /// fired.
    pub fn as_deployed(mut self) -> Self {
        self.environment.clear();
        self.scheduled()
    }

    /// For reconciliation runs the test starts itself ([`TestStack::reconciler`]) with
    /// `RecountEngine` `engine` (`function`, or `athena`: the emulator's Athena runs the
    /// recount query in DuckDB): the pulse is fired, the scheduled reconciliation is not,
    /// and epochs are [`TEST_EPOCH_SECONDS`] long with an export uncertainty of one second,
    /// so a test reaches a cut in seconds. No refresher ranks the boards unless the test
    /// fires it too, so a run leaves the all-time board unchecked (`leaderboard_behind`).
    pub fn for_reconciliation(self, engine: &str) -> Self {
        self.fire("PulseFunction")
            .environment(&[
                ("RECONCILE_EPOCH_SECONDS", &TEST_EPOCH_SECONDS.to_string()),
                ("EXPORT_UNCERTAINTY_SECONDS", "1"),
                // No heartbeats: a test that fails a log consumer until its batches go to
                // the dead-letter queue waits for the failures to end, and a trickle of
                // heartbeats on every shard would keep them going. Likes move the boards'
                // `as_of` here.
                ("HEARTBEAT_AFTER_SECONDS", "86400"),
            ])
            .parameters(&[("RecountEngine", engine)])
    }

    pub async fn start(self) -> TestStack {
        let aws = AwsTarget::connect()
            .await
            .expect("an AWS endpoint: run through `make test`, or have .venv ready");
        let options = StackOptions {
            prefix: unique_prefix(),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ws_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            web_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            environment_overrides: self.environment,
            schedules: self.schedules,
            mapping_overrides: self.mappings,
            stream_shards: self.stream_shards,
            parameters: self.parameters,
        };
        let stack = Stack::start(aws, options)
            .await
            .expect("local stack starts");
        TestStack {
            stack,
            authorizer: JwtAuthorizer::from_env(),
        }
    }
}

impl TestStack {
    /// The plain stack, to change before it starts: its aggregator cuts
    /// [`TEST_CHUNK_RECORDS`]-record chunks, its streams split into `LIKES_STREAM_SHARDS`
    /// virtual shards (4 unless set), and the template's schedules are not fired (the stream
    /// holds only what the test wrote, and `as_of` stays unknown).
    pub fn builder() -> StackBuilder {
        StackBuilder {
            environment: test_overrides(),
            schedules: Schedules::None,
            mappings: BTreeMap::new(),
            stream_shards: stream_shards(),
            parameters: BTreeMap::new(),
        }
    }

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
        let mut request = TestRequest {
            addr: self.stack.http_addr,
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        if let Some(sub) = sub {
            request = request.header("authorization", &format!("Bearer {}", self.token(sub)));
        }
        request
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

/// The nearest-rank percentile `p` (0-100) of `values`; 0 for none.
pub fn percentile(values: &[u64], p: f64) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return 0;
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
    use likes_core::leaderboard::Window;
    let now = likes_core::clock::now_ms();
    let later = Window::day_of(now + within.as_millis() as i64);
    if Window::day_of(now) != later {
        let midnight = later.start_ms().expect("a day has a start");
        tokio::time::sleep(std::time::Duration::from_millis(
            (midnight - now) as u64 + 1_000,
        ))
        .await;
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

/// A request to the local HTTP front, over a real TCP connection.
pub struct TestRequest {
    addr: SocketAddr,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl TestRequest {
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn json(mut self, body: &Value) -> Self {
        self.body = body.to_string().into_bytes();
        self.header("content-type", "application/json")
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    pub async fn send(self) -> TestResponse {
        let stream = TcpStream::connect(self.addr).await.expect("front accepts");
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("HTTP/1 handshake");
        tokio::spawn(connection);
        let mut request = http::Request::builder()
            .method(self.method.as_str())
            .uri(&self.path)
            .header("host", self.addr.to_string());
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(Bytes::from(self.body)))
            .expect("valid test request");
        let response = sender.send_request(request).await.expect("front answers");
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .expect("whole body")
            .to_bytes()
            .to_vec();
        TestResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        }
    }
}

#[derive(Debug)]
pub struct TestResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl TestResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Asserts the status, showing the body when it differs.
    pub fn assert_status(&self, status: u16) {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts an RFC 9457 problem with `status`; returns it.
    pub fn problem(&self, status: u16) -> Value {
        self.assert_status(status);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let problem = self.json();
        assert_eq!(problem["status"], status);
        for member in ["type", "title", "detail"] {
            assert!(
                problem[member].is_string(),
                "problem has {member}: {problem}"
            );
        }
        problem
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
/// The mapping that feeds the leaderboard from the Kinesis event log.
pub const LEADERBOARD_FUNCTION: &str = "LeaderboardFunction";
/// The scheduled function that re-ranks the leaderboards.
pub const LEADERBOARD_REFRESH_FUNCTION: &str = "LeaderboardRefreshFunction";
/// The mapping that feeds the likers lists from the Kinesis event log.
pub const LIKERS_FUNCTION: &str = "LikersFunction";

/// The user ids of a likers page, in its order.
pub fn liker_ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|liker| liker["user_id"].as_str().expect("user_id").to_owned())
        .collect()
}

/// Every item's like and dislike count, recounted from the source of truth.
pub type Recount = std::collections::BTreeMap<String, likes_core::pipeline::Counts>;

impl TestStack {
    /// The aggregator's event source mapping: its fault switches, counters and `settle`.
    pub fn pipeline(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(AGGREGATOR_FUNCTION)
            .expect("template.yaml maps the Reactions stream to AggregatorFunction")
    }

    /// The publisher's event source mapping: the event log's faults and counters.
    pub fn publisher(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(PUBLISHER_FUNCTION)
            .expect("template.yaml maps the Reactions stream to PublisherFunction")
    }

    /// The eraser's event source mapping: its fault switches and counters.
    pub fn eraser(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(ERASE_FUNCTION)
            .expect("template.yaml maps the Erasures stream to EraseFunction")
    }

    /// Waits until the publisher put the events of everything in the stream now (panics
    /// after 60 s).
    pub async fn settle_events(&self) -> likes_local::faults::Counters {
        self.publisher()
            .settle(std::time::Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// The leaderboard's event source mapping (on the Kinesis log): its faults and counters.
    pub fn leaderboard(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.log_reader(LEADERBOARD_FUNCTION)
    }

    /// The likers consumer's event source mapping (on the Kinesis log).
    pub fn likers(&self) -> &likes_local::event_source_mapping::Pipeline {
        self.log_reader(LIKERS_FUNCTION)
    }

    fn log_reader(&self, function: &str) -> &likes_local::event_source_mapping::Pipeline {
        self.stack
            .pipeline(function)
            .unwrap_or_else(|| panic!("template.yaml maps the event log to {function}"))
    }

    /// Waits until every flip in the Reactions stream now is on the event log and applied
    /// to the leaderboard (panics after 60 s each).
    pub async fn settle_leaderboard(&self) -> likes_local::faults::Counters {
        self.settle_log_reader(self.leaderboard()).await
    }

    /// The same for the likers lists.
    pub async fn settle_likers(&self) -> likes_local::faults::Counters {
        self.settle_log_reader(self.likers()).await
    }

    async fn settle_log_reader(
        &self,
        reader: &likes_local::event_source_mapping::Pipeline,
    ) -> likes_local::faults::Counters {
        self.settle_events().await;
        reader
            .settle(std::time::Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// The reconcile function's handler state, configured like the stack's function.
    pub fn reconciler(&self) -> likes_reconcile::Reconciler {
        self.reconciler_with(&[])
    }

    /// As [`Self::reconciler`], with some of the function's variables set otherwise.
    pub fn reconciler_with(&self, overrides: &[(&str, &str)]) -> likes_reconcile::Reconciler {
        let mut environment = self
            .stack
            .function_environment("ReconcileFunction")
            .unwrap_or_else(|err| panic!("{err}"));
        for (name, value) in overrides {
            environment.insert((*name).to_owned(), (*value).to_owned());
        }
        let config =
            likes_reconcile::ReconcileConfig::from_lookup(|name| environment.get(name).cloned())
                .unwrap_or_else(|err| panic!("{err}"));
        likes_reconcile::Reconciler::new(
            config,
            self.dynamodb(),
            likes_local::stack::s3_client(&self.stack.aws.sdk),
            self.athena(),
        )
    }

    pub fn athena(&self) -> aws_sdk_athena::Client {
        aws_sdk_athena::Client::new(&self.stack.aws.sdk)
    }

    /// The epochs and export uncertainty the stack's aggregator and reconciliation use.
    pub fn reconcile_period(&self) -> likes_core::reconcile::Period {
        let environment = self
            .stack
            .function_environment("ReconcileFunction")
            .unwrap_or_else(|err| panic!("{err}"));
        let seconds = |name: &str| -> i64 {
            environment[name]
                .parse()
                .unwrap_or_else(|_| panic!("{name} is a number"))
        };
        likes_core::reconcile::Period {
            length_ms: seconds("RECONCILE_EPOCH_SECONDS") * 1000,
            uncertainty_ms: seconds("EXPORT_UNCERTAINTY_SECONDS") * 1000,
        }
    }

    /// The first cut at least `margin_ms` from now, so every write so far is clear of its
    /// uncertainty.
    pub fn next_cut(&self, margin_ms: i64) -> i64 {
        let period = self.reconcile_period();
        period.cut_at(likes_core::clock::now_ms() + margin_ms + period.uncertainty_ms)
            + period.length_ms
    }

    /// The first moment a write is clear of the cut's uncertainty, even as the stream records
    /// it: `ApproximateCreationDateTime` is rounded down to the second.
    pub fn clear_of(&self, cut: i64) -> i64 {
        cut + self.reconcile_period().uncertainty_ms + 1_200
    }

    /// A count row edited by hand: `likes` added to `item`'s row `shard`.
    pub async fn edit_count_row(&self, item: &str, shard: &str, likes: i64) {
        use aws_sdk_dynamodb::types::AttributeValue;
        self.dynamodb()
            .update_item()
            .table_name(self.name("CountsTable"))
            .key("item_id", AttributeValue::S(item.into()))
            .key("shard", AttributeValue::S(shard.into()))
            .update_expression("ADD like_count :likes")
            .expression_attribute_values(":likes", AttributeValue::N(likes.to_string()))
            .send()
            .await
            .expect("UpdateItem of a count row");
    }

    /// A reaction row put behind the API, with `attributes` beside its keys.
    pub async fn put_reaction_row(
        &self,
        user: &str,
        item: &str,
        attributes: &[(&str, aws_sdk_dynamodb::types::AttributeValue)],
    ) {
        use aws_sdk_dynamodb::types::AttributeValue;
        let mut request = self
            .dynamodb()
            .put_item()
            .table_name(self.name("ReactionsTable"))
            .item("user_id", AttributeValue::S(user.into()))
            .item("item_id", AttributeValue::S(item.into()));
        for (name, value) in attributes {
            request = request.item(*name, value.clone());
        }
        request.send().await.expect("PutItem of a reaction row");
    }

    /// Waits until the published `as_of` is at least `at_ms` (panics after `timeout`).
    pub async fn wait_for_as_of(&self, at_ms: i64, timeout: std::time::Duration) -> i64 {
        let reached = within(timeout, async || {
            let as_of = self.like_count("game:as-of-probe").await.json()["as_of"].clone();
            match as_of
                .as_str()
                .and_then(|t| likes_core::clock::parse_rfc3339(t).ok())
            {
                Some(as_of) if as_of >= at_ms => Ok(as_of),
                _ => Err(format!("as_of {as_of} did not reach {at_ms}")),
            }
        })
        .await;
        match reached {
            Ok(as_of) => as_of,
            Err(seen) => panic!(
                "{seen} within {timeout:?}\n{}",
                self.watermark_report().await
            ),
        }
    }

    /// Every stream shard's reading, and every virtual shard's progress and watermark: what
    /// `as_of` is computed from, for a failure to show which shard held it back.
    async fn watermark_report(&self) -> String {
        let shards = self.pipeline().shards();
        let ids: Vec<String> = shards.keys().cloned().collect();
        let watermarks =
            likes_store::FreshnessStore::new(self.dynamodb(), self.name("CountsTable"))
                .watermarks(&ids)
                .await;
        let mut report = format!("stream shards: {:#?}\n", self.pipeline().stream_shards());
        for (id, progress) in &shards {
            let watermark = watermarks.as_ref().map(|w| w.get(id));
            report.push_str(&format!("{id}: {progress:?}, watermark {watermark:?}\n"));
        }
        report
    }

    pub fn kinesis(&self) -> aws_sdk_kinesis::Client {
        aws_sdk_kinesis::Client::new(&self.stack.aws.sdk)
    }

    pub fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.stack.aws.sdk)
    }

    /// The partition of `item`'s all-time score row.
    pub fn all_time_board(&self, item: &str) -> String {
        likes_core::leaderboard::Window::All.board_key(likes_core::leaderboard::item_shard(
            item,
            self.leaderboard_shards(),
        ))
    }

    /// The leaderboard's store, with the stack's board shards.
    pub fn leaderboard_store(&self) -> likes_store::LeaderboardStore {
        likes_store::LeaderboardStore::new(self.dynamodb(), self.name("LeaderboardTable"))
            .with_board_shards(self.leaderboard_shards())
    }

    fn leaderboard_shards(&self) -> u32 {
        self.stack
            .function_environment("LeaderboardFunction")
            .unwrap_or_else(|err| panic!("{err}"))["LEADERBOARD_SHARDS"]
            .parse()
            .expect("LEADERBOARD_SHARDS is a number")
    }

    /// The key of `item`'s all-time score row.
    pub fn all_time_score_key(&self, item: &str) -> likes_store::rows::Item {
        use aws_sdk_dynamodb::types::AttributeValue;
        likes_store::rows::Item::from([
            (
                "board".to_owned(),
                AttributeValue::S(self.all_time_board(item)),
            ),
            ("item_id".to_owned(), AttributeValue::S(item.into())),
        ])
    }

    /// `item`'s all-time score row, read strongly consistent (panics when it has none).
    pub async fn all_time_score_row(&self, item: &str) -> likes_store::rows::Item {
        self.dynamodb()
            .get_item()
            .table_name(self.name("LeaderboardTable"))
            .set_key(Some(self.all_time_score_key(item)))
            .consistent_read(true)
            .send()
            .await
            .expect("GetItem of a score row")
            .item
            .unwrap_or_else(|| panic!("{item} has no all-time score row"))
    }

    /// `delta` added to `item`'s all-time score row by hand, as a lost event would leave it.
    pub async fn edit_all_time_score(&self, item: &str, delta: i64) {
        self.dynamodb()
            .update_item()
            .table_name(self.name("LeaderboardTable"))
            .key(
                "board",
                aws_sdk_dynamodb::types::AttributeValue::S(self.all_time_board(item)),
            )
            .key(
                "item_id",
                aws_sdk_dynamodb::types::AttributeValue::S(item.into()),
            )
            .update_expression("ADD score :delta")
            .expression_attribute_values(
                ":delta",
                aws_sdk_dynamodb::types::AttributeValue::N(delta.to_string()),
            )
            .send()
            .await
            .expect("UpdateItem of a score row");
    }

    pub fn counts_store(&self) -> likes_store::CountsStore {
        likes_store::CountsStore::new(self.dynamodb(), self.name("CountsTable"))
    }

    pub fn reactions_store(&self) -> likes_store::ReactionsStore {
        likes_store::ReactionsStore::new(self.dynamodb(), self.name("ReactionsTable"))
    }

    /// Waits until the pipeline applied everything in the stream now (panics after 60 s).
    pub async fn settle(&self) -> likes_local::faults::Counters {
        self.pipeline()
            .settle(std::time::Duration::from_secs(60))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// `GET /v1/items/{item}/likers?{query}` as a reader: a private 200's page.
    pub async fn likers_page(&self, item: &str, query: &str) -> Value {
        let response = self
            .request(
                "GET",
                &format!("/v1/items/{item}/likers?{query}"),
                Some("reader"),
            )
            .send()
            .await;
        response.assert_status(200);
        assert_eq!(response.header("cache-control"), Some("private, no-store"));
        response.json()
    }

    /// Every page of `item`'s likers at `limit` per page: (user_id, liked_at) in order.
    pub async fn all_likers(&self, item: &str, limit: usize) -> Vec<(String, String)> {
        let mut listed = Vec::new();
        let mut query = format!("limit={limit}");
        loop {
            let page = self.likers_page(item, &query).await;
            let items = page["items"].as_array().expect("items").clone();
            assert!(items.len() <= limit, "{page}");
            for liker in &items {
                listed.push((
                    liker["user_id"].as_str().expect("user_id").to_owned(),
                    liker["liked_at"].as_str().expect("liked_at").to_owned(),
                ));
            }
            match page["next_cursor"].as_str() {
                None => {
                    assert_eq!(page["next_cursor"], Value::Null);
                    return listed;
                }
                Some(cursor) => {
                    assert_eq!(items.len(), limit, "only the last page is short");
                    query = format!("limit={limit}&cursor={cursor}");
                }
            }
        }
    }

    /// Every row of a table of the stack (a strongly consistent Scan, page by page).
    pub async fn rows(&self, logical_id: &str) -> Vec<likes_store::rows::Item> {
        let mut rows = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .dynamodb()
                .scan()
                .table_name(self.name(logical_id))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .unwrap_or_else(|err| panic!("Scan of {logical_id}: {err:?}"));
            rows.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(key) => start = Some(key),
                None => return rows,
            }
        }
    }

    /// The item's likers as the source of truth holds them: its LIKE rows in the Reactions
    /// table, newest first (ties by user id, descending), with liked_at as the API writes it.
    pub async fn liked_rows(&self, item: &str) -> Vec<(String, String)> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let like = AttributeValue::S("LIKE".into());
        let mut rows: Vec<(i64, String)> = self
            .rows("ReactionsTable")
            .await
            .into_iter()
            .filter(|row| {
                row.get("item_id")
                    .and_then(|i| i.as_s().ok())
                    .map(String::as_str)
                    == Some(item)
                    && row.get("state") == Some(&like)
            })
            .map(|row| {
                let user = row["user_id"].as_s().expect("user_id").clone();
                let liked_at = row["liked_at"]
                    .as_n()
                    .expect("liked_at")
                    .parse()
                    .expect("a number");
                (liked_at, user)
            })
            .collect();
        rows.sort_by(|a, b| b.cmp(a));
        rows.into_iter()
            .map(|(at, user)| (user, likes_core::clock::rfc3339(at)))
            .collect()
    }

    /// Counts rows in LIKE and DISLIKE per item in the Reactions table (a full Scan).
    pub async fn recount(&self) -> Recount {
        use aws_sdk_dynamodb::types::AttributeValue;
        let mut counts = Recount::new();
        for row in self.rows("ReactionsTable").await {
            let (Some(AttributeValue::S(item)), Some(AttributeValue::S(state))) =
                (row.get("item_id"), row.get("state"))
            else {
                continue;
            };
            let entry = counts.entry(item.clone()).or_default();
            match state.as_str() {
                "LIKE" => entry.like_count += 1,
                "DISLIKE" => entry.dislike_count += 1,
                _ => {}
            }
        }
        counts
    }

    /// The pipeline's invariant: every item's count (a `CountsStore::read`) equals the
    /// recount of the Reactions table, for `items` and every item the table holds.
    pub async fn assert_counts_match_recount(&self, items: &[&str]) -> Recount {
        let recount = self.recount().await;
        let all: std::collections::BTreeSet<String> = items
            .iter()
            .map(|i| (*i).to_owned())
            .chain(recount.keys().cloned())
            .collect();
        let store = self.counts_store();
        let mut wrong = Vec::new();
        for item in &all {
            let id = likes_core::ItemId::parse(item).expect("a valid item id");
            let counted = store.read(&id).await.expect("count read");
            let expected = recount.get(item).copied().unwrap_or_default();
            if counted != expected {
                wrong.push(format!("{item}: counted {counted:?}, recount {expected:?}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "counts differ from the recount of the Reactions table:\n  {}\npipeline: {:?}",
            wrong.join("\n  "),
            self.pipeline().counters()
        );
        recount
    }

    /// Every event on the Kinesis event log, in no particular order, duplicates included
    /// (heartbeats left out): each shard read from TRIM_HORIZON to its end.
    pub async fn events(&self) -> Vec<likes_core::pipeline::ReactionEvent> {
        let kinesis = self.kinesis();
        let stream = self.name("EventsStream");
        let shards = kinesis
            .list_shards()
            .stream_name(&stream)
            .send()
            .await
            .expect("ListShards of the events stream");
        let mut events = Vec::new();
        for shard in shards.shards() {
            let mut iterator = kinesis
                .get_shard_iterator()
                .stream_name(&stream)
                .shard_id(shard.shard_id())
                .shard_iterator_type(aws_sdk_kinesis::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("GetShardIterator")
                .shard_iterator;
            while let Some(current) = iterator.take() {
                let page = kinesis
                    .get_records()
                    .shard_iterator(current)
                    .limit(10_000)
                    .send()
                    .await
                    .expect("GetRecords of the events stream");
                for record in page.records() {
                    let read = likes_core::pipeline::LogRecord::parse(record.data().as_ref())
                        .expect("an event or a heartbeat on the event log");
                    events.extend(read.event());
                }
                if page.records().is_empty() {
                    break;
                }
                iterator = page.next_shard_iterator;
            }
        }
        events
    }
}

impl TestStack {
    /// Sets `user`'s reaction to `item` through the write path (`ReactionsStore::set`), with
    /// a fresh idempotency key; returns what the write came to.
    pub async fn react(
        &self,
        user: &str,
        item: &str,
        state: likes_core::ReactionState,
    ) -> likes_core::WriteOutcome {
        static KEYS: AtomicU32 = AtomicU32::new(0);
        let key = format!(
            "k-{}-{}",
            std::process::id(),
            KEYS.fetch_add(1, Ordering::Relaxed)
        );
        self.react_with_key(user, item, state, &key).await
    }

    /// As [`TestStack::react`] with a given idempotency key (a client's retry reuses it).
    pub async fn react_with_key(
        &self,
        user: &str,
        item: &str,
        state: likes_core::ReactionState,
        key: &str,
    ) -> likes_core::WriteOutcome {
        let request = likes_core::WriteRequest {
            target: state,
            key: Some(
                likes_core::IdempotencyKey::parse(key)
                    .expect("a valid key")
                    .hash(),
            ),
            if_match: None,
        };
        self.reactions_store()
            .set(
                &likes_core::UserId::parse(user).expect("a valid user id"),
                &likes_core::ItemId::parse(item).expect("a valid item id"),
                &request,
                likes_core::clock::now_ms(),
            )
            .await
            .expect("the reaction write is answered")
    }

    /// Deletes a Reactions row outright (account erasure): the stream carries a REMOVE.
    pub async fn erase_row(&self, user: &str, item: &str) {
        use aws_sdk_dynamodb::types::AttributeValue;
        self.dynamodb()
            .delete_item()
            .table_name(self.name("ReactionsTable"))
            .key("user_id", AttributeValue::S(user.to_owned()))
            .key("item_id", AttributeValue::S(item.to_owned()))
            .send()
            .await
            .expect("DeleteItem of a Reactions row");
    }
}

impl TestStack {
    /// How many records the Reactions stream holds now (every shard, from TRIM_HORIZON),
    /// read independently of the pipeline.
    pub async fn stream_records(&self) -> usize {
        self.stream_partition_keys().await.len()
    }

    /// How many records the Reactions stream holds now for each of `users`: what a test
    /// expects of the pipeline, whatever the emulator emits per write (moto two INSERTs for
    /// a new row and a MODIFY for a no-op write, AWS one and none).
    pub async fn stream_records_of(&self, users: &[String]) -> usize {
        let users: std::collections::BTreeSet<&String> = users.iter().collect();
        self.stream_partition_keys()
            .await
            .iter()
            .filter(|user| users.contains(user))
            .count()
    }

    /// Splits every open shard of the Reactions stream in two, as DynamoDB does over a
    /// table's life (the emulator's own operation: AWS has no API for it). Each child's id,
    /// by parent. Lambda finishes a parent's open tumbling window before its children
    /// start, so the split comes near a window's end: what is written after it is not held
    /// back for most of a window.
    pub async fn split_reactions_stream(&self) -> BTreeMap<String, Vec<String>> {
        if let Some(window) = self.pipeline().config().tumbling_window {
            let now = likes_core::clock::now_ms() as u128;
            let into = std::time::Duration::from_millis((now % window.as_millis()) as u64);
            let before_end = std::time::Duration::from_millis(1_500);
            tokio::time::sleep((window - into).saturating_sub(before_end)).await;
        }
        let endpoint = &self.stack.aws.endpoint_url;
        let addr = endpoint
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|err| panic!("the emulator listens on {endpoint}: {err}"));
        let arn = self.pipeline().config().stream_arn.clone();
        let answer = TestRequest {
            addr,
            method: "POST".into(),
            path: "/".into(),
            headers: vec![
                (
                    "x-amz-target".into(),
                    "LikesEmulator.SplitStreamShards".into(),
                ),
                ("content-type".into(), "application/x-amz-json-1.0".into()),
            ],
            body: serde_json::json!({ "StreamArn": arn })
                .to_string()
                .into_bytes(),
        }
        .send()
        .await;
        answer.assert_status(200);
        serde_json::from_value(answer.json()["Children"].clone()).expect("children by parent")
    }

    /// The `user_id` of every record in the Reactions stream, in each shard's order.
    async fn stream_partition_keys(&self) -> Vec<String> {
        self.stream_partition_keys_by_shard()
            .await
            .into_values()
            .flatten()
            .collect()
    }

    /// The `user_id` of every record in the Reactions stream, by shard, in its order.
    pub async fn stream_partition_keys_by_shard(&self) -> BTreeMap<String, Vec<String>> {
        use aws_sdk_dynamodbstreams::types::{AttributeValue, ShardIteratorType};
        let streams = aws_sdk_dynamodbstreams::Client::new(&self.stack.aws.sdk);
        let arn = self.pipeline().config().stream_arn.clone();
        let description = streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .expect("DescribeStream")
            .stream_description
            .expect("a stream description");
        let mut by_shard = BTreeMap::new();
        for shard in description.shards() {
            let keys: &mut Vec<String> = by_shard
                .entry(shard.shard_id().unwrap_or_default().to_owned())
                .or_default();
            let mut iterator = streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(shard.shard_id().unwrap_or_default())
                .shard_iterator_type(ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("GetShardIterator")
                .shard_iterator;
            while let Some(current) = iterator.take() {
                let page = streams
                    .get_records()
                    .shard_iterator(current)
                    .send()
                    .await
                    .expect("GetRecords");
                if page.records().is_empty() {
                    break;
                }
                for record in page.records() {
                    let user = record
                        .dynamodb()
                        .and_then(|change| change.keys())
                        .and_then(|keys| keys.get("user_id"));
                    if let Some(AttributeValue::S(user)) = user {
                        keys.push(user.clone());
                    }
                }
                iterator = page.next_shard_iterator;
            }
        }
        by_shard
    }

    /// Waits, if need be, for the aggregator's next tumbling window, so that at least `room`
    /// is left in the current one: Lambda never puts records of two windows in one batch,
    /// and a test that needs one batch must write it within a window.
    pub async fn wait_for_window_room(&self, room: std::time::Duration) {
        let Some(window) = self.pipeline().config().tumbling_window else {
            return;
        };
        let now = likes_core::clock::now_ms() as u128;
        let into = std::time::Duration::from_millis((now % window.as_millis()) as u64);
        if window.saturating_sub(into) < room {
            // A little past the boundary: the stream stamps records with its own clock.
            tokio::time::sleep(window - into + std::time::Duration::from_millis(200)).await;
        }
    }

    /// `count` user ids `<tag>-u<i>` whose records land on virtual shard `shard` of the
    /// aggregator's mapping (one shard's records make one batch, as on AWS).
    pub fn users_on_shard(&self, tag: &str, shard: usize, count: usize) -> Vec<String> {
        let pipeline = self.pipeline();
        (0..)
            .map(|i| format!("{tag}-u{i}"))
            .filter(|user| pipeline.shard_index(user) == shard)
            .take(count)
            .collect()
    }
}
