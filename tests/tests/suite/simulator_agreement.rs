//! The simulator stands in for AWS in `make check`'s fast tier, so it must end where the
//! emulator ends: one history of reactions, played through the HTTP front of a stack on
//! each, leaves the same counts, likers lists, liked lists and leaderboard on both, and
//! each is what the clients set.

use std::collections::{BTreeMap, BTreeSet};

use likes_tests::{Aws, TestStack};
use serde_json::{json, Value};

const USERS: usize = 9;
const ITEMS: [&str; 4] = ["game:agree0", "game:agree1", "game:agree2", "game:agree3"];

/// What every client set last, by (user, item): the history's truth.
type Truth = BTreeMap<(String, String), &'static str>;

/// What a stack serves once it has applied the history.
#[derive(Debug, PartialEq)]
struct Served {
    counts: BTreeMap<String, (u64, u64)>,
    likers: BTreeMap<String, BTreeSet<String>>,
    liked: BTreeMap<String, BTreeSet<String>>,
    board: Value,
}

/// User `u`'s writes: a like of every item up to `u % 4`, a dislike of the next, a change
/// of mind on the first for every third user, and a retry of one write with its key.
fn history() -> Vec<(String, String, &'static str, String)> {
    let mut writes = Vec::new();
    for u in 0..USERS {
        let user = format!("agree-user{u}");
        let liked = u % ITEMS.len();
        for (i, item) in ITEMS.iter().enumerate().take(liked + 1) {
            let state = if i == liked { "DISLIKE" } else { "LIKE" };
            writes.push((user.clone(), item.to_string(), state, format!("{user}-{i}")));
        }
        if u % 3 == 0 {
            writes.push((
                user.clone(),
                ITEMS[0].to_owned(),
                "NONE",
                format!("{user}-undo"),
            ));
        }
        // A client's retry of its first write: replayed, no second flip.
        writes.push((
            user.clone(),
            ITEMS[0].to_owned(),
            writes_first_state(u),
            format!("{user}-0"),
        ));
    }
    writes
}

fn writes_first_state(u: usize) -> &'static str {
    if u % ITEMS.len() == 0 {
        "DISLIKE"
    } else {
        "LIKE"
    }
}

async fn play(stack: &TestStack) -> Truth {
    let mut truth = Truth::new();
    for (user, item, state, key) in history() {
        let response = stack
            .request("PUT", &format!("/v1/items/{item}/reaction"), Some(&user))
            .header("idempotency-key", &key)
            .json(&json!({ "state": state }))
            .send()
            .await;
        response.assert_status(200);
        if response.header("idempotent-replayed").is_none() {
            truth.insert((user, item), state);
        }
    }
    truth
}

async fn served(stack: &TestStack) -> Served {
    stack.settle().await;
    stack.settle_leaderboard().await;
    stack.settle_leaderboard().await;
    let mut counts = BTreeMap::new();
    let mut likers = BTreeMap::new();
    for item in ITEMS {
        let body = stack.like_count(item).await.json();
        counts.insert(
            item.to_owned(),
            (
                body["like_count"].as_u64().expect("like_count"),
                body["dislike_count"].as_u64().expect("dislike_count"),
            ),
        );
        let listed = stack.all_likers(item, 3).await;
        likers.insert(
            item.to_owned(),
            listed.into_iter().map(|(u, _)| u).collect(),
        );
    }
    let mut liked = BTreeMap::new();
    for u in 0..USERS {
        let user = format!("agree-user{u}");
        let response = stack
            .request("GET", "/v1/users/me/liked-items?limit=100", Some(&user))
            .send()
            .await;
        response.assert_status(200);
        let items = response.json()["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["item_id"].as_str().expect("item_id").to_owned())
            .collect();
        liked.insert(user, items);
    }
    let expected_board = board_of(&counts);
    let board = stack
        .leaderboard_until("window=all&limit=10", &expected_board)
        .await["items"]
        .clone();
    Served {
        counts,
        likers,
        liked,
        board,
    }
}

/// The all-time board the counts make: most liked first, ties by item id.
fn board_of(counts: &BTreeMap<String, (u64, u64)>) -> Value {
    let mut ranked: Vec<_> = counts.iter().filter(|(_, (likes, _))| *likes > 0).collect();
    ranked.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
    Value::Array(
        ranked
            .into_iter()
            .map(|(item, (likes, _))| json!({ "item_id": item, "like_count": likes }))
            .collect(),
    )
}

fn expected(truth: &Truth) -> Served {
    let mut counts: BTreeMap<String, (u64, u64)> =
        ITEMS.iter().map(|i| (i.to_string(), (0, 0))).collect();
    let mut likers: BTreeMap<String, BTreeSet<String>> = ITEMS
        .iter()
        .map(|i| (i.to_string(), BTreeSet::new()))
        .collect();
    let mut liked: BTreeMap<String, BTreeSet<String>> = (0..USERS)
        .map(|u| (format!("agree-user{u}"), BTreeSet::new()))
        .collect();
    for ((user, item), state) in truth {
        let count = counts.get_mut(item).expect("an item of the history");
        match *state {
            "LIKE" => {
                count.0 += 1;
                likers.get_mut(item).expect("item").insert(user.clone());
                liked.get_mut(user).expect("user").insert(item.clone());
            }
            "DISLIKE" => count.1 += 1,
            _ => {}
        }
    }
    let board = board_of(&counts);
    Served {
        counts,
        likers,
        liked,
        board,
    }
}

#[tokio::test]
async fn one_history_ends_the_same_on_the_emulator_and_the_simulator() {
    let (emulated, simulated) = tokio::join!(
        TestStack::builder()
            .on(Aws::Emulator)
            .refreshing_boards()
            .start(),
        TestStack::builder()
            .on(Aws::Simulator)
            .refreshing_boards()
            .start(),
    );
    let (emulated_truth, simulated_truth) = tokio::join!(play(&emulated), play(&simulated));
    assert_eq!(
        emulated_truth, simulated_truth,
        "both stacks replay the same keys"
    );
    let want = expected(&emulated_truth);
    assert!(
        want.counts.values().any(|(l, d)| *l > 0 && *d > 0),
        "the history moves likes and dislikes: {want:?}"
    );
    let (on_emulator, on_simulator) = tokio::join!(served(&emulated), served(&simulated));
    assert_eq!(
        on_emulator, want,
        "the emulator serves what the clients set"
    );
    assert_eq!(
        on_simulator, on_emulator,
        "the simulator serves what the emulator does"
    );
}
