//! The caller's liked items through the local HTTP front: newest first, a page at a time with
//! an opaque cursor, and bad limits and cursors refused.

use likes_core::{CursorKey, ItemId, LikedCursor, UserId};
use likes_tests::{assert_reveals_none, cursor_readings, TestResponse, TestStack};
use serde_json::Value;

async fn liked_page(stack: &TestStack, user: &str, query: &str) -> TestResponse {
    stack
        .request(
            "GET",
            &format!("/v1/users/me/liked-items{query}"),
            Some(user),
        )
        .send()
        .await
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn liked_items_are_listed_newest_first_with_a_cursor() {
    let stack = TestStack::start().await;
    for n in 0..5 {
        stack.like("carol", &format!("game:{n}")).await;
        // liked_at has millisecond resolution: keep the order unambiguous.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let unlike = stack
        .request("DELETE", "/v1/items/game:3/like", Some("carol"))
        .send()
        .await;
    assert_eq!(unlike.status, 200);
    stack.like("dave", "game:0").await;

    let first = liked_page(&stack, "carol", "?limit=2").await;
    assert_eq!(first.status, 200);
    let first = first.json();
    assert_eq!(ids(&first), ["game:4", "game:2"]);
    assert!(first["items"][0]["liked_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    // The cursor holds the page's last like, which a client cannot read out of it: no item
    // id, no time the page showed.
    let mut shown = ids(&first);
    for liked in first["items"].as_array().unwrap() {
        let at = liked["liked_at"].as_str().unwrap();
        shown.push(likes_core::clock::parse_rfc3339(at).unwrap().to_string());
    }
    assert_reveals_none("the cursor", &cursor_readings(&cursor), &shown);
    let second = liked_page(&stack, "carol", &format!("?limit=2&cursor={cursor}"))
        .await
        .json();
    assert_eq!(ids(&second), ["game:1", "game:0"]);
    assert_eq!(
        second["next_cursor"],
        Value::Null,
        "the last page has no cursor"
    );

    let all = liked_page(&stack, "carol", "").await.json();
    assert_eq!(ids(&all), ["game:4", "game:2", "game:1", "game:0"]);
    assert_eq!(all["next_cursor"], Value::Null);
}

#[tokio::test]
async fn bad_limits_and_cursors_are_400_problems() {
    let stack = TestStack::start().await;
    for n in 0..3 {
        stack.like("erin", &format!("game:{n}")).await;
    }
    let page = liked_page(&stack, "erin", "?limit=1").await.json();
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    for limit in ["0", "101", "-1", "x", "1.5", ""] {
        liked_page(&stack, "erin", &format!("?limit={limit}"))
            .await
            .problem(400);
    }
    let whole = liked_page(&stack, "erin", "?limit=100").await;
    whole.assert_status(200);
    let mut liked = ids(&whole.json());
    liked.sort();
    assert_eq!(liked, ["game:0", "game:1", "game:2"]);
    assert_eq!(whole.json()["next_cursor"], Value::Null);
    // Another user's cursor, a tampered one, garbage.
    liked_page(&stack, "frank", &format!("?cursor={cursor}"))
        .await
        .problem(400);
    let mut tampered = cursor.clone().into_bytes();
    tampered[2] = if tampered[2] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    liked_page(&stack, "erin", &format!("?cursor={tampered}"))
        .await
        .problem(400);
    liked_page(&stack, "erin", "?cursor=not-a-cursor")
        .await
        .problem(400);
    assert_eq!(
        liked_page(&stack, "erin", &format!("?cursor={cursor}"))
            .await
            .status,
        200
    );
}

/// The cursor key rotates with its secret, with no deploy: a cursor sealed under the new
/// value opens at once on a function that has not read it yet (it reads the secret again),
/// a cursor handed out before the rotation still opens (the secret's previous value), and two
/// rotations on the first value opens nothing.
#[tokio::test]
async fn cursors_follow_the_rotation_of_their_secret() {
    let stack = TestStack::start().await;
    for n in 0..4 {
        stack.like("gina", &format!("game:{n}")).await;
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let first = liked_page(&stack, "gina", "?limit=1").await.json();
    assert_eq!(ids(&first), ["game:3"]);
    let before = first["next_cursor"].as_str().unwrap().to_owned();
    // Where a page after the first one starts, as a cursor of it holds it.
    let liked_at = first["items"][0]["liked_at"].as_str().unwrap();
    let position = LikedCursor::new(
        likes_core::clock::parse_rfc3339(liked_at).unwrap(),
        &ItemId::parse("game:3").unwrap(),
    );
    let gina = UserId::parse("gina").unwrap();
    let secrets = aws_sdk_secretsmanager::Client::new(&stack.stack.aws.sdk);
    let (position, gina) = (&position, &gina);
    let rotate = |value: &'static str| {
        let (secrets, secret) = (secrets.clone(), stack.name("CursorSigningSecret"));
        async move {
            secrets
                .put_secret_value()
                .secret_id(secret)
                .secret_string(value)
                .send()
                .await
                .expect("a new value of the cursor secret");
            position.encode(&CursorKey::new(value).unwrap(), gina)
        }
    };
    let page_after = |cursor: String| {
        let stack = &stack;
        async move { liked_page(stack, "gina", &format!("?limit=1&cursor={cursor}")).await }
    };

    let sealed_new = rotate("the-second-cursor-key-of-enough-length").await;
    assert_eq!(ids(&page_after(sealed_new).await.json()), ["game:2"]);
    assert_eq!(
        ids(&page_after(before.clone()).await.json()),
        ["game:2"],
        "a cursor of the value before still opens"
    );
    let sealed_newest = rotate("the-third-cursor-key-of-enough-length").await;
    assert_eq!(ids(&page_after(sealed_newest).await.json()), ["game:2"]);
    page_after(before).await.problem(400);
}
