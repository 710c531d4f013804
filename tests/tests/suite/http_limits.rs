//! The per-user write limit through the local HTTP front: a burst is limited with the
//! rate-limit headers and writes nothing, another user is not, and a token refills in time.
//! And the public routes' throttle: a flood of anonymous reads meets it, and nothing else does.

use likes_tests::{TestResponse, TestStack};
use serde_json::{json, Value};

/// The write limit of [`a_burst_from_one_user_is_limited_and_writes_nothing`]'s stack: small,
/// so a burst meets it in a few requests, with leases of two tokens (one second of the rate).
const TEST_RATE: u32 = 2;
const TEST_BURST: usize = 6;

/// Write `i` of the burst, to its own item, on one of the three write routes (`route` taken
/// modulo 3), which all share the user's bucket.
async fn burst_write(stack: &TestStack, user: &str, route: usize, i: usize) -> TestResponse {
    let item = format!("/v1/items/game:burst-{i}");
    match route % 3 {
        0 => stack.request("PUT", &format!("{item}/like"), Some(user)),
        1 => stack
            .request("PUT", &format!("{item}/reaction"), Some(user))
            .header("idempotency-key", &format!("burst-{i}"))
            .json(&json!({ "state": "LIKE" })),
        _ => stack.request("DELETE", &format!("{item}/like"), Some(user)),
    }
    .send()
    .await
}

#[tokio::test]
async fn a_burst_from_one_user_is_limited_and_writes_nothing() {
    let stack = likes_tests::TestStack::builder()
        .parameters(&[
            ("WriteRatePerSecond", &TEST_RATE.to_string()),
            ("WriteBurst", &TEST_BURST.to_string()),
        ])
        .start()
        .await;
    // The bucket starts full: `burst` writes one after another to one route all go through,
    // however slowly each is answered. A route's container spends a lease for a second and
    // loses what it has not spent by then, but a lease is a second of the rate, so a slow
    // answer gives the bucket back at least what one container's lease loses. (Spread over
    // several containers, slow writes can lose more than refills: the limit only promises
    // the upper bound checked below.)
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for i in 0..TEST_BURST {
        let answer = burst_write(&stack, "script", 0, i).await;
        assert_eq!(
            answer.status,
            200,
            "write {i} of a full bucket: {}",
            String::from_utf8_lossy(&answer.body)
        );
        answers.push(answer);
    }
    // Then a volley sent all at once, as a script does: it reaches the limiter within the
    // time of one request, so it outruns the refill whatever the machine's load.
    const VOLLEY: usize = 24;
    let volley = (TEST_BURST..TEST_BURST + VOLLEY).map(|i| burst_write(&stack, "script", i, i));
    answers.extend(futures_util::future::join_all(volley).await);
    let elapsed = started.elapsed();
    let writes = answers.len();

    // Every token spent was taken from the user's bucket, which started full: at most
    // `burst` plus the refill since the first write, `rate` a second, whole tokens only.
    let refilled = (f64::from(TEST_RATE) * elapsed.as_secs_f64()) as usize;
    let accepted = answers.iter().filter(|a| a.status == 200).count();
    assert!(
        accepted <= TEST_BURST + refilled,
        "{accepted} writes accepted in {elapsed:?}; the bucket allows {TEST_BURST} + {refilled}"
    );
    let limited: Vec<usize> = (0..writes).filter(|i| answers[*i].status == 429).collect();
    assert_eq!(
        limited.len() + accepted,
        writes,
        "every write is accepted or limited"
    );
    assert!(
        !limited.is_empty(),
        "{writes} writes in {elapsed:?} outran {TEST_BURST} + {TEST_RATE}/s"
    );
    for i in &limited {
        let answer = &answers[*i];
        let problem = answer.problem(429);
        assert_eq!(problem["type"], "/problems/rate-limited");
        // A token is due within 1/rate s: Retry-After rounds it up to whole seconds.
        assert_eq!(answer.header("retry-after"), Some("1"));
        assert_eq!(answer.header("ratelimit"), Some("\"default\";r=0;t=1"));
        assert_eq!(
            answer.header("ratelimit-policy"),
            Some("\"default\";q=6;w=3"),
            "q is the burst, w the seconds it takes to refill"
        );
        assert_eq!(answer.header("cache-control"), Some("private, no-store"));
        // Nothing written: the refused write's row was never created.
        let row = get_reaction_of(&stack, "script", &format!("game:burst-{i}")).await;
        assert_eq!(row["version"], 0, "write {i} was limited");
    }

    // Another user, at the same time, has a bucket of their own.
    let bystander = burst_write(&stack, "bystander", 0, 0).await;
    bystander.assert_status(200);
    assert_eq!(
        bystander.header("ratelimit"),
        None,
        "only refusals carry it"
    );

    // One token refills in 1/rate s.
    tokio::time::sleep(std::time::Duration::from_millis(
        1000 / u64::from(TEST_RATE),
    ))
    .await;
    let like = writes;
    burst_write(&stack, "script", 0, like)
        .await
        .assert_status(200);
    assert_eq!(
        get_reaction_of(&stack, "script", &format!("game:burst-{like}")).await["state"],
        "LIKE"
    );
}

async fn get_reaction_of(stack: &TestStack, user: &str, item: &str) -> Value {
    let response = stack
        .request("GET", &format!("/v1/items/{item}/reaction"), Some(user))
        .send()
        .await;
    response.assert_status(200);
    response.json()
}

/// A flood of anonymous count reads meets its route's throttle: past the burst and the rate
/// the template gives the public routes, the front answers 429 as API Gateway does, while
/// writes, on routes of their own, go on, and so does the other public count route, which
/// has its own bucket.
#[tokio::test]
async fn a_flood_of_public_reads_meets_its_route_cap_while_writes_go_on() {
    const RATE: f64 = 5.0;
    const BURST: usize = 10;
    const FLOOD: usize = 80;
    let stack = TestStack::builder()
        .parameters(&[
            ("PublicRouteRateLimit", &RATE.to_string()),
            ("PublicRouteBurstLimit", &BURST.to_string()),
        ])
        .start()
        .await;
    let path = "/v1/items/game:flooded/like-count";
    let started = std::time::Instant::now();
    let writes = futures_util::future::join_all(["ann", "bo", "cy"].map(|user| {
        stack
            .request("PUT", "/v1/items/game:flooded/like", Some(user))
            .send()
    }));
    let reads =
        futures_util::future::join_all((0..FLOOD).map(|_| stack.request("GET", path, None).send()));
    let (writes, reads) = tokio::join!(writes, reads);
    let elapsed = started.elapsed().as_secs_f64();
    for write in &writes {
        write.assert_status(200);
    }
    let served = reads.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&TestResponse> = reads.iter().filter(|r| r.status == 429).collect();
    assert_eq!(served + refused.len(), FLOOD, "only served or throttled");
    assert!(served >= BURST, "the burst is served: {served}");
    let most = BURST + (RATE * elapsed).ceil() as usize;
    assert!(
        served <= most,
        "{served} served in {elapsed:.2} s, at most {most}"
    );
    assert_eq!(refused[0].json(), json!({"message": "Too Many Requests"}));
    let batch = stack
        .request("POST", "/v1/items/like-counts:batchGet", None)
        .json(&json!({"item_ids": ["game:flooded"]}))
        .send()
        .await;
    batch.assert_status(200);
}
