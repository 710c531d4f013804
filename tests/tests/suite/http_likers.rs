//! `GET /v1/items/{item_id}/likers` through the local front: a thousand likers of one item
//! listed newest first across its buckets, each once, equal to the Reactions table's own
//! LIKE rows however often the event log and its consumer deliver, re-cut or crash (and the
//! item's all-time score, which the entries claim its events for, equal to them too); unlikes
//! and account erasure take users off the list, and a like after an erasure puts them back.
//! Likers hidden from the reader are skipped at every page size, and nothing a page hands
//! out (its items, its cursor however decoded, its headers, a refused cursor's problem)
//! names them or when they liked.

use std::collections::BTreeSet;
use std::time::Duration;

use likes_local::faults::Recut;
use likes_tests::{assert_reveals_none, cursor_readings, TestResponse, TestStack};
use serde_json::{json, Value};

const ITEM: &str = "viral:1";
const LIKERS: usize = 1_000;

/// Every user in `users` likes `item`, a few requests in flight at once.
async fn like_all(stack: &TestStack, users: &[String], item: &str) {
    const LANES: usize = 4;
    let lane = |n: usize| async move {
        for user in users.iter().skip(n).step_by(LANES) {
            stack.like(user, item).await;
        }
    };
    tokio::join!(lane(0), lane(1), lane(2), lane(3));
}

#[tokio::test]
async fn a_thousand_likers_list_newest_first_once_each_under_duplicates_recuts_and_crashes() {
    let stack = TestStack::start().await;
    // The log holds some events twice; the log's consumer gets batches twice, dies after
    // its 2nd and 1st entry written (claims taken, no intent yet), and its retries are cut
    // shorter, then longer.
    stack.publisher().faults().duplicate_next_batches(2);
    let faults = stack.leaderboard().faults();
    faults.duplicate_next_batches(3);
    faults.crash_after_chunks(2);
    faults.crash_after_chunks(1);
    faults.recut_next_retries([Recut::Shorter(30), Recut::Longer(50)]);

    // A thousand: ten full pages of a hundred, each liker listed once under every fault
    // above.
    let users: Vec<String> = (0..LIKERS).map(|n| format!("fan{n:04}")).collect();
    like_all(&stack, &users, ITEM).await;
    // Some change their minds: 100 unlike, 50 turn to DISLIKE, 20 of those who unliked
    // like again (a new liked_at), and one likes another item only.
    for user in &users[..100] {
        stack
            .request("DELETE", &format!("/v1/items/{ITEM}/like"), Some(user))
            .send()
            .await
            .assert_status(200);
    }
    for user in &users[100..150] {
        stack
            .request("PUT", &format!("/v1/items/{ITEM}/reaction"), Some(user))
            .header("Idempotency-Key", &format!("dislike-{user}"))
            .json(&json!({"state": "DISLIKE"}))
            .send()
            .await
            .assert_status(200);
    }
    like_all(&stack, &users[..20], ITEM).await;
    stack.like("elsewhere", "viral:2").await;

    let counters = stack.settle_leaderboard().await;
    assert!(
        counters.duplicate_deliveries >= 3 && counters.crashes >= 2 && !faults.armed(),
        "every fault was played (the re-cuts on the crashes' retries): {counters:?}"
    );
    assert!(
        stack.publisher().counters().duplicate_deliveries >= 2,
        "the log holds duplicates"
    );

    let expected = stack.liked_rows(ITEM).await;
    assert_eq!(expected.len(), LIKERS - 150 + 20, "the writes went through");
    let listed = stack.all_likers(ITEM, 100).await;
    assert_eq!(listed.len(), expected.len());
    assert_eq!(listed, expected, "exactly the LIKE rows, newest first");
    let distinct: BTreeSet<&String> = listed.iter().map(|(user, _)| user).collect();
    assert_eq!(distinct.len(), listed.len(), "each user once");
    // Each like and each unlike scored once, whichever attempt at its record claimed it.
    let score = stack.all_time_score_row(ITEM).await["score"]
        .as_n()
        .map(|n| n.parse::<usize>().unwrap())
        .unwrap();
    assert_eq!(score, expected.len(), "the all-time score is the likes");
    // The default page is 20.
    let first = stack.likers_page(ITEM, "").await;
    assert_eq!(first["items"].as_array().map(Vec::len), Some(20));
    let other = stack.likers_page("viral:2", "").await;
    assert_eq!(other["items"][0]["user_id"], "elsewhere");
    assert_eq!(other["next_cursor"], Value::Null);
}

/// A like and its unlike in one batch of the log's consumer write the like's entry in
/// their order, one write each: were they written at once, the unlike could land first,
/// refuse the like's write, and leave the like's claim a write of its own.
#[tokio::test]
async fn a_like_and_its_unlike_in_one_batch_write_its_entry_once_each_in_order() {
    const RACERS: usize = 12;
    let item = "game:second-thoughts";
    let stack = TestStack::start().await;
    let leaderboard = stack.leaderboard();
    leaderboard.pause();
    for n in 0..RACERS {
        let user = format!("racer{n:02}");
        stack.like(&user, item).await;
        stack
            .request("DELETE", &format!("/v1/items/{item}/like"), Some(&user))
            .send()
            .await
            .assert_status(200);
    }
    stack.settle_events().await;
    let gathered = leaderboard.read_through(Duration::from_secs(60)).await;
    gathered.expect("the log's consumer reads the log through");
    let before = stack.billed().await;
    leaderboard.resume();
    stack.settle_leaderboard().await;
    let after = stack.billed().await;

    let entries = stack.rows("LikersTable").await;
    assert_eq!(entries.len(), RACERS, "an entry a like, ended: {entries:?}");
    // Each entry, both flips' claims on it, is well under 1 KB (its debug form, longer than
    // its size, is), so each write of it is one unit.
    for entry in &entries {
        assert!(format!("{entry:?}").len() < 1024, "{entry:?}");
    }
    let resource = likes_simulator::table_resource(&stack.name("LikersTable"));
    let unit = likes_simulator::Unit::Writes;
    let writes = after.billed(&resource, unit) - before.billed(&resource, unit);
    assert_eq!(writes, (2 * RACERS) as f64, "a write a flip, none refused");
    assert_eq!(stack.likers_page(item, "").await["items"], json!([]));
}

#[tokio::test]
async fn account_erasure_takes_a_user_off_every_likers_list() {
    let stack = TestStack::builder().refreshing_boards().start().await;
    let items = ["game:a", "game:b", "game:c"];
    for item in items {
        for user in ["keeper", "leaver"] {
            stack.like(user, item).await;
        }
    }
    stack.settle_leaderboard().await;
    let users = likes_tests::liker_ids;
    for item in items {
        assert_eq!(
            users(&stack.likers_page(item, "").await),
            ["leaver", "keeper"],
            "newest first"
        );
    }
    let erasure = stack
        .request("DELETE", "/v1/users/me/reactions", Some("leaver"))
        .send()
        .await;
    erasure.assert_status(202);
    let id = erasure.json()["erasure_id"]
        .as_str()
        .expect("an erasure id")
        .to_owned();
    let seen = stack
        .wait_for_erasure("leaver", &id, Duration::from_secs(60))
        .await;
    assert_eq!(seen.last().unwrap()["reactions_erased"], 3, "{seen:?}");
    stack.settle_leaderboard().await;
    for item in items {
        assert_eq!(users(&stack.likers_page(item, "").await), ["keeper"]);
    }
    // Liking again at once writes a new row from op_id 1, below the erased row's op_ids:
    // a new life of the row, which the likers and the leaderboard take as newer.
    stack.like("leaver", "game:a").await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
    assert_eq!(
        users(&stack.likers_page("game:a", "").await),
        ["leaver", "keeper"]
    );
    stack
        .leaderboard_until(
            "window=all",
            &json!([
                {"item_id": "game:a", "like_count": 2},
                {"item_id": "game:b", "like_count": 1},
                {"item_id": "game:c", "like_count": 1},
            ]),
        )
        .await;
}

#[tokio::test]
async fn bad_likers_requests_are_problems_and_cursors_are_bound_to_their_item() {
    let stack = TestStack::start().await;
    for n in 0..3 {
        stack.like(&format!("user{n}"), "game:a").await;
    }
    stack.like("user0", "game:b").await;
    stack.settle_leaderboard().await;
    let page = stack.likers_page("game:a", "limit=2").await;
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let next = stack
        .likers_page("game:a", &format!("limit=2&cursor={cursor}"))
        .await;
    assert_eq!(next["items"].as_array().map(Vec::len), Some(1));

    let liked_cursor = {
        stack.like("user0", "game:c").await;
        let liked = stack
            .request("GET", "/v1/users/me/liked-items?limit=1", Some("user0"))
            .send()
            .await
            .json();
        liked["next_cursor"]
            .as_str()
            .expect("a next page")
            .to_owned()
    };
    let mut tampered = cursor.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ASCII");
    for (item, query) in [
        ("game:a", "limit=0".to_owned()),
        ("game:a", "limit=101".to_owned()),
        ("game:a", "limit=ten".to_owned()),
        ("game:a", "cursor=garbage".to_owned()),
        ("game:a", format!("cursor={tampered}")),
        // Another item's cursor, and a liked-items cursor, are not this list's.
        ("game:b", format!("cursor={cursor}")),
        ("game:a", format!("cursor={liked_cursor}")),
        ("bad%20id", String::new()),
    ] {
        let problem = stack
            .request(
                "GET",
                &format!("/v1/items/{item}/likers?{query}"),
                Some("reader"),
            )
            .send()
            .await
            .problem(400);
        assert_eq!(problem["status"], 400, "{item}?{query}: {problem}");
    }
    // Who liked what is for signed-in callers.
    stack
        .request("GET", "/v1/items/game:a/likers", None)
        .send()
        .await
        .assert_status(401);
}

/// The hidden likers' ids and when they liked (epoch ms), what nothing the reader gets may
/// hold.
async fn secrets_of(stack: &TestStack, item: &str, hidden: &[&str]) -> Vec<String> {
    let mut secrets: Vec<String> = hidden.iter().map(|user| (*user).to_owned()).collect();
    for row in stack.rows("ReactionsTable").await {
        let user = row["user_id"].as_s().expect("user_id");
        if row["item_id"].as_s().expect("item_id") == item && hidden.contains(&user.as_str()) {
            secrets.push(row["liked_at"].as_n().expect("liked_at").clone());
        }
    }
    assert_eq!(secrets.len(), 2 * hidden.len(), "{secrets:?}");
    secrets
}

/// Every header of `response`, as `name: value`.
fn header_lines(response: &TestResponse) -> Vec<String> {
    response
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
        .collect()
}

/// A page's cursor is the last liker it examined, which may be one hidden from the reader:
/// decoded as a curious client would, no cursor (nor item, header or problem) may name a
/// hidden liker or when they liked, while every page size from 1 to 7 still lists each
/// visible liker once, newest first.
#[tokio::test]
async fn hidden_likers_are_skipped_at_every_page_size_and_no_page_or_cursor_reveals_them() {
    let stack = TestStack::start().await;
    let item = "game:hidden";
    // Oldest first: hidden likers before, between and after the visible ann, bea and cal.
    let private = ["early-private", "private-pia"];
    let blocked = "blocked-bo";
    let blockers = ["blocker-kai", "late-blocker"];
    for user in [
        "early-private",
        "ann",
        "private-pia",
        "bea",
        blocked,
        "blocker-kai",
        "cal",
        "late-blocker",
    ] {
        stack.like(user, item).await;
        // liked_at has millisecond resolution: keep the order unambiguous.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    for user in private {
        stack
            .request("PUT", "/v1/users/me/settings", Some(user))
            .json(&json!({"likes_visibility": "private"}))
            .send()
            .await
            .assert_status(200);
    }
    // The reader blocks one; two block the reader.
    let blocks = [
        ("reader", blocked),
        (blockers[0], "reader"),
        (blockers[1], "reader"),
    ];
    for (user, other) in blocks {
        stack
            .request("PUT", &format!("/v1/users/me/blocks/{other}"), Some(user))
            .send()
            .await
            .assert_status(200);
    }
    stack.settle_leaderboard().await;
    let hidden = [private[0], private[1], blocked, blockers[0], blockers[1]];
    let secrets = secrets_of(&stack, item, &hidden).await;
    let visible: Vec<(String, String)> = stack
        .liked_rows(item)
        .await
        .into_iter()
        .filter(|(user, _)| !hidden.contains(&user.as_str()))
        .collect();
    let names: Vec<&str> = visible.iter().map(|(user, _)| user.as_str()).collect();
    assert_eq!(names, ["cal", "bea", "ann"]);

    let mut cursors = Vec::new();
    for limit in 1..=7 {
        let mut listed = Vec::new();
        let mut query = format!("limit={limit}");
        loop {
            let response = stack
                .request(
                    "GET",
                    &format!("/v1/items/{item}/likers?{query}"),
                    Some("reader"),
                )
                .send()
                .await;
            response.assert_status(200);
            let what = format!("limit {limit}, {query}");
            assert_reveals_none(&what, &header_lines(&response), &secrets);
            let page = response.json();
            assert_reveals_none(&what, &[page["items"].to_string()], &secrets);
            let items = page["items"].as_array().expect("items");
            for liker in items {
                listed.push((
                    liker["user_id"].as_str().expect("user_id").to_owned(),
                    liker["liked_at"].as_str().expect("liked_at").to_owned(),
                ));
            }
            let Some(cursor) = page["next_cursor"].as_str() else {
                assert!(!items.is_empty(), "an empty last page at limit {limit}");
                break;
            };
            assert_eq!(items.len(), limit, "only the last page is short: {page}");
            assert_reveals_none(&what, &cursor_readings(cursor), &secrets);
            cursors.push(cursor.to_owned());
            query = format!("limit={limit}&cursor={cursor}");
        }
        assert_eq!(
            listed, visible,
            "limit {limit}: each visible liker once, newest first"
        );
    }
    assert_eq!(cursors.len(), 3, "two at limit 1, one at limit 2");

    // A cursor refused (changed, or for another item) is a problem that names nobody.
    let cursor = &cursors[0];
    let mut changed = cursor.clone().into_bytes();
    changed[0] = if changed[0] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).expect("ASCII");
    for (on, raw) in [(item, changed.as_str()), ("game:other", cursor.as_str())] {
        let response = stack
            .request(
                "GET",
                &format!("/v1/items/{on}/likers?cursor={raw}"),
                Some("reader"),
            )
            .send()
            .await;
        let problem = response.problem(400);
        let mut read = header_lines(&response);
        read.push(problem.to_string());
        assert_reveals_none(&format!("the problem on {on}"), &read, &secrets);
    }
}
