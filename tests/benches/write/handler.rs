//! Drives `PUT /v1/items/{item_id}/reaction` the way Lambda does and measures this process's
//! CPU time around it. The emulator is another process, so its CPU is not counted; the local
//! stream pollers run on threads of this one, and theirs is taken out.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use lambda_http::lambda_runtime::{Context, LambdaEvent};
use lambda_http::request::LambdaRequest;
use lambda_http::{service_fn, Adapter, Request, Service};
use likes_api::{App, Endpoint};
use likes_core::clock::now_ms;
use likes_core::{IdempotencyKey, ItemId, UserId, WriteRequest};
use likes_local::http_api::GatewayRequest;
use likes_local::jwt::JwtAuthorizer;
use likes_store::ReactionsStore;
use likes_tests::TestStack;
use serde_json::json;

pub const ROUTE_PATH: &str = "/v1/items/{item_id}/reaction";

/// One reaction request: who, on what, with which key, to which state.
pub struct Reaction {
    pub user: String,
    pub item: String,
    pub key: String,
    pub state: &'static str,
}

/// What a run of sequential requests cost this process.
pub struct Run {
    pub cpu: Duration,
    /// CPU of the stream pollers' threads meanwhile, not in `cpu`.
    pub pollers_cpu: Duration,
    pub wall: Vec<Duration>,
}

impl Run {
    pub fn cpu_per_request(&self) -> Duration {
        self.cpu / self.wall.len() as u32
    }

    /// Nearest-rank percentile of the per-request wall times.
    pub fn wall_percentile(&self, percent: f64) -> Duration {
        likes_tests::percentile(&self.wall, percent)
    }
}

/// CPU time so far, split into the pollers' and the rest's.
#[derive(Clone, Copy)]
struct CpuClock {
    process: Duration,
    pollers: Duration,
}

impl CpuClock {
    fn now() -> Self {
        Self {
            process: process_cpu(),
            pollers: pollers_cpu(),
        }
    }

    /// Ends a run: the process's CPU since `self` less the pollers', and the pollers'.
    fn run(self, wall: Vec<Duration>) -> Run {
        let now = Self::now();
        let pollers = now.pollers.saturating_sub(self.pollers);
        Run {
            cpu: (now.process - self.process).saturating_sub(pollers),
            pollers_cpu: pollers,
            wall,
        }
    }
}

/// User plus system CPU time of every thread of this process so far, ended ones included.
fn process_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0);
        usage.assume_init()
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// CPU time of the local event source mappings' threads (`esm-<function>`): they stand in for
/// other Lambda functions and do no part of a request. They live as long as the stack, so
/// their on-CPU time (`/proc/<pid>/task/<tid>/schedstat`, nanoseconds) is a clean counter.
fn pollers_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.starts_with("esm-"))
        })
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse().ok())
        .map(Duration::from_nanos)
        .sum()
}

/// The API Gateway v2 event the HTTP API hands the function, built as the local front builds
/// it, with the claims its authorizer takes from the bearer token.
fn v2_event(reaction: &Reaction, bearer: &str, now_ms: i64) -> Vec<u8> {
    let path = ROUTE_PATH.replace("{item_id}", &reaction.item);
    let body = json!({ "state": reaction.state }).to_string();
    let claims = JwtAuthorizer::from_env()
        .authorize(Some(bearer), now_ms / 1000)
        .expect("the bench's own token is valid");
    let headers = [
        ("authorization", bearer),
        ("content-type", "application/json"),
        ("host", "127.0.0.1"),
        ("idempotency-key", &reaction.key),
        ("user-agent", "likes-bench"),
    ];
    GatewayRequest {
        method: "PUT",
        route_path: ROUTE_PATH,
        path: &path,
        raw_query: "",
        headers: headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        body: body.as_bytes(),
        path_parameters: serde_json::Map::from_iter([("item_id".to_owned(), json!(reaction.item))]),
        claims: Some(claims),
        source_ip: "127.0.0.1".to_owned(),
        request_id: format!("bench-{now_ms}-{}", reaction.key),
        now_ms,
    }
    .event()
    .to_string()
    .into_bytes()
}

/// Each event as a bootstrap serves it: deserialize the payload, adapt it to an HTTP request,
/// run the handler, serialize the response. The runtime API's own HTTP calls are not in it.
pub async fn through_handler(app: &App, stack: &TestStack, reactions: &[Reaction]) -> Run {
    let events: Vec<Vec<u8>> = reactions
        .iter()
        .map(|r| v2_event(r, &format!("Bearer {}", stack.token(&r.user)), now_ms()))
        .collect();
    let mut adapter = Adapter::from(service_fn(|request: Request| {
        let app = app.clone();
        async move { Ok::<_, Infallible>(app.handle(Endpoint::PutReaction, request).await) }
    }));
    let mut wall = Vec::with_capacity(events.len());
    let clock = CpuClock::now();
    for event in &events {
        let started = Instant::now();
        let payload: LambdaRequest = serde_json::from_slice(event).expect("a v2 event");
        let Ok(response) = adapter
            .call(LambdaEvent::new(payload, Context::default()))
            .await;
        let response = serde_json::to_vec(&response).expect("a serializable response");
        wall.push(started.elapsed());
        assert!(
            response.windows(16).any(|w| w == b"\"statusCode\":200"),
            "the handler answered {}",
            String::from_utf8_lossy(&response)
        );
    }
    clock.run(wall)
}

/// The same requests straight to the store, as the handler calls it: the SDK's share.
pub async fn through_store(store: &ReactionsStore, reactions: &[Reaction]) -> Run {
    let writes: Vec<(UserId, ItemId, WriteRequest)> = reactions
        .iter()
        .map(|r| {
            let request = WriteRequest {
                target: r.state.parse().expect("a state"),
                key: Some(IdempotencyKey::parse(&r.key).expect("a key").hash()),
                if_match: None,
            };
            let user = UserId::parse(&r.user).expect("a user id");
            (user, ItemId::parse(&r.item).expect("an item id"), request)
        })
        .collect();
    let mut wall = Vec::with_capacity(writes.len());
    let clock = CpuClock::now();
    for (user, item, request) in &writes {
        let started = Instant::now();
        store
            .set(user, item, request, now_ms())
            .await
            .expect("the write is answered");
        wall.push(started.elapsed());
    }
    clock.run(wall)
}

/// The same requests over HTTP through the local front (JWT check, v2 event, the adapter),
/// one connection each, as the test client opens them; the client's CPU is counted too.
pub async fn through_front(stack: &TestStack, reactions: &[Reaction]) -> Run {
    let bearers: Vec<String> = reactions
        .iter()
        .map(|r| format!("Bearer {}", stack.token(&r.user)))
        .collect();
    let mut wall = Vec::with_capacity(reactions.len());
    let clock = CpuClock::now();
    for (reaction, bearer) in reactions.iter().zip(&bearers) {
        let started = Instant::now();
        let response = stack
            .request(
                "PUT",
                &ROUTE_PATH.replace("{item_id}", &reaction.item),
                None,
            )
            .header("authorization", bearer)
            .header("idempotency-key", &reaction.key)
            .json(&json!({ "state": reaction.state }))
            .send()
            .await;
        wall.push(started.elapsed());
        assert_eq!(
            response.status,
            200,
            "the front answered {}",
            String::from_utf8_lossy(&response.body)
        );
    }
    clock.run(wall)
}
