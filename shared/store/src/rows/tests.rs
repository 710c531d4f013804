use likes_core::JobStatus;

use super::*;

fn names(item: &Item) -> Vec<&str> {
    let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
    names.sort_unstable();
    names
}

#[test]
fn rows_use_the_named_attributes() {
    let intent = CountIntentRow {
        item_id: "#wm#s1".into(),
        shard: "N#00000000000000000000".into(),
        n: 1,
        last_seq: "7".into(),
        stream_time: 2,
        probe_key: None,
        packed: Some(serde_bytes::ByteBuf::from(vec![1])),
        rows: None,
        expires_at: 3,
    };
    let mut expected = [
        attr::EXPIRES_AT,
        attr::ITEM_ID,
        attr::LAST_SEQ,
        attr::INTENT_N,
        attr::PACKED,
        attr::SHARD,
        attr::STREAM_TIME,
    ];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&intent).unwrap()), expected);
    let as_of = AsOfRow {
        item_id: "#asof#0".into(),
        shard: "A".into(),
        as_of: 1,
        computed_at: 2,
    };
    let mut expected = [attr::AS_OF, attr::COMPUTED_AT, attr::ITEM_ID, attr::SHARD];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&as_of).unwrap()), expected);
    let liked = LikedRow {
        user_id: "u".into(),
        item_id: "i".into(),
        liked_at: 3,
    };
    let mut expected = [attr::ITEM_ID, attr::LIKED_AT, attr::USER_ID];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&liked).unwrap()), expected);
    let probe = ProbeRow {
        user_id: "#probe#1",
        item_id: "#probe",
        probed_at: 4,
    };
    let mut expected = [attr::ITEM_ID, attr::PROBED_AT, attr::USER_ID];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&probe).unwrap()), expected);
    let job = ErasureRow {
        user_id: "u".into(),
        erasure_id: "e".into(),
        status: JobStatus::Running,
        step: 0,
        reactions_erased: 0,
        planned: vec![],
        created_at: 5,
        expires_at: None,
    };
    let mut expected = [
        attr::CREATED_AT,
        attr::ERASURE_ID,
        attr::PLANNED,
        attr::REACTIONS_ERASED,
        attr::STATUS,
        attr::STEP,
        attr::USER_ID,
    ];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&job).unwrap()), expected);
    let event_claim = EventClaimRow {
        board: "#event#u#i#1@0".into(),
        item_id: "i".into(),
        by: "shard:1".into(),
        expires_at: 6,
    };
    let mut expected = [attr::BOARD, attr::BY, attr::EXPIRES_AT, attr::ITEM_ID];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&event_claim).unwrap()), expected);
    let head = IntentHeadRow {
        board: "#intent#shard".into(),
        item_id: "head".into(),
        n: 1,
        last_seq: "1".into(),
        applied_through: 7,
        rows: vec![],
    };
    let item = to_item(&head).unwrap();
    for name in [
        attr::BOARD,
        attr::ITEM_ID,
        attr::INTENT_N,
        attr::APPLIED_THROUGH,
    ] {
        assert!(item.contains_key(name), "{name}");
    }
    let top = TopRow {
        board: "#top".into(),
        item_id: "all".into(),
        entries: vec![],
        as_of: None,
        refreshed_at: 8,
        expires_at: None,
    };
    assert!(to_item(&top).unwrap().contains_key(attr::REFRESHED_AT));
    let progress: BoardProgressRow = from_item(Item::from([
        (attr::ITEM_ID.into(), AttributeValue::S("shard".into())),
        (attr::APPLIED_THROUGH.into(), AttributeValue::N("9".into())),
        (
            attr::SCORED.into(),
            AttributeValue::M(
                [(
                    "post:all".to_owned(),
                    AttributeValue::L(vec![
                        AttributeValue::N("2".into()),
                        AttributeValue::N("5".into()),
                    ]),
                )]
                .into(),
            ),
        ),
        (attr::THROUGH_SEQ.into(), AttributeValue::S("12".into())),
        (attr::INTENTS.into(), AttributeValue::N("3".into())),
    ]))
    .unwrap();
    assert_eq!(progress.through_seq.as_deref(), Some("12"));
    assert_eq!(
        (progress.intents, progress.scored),
        (3, [("post:all".to_owned(), (2, 5))].into())
    );
    let guard = ErasureGuardRow {
        user_id: "u".into(),
        erasure_id: "#active".into(),
        active_id: "e".into(),
    };
    let mut expected = [attr::ACTIVE_ID, attr::ERASURE_ID, attr::USER_ID];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&guard).unwrap()), expected);
    let connection = ConnectionRow {
        connection_id: "c".into(),
        user_id: "u".into(),
        items: vec!["game:1".into()],
        items_version: 3,
        connected_at: 6,
        expires_at: 7,
    };
    let mut expected = [
        attr::CONNECTED_AT,
        attr::CONNECTION_ID,
        attr::EXPIRES_AT,
        attr::ITEMS,
        attr::ITEMS_VERSION,
        attr::USER_ID,
    ];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&connection).unwrap()), expected);
    let subscription = SubscriptionRow {
        watch: "game:1#0".into(),
        connection_id: "c".into(),
        expires_at: 7,
    };
    let mut expected = [attr::CONNECTION_ID, attr::EXPIRES_AT, attr::WATCH];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&subscription).unwrap()), expected);
    assert_eq!(
        to_item(&intent).unwrap()[attr::EXPIRES_AT],
        AttributeValue::N("3".into())
    );
}

#[test]
fn a_watch_row_names_its_buckets_watched_now_in_order() {
    let row: WatchRow = from_item(Item::from([
        (attr::ITEM_ID.into(), AttributeValue::S("game:1".into())),
        (attr::EXPIRES_AT.into(), AttributeValue::N("900".into())),
        (attr::watched(10), AttributeValue::N("500".into())),
        (attr::watched(2), AttributeValue::N("800".into())),
        (attr::watched(3), AttributeValue::N("499".into())),
    ]))
    .unwrap();
    assert_eq!(row.watched(500), [2, 10]);
    assert_eq!(row.watched(801), Vec::<u32>::new());
}

#[test]
fn liker_rows_read_a_liked_entry() {
    let row: LikerRow = from_item(Item::from([
        (attr::BUCKET.into(), AttributeValue::S("game:1#7".into())),
        (
            attr::ENTRY.into(),
            AttributeValue::S("001700000000000#u1".into()),
        ),
        (attr::USER_ID.into(), AttributeValue::S("u1".into())),
        (
            attr::LIKED_AT.into(),
            AttributeValue::N("1700000000000".into()),
        ),
    ]))
    .unwrap();
    assert_eq!(
        (row.user_id.as_str(), row.liked_at),
        ("u1", 1_700_000_000_000)
    );
}

#[test]
fn count_rows_read_missing_totals_as_zero_and_refuse_mistyped_ones() {
    let marker: CountRow = from_item(Item::from([
        (attr::SHARD.into(), AttributeValue::S("H".into())),
        (attr::PARTITIONS.into(), AttributeValue::N("8".into())),
    ]))
    .unwrap();
    assert_eq!((marker.like_count, marker.partitions), (0, Some(8)));
    let liked: CountRow = from_item(Item::from([
        (attr::SHARD.into(), AttributeValue::S("D#3".into())),
        (attr::LIKE_COUNT.into(), AttributeValue::N("2".into())),
        (
            attr::LIKED_BUCKETS.into(),
            listed_buckets(&[3, 255, 300].into()),
        ),
    ]))
    .unwrap();
    let listed: Vec<u32> = liked.liked_buckets().collect();
    assert_eq!((liked.like_count, listed), (2, vec![3, 255, 300]));
    assert!(marker.liked_buckets().next().is_none());
    // A row listed before as a number set, and taking buckets since in the binary set.
    let both: CountRow = from_item(Item::from([
        (attr::SHARD.into(), AttributeValue::S("D#3".into())),
        (
            attr::LIKED_BUCKET_NUMBERS.into(),
            AttributeValue::Ns(vec!["3".into(), "60".into()]),
        ),
        (attr::LIKED_BUCKETS.into(), listed_buckets(&[0].into())),
    ]))
    .unwrap();
    let mut listed: Vec<u32> = both.liked_buckets().collect();
    listed.sort_unstable();
    assert_eq!(listed, vec![0, 3, 60]);
    let mistyped = from_item::<CountRow>(Item::from([
        (attr::SHARD.into(), AttributeValue::S("D#0".into())),
        (attr::LIKE_COUNT.into(), AttributeValue::S("7".into())),
    ]));
    assert!(matches!(mistyped, Err(StoreError::Row(_))), "{mistyped:?}");
}

#[test]
fn privacy_rows_use_the_named_attributes_and_read_defaults() {
    let block = BlockRow {
        user_id: "u".into(),
        entry: "b#v".into(),
        blocked_at: 9,
    };
    let mut expected = [attr::BLOCKED_AT, attr::ENTRY, attr::USER_ID];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&block).unwrap()), expected);
    let key = PrivacyKey {
        user_id: "u".into(),
        entry: "#settings".into(),
    };
    let mut expected = [attr::ENTRY, attr::USER_ID];
    expected.sort_unstable();
    assert_eq!(names(&to_item(&key).unwrap()), expected);
    let never_set: SettingsRow = from_item(Item::from([
        (attr::USER_ID.into(), AttributeValue::S("u".into())),
        (attr::ENTRY.into(), AttributeValue::S("#settings".into())),
    ]))
    .unwrap();
    assert_eq!(
        (never_set.likes_visibility, never_set.blocks),
        (likes_core::LikesVisibility::Public, 0)
    );
    let set: SettingsRow = from_item(Item::from([
        (attr::USER_ID.into(), AttributeValue::S("u".into())),
        (
            attr::LIKES_VISIBILITY.into(),
            AttributeValue::S("private".into()),
        ),
        (attr::BLOCKS.into(), AttributeValue::N("2".into())),
    ]))
    .unwrap();
    assert_eq!(
        (set.likes_visibility, set.blocks),
        (likes_core::LikesVisibility::Private, 2)
    );
}

#[test]
fn namespace_rows_read_the_named_attributes_and_default_what_is_unset() {
    use likes_core::namespace::{DislikeRule, LikeCountRule, NamespaceRules, Window};
    let never_set: NamespaceRow = from_item(Item::from([(
        attr::CATALOG_KEY.into(),
        AttributeValue::S("ns#post".into()),
    )]))
    .unwrap();
    assert_eq!(never_set.rules(), NamespaceRules::default());
    let set: NamespaceRow = from_item(Item::from([
        (
            attr::CATALOG_KEY.into(),
            AttributeValue::S("ns#post".into()),
        ),
        (
            attr::DISLIKES.into(),
            AttributeValue::S("owner_only".into()),
        ),
        (
            attr::LIKE_COUNT_RULE.into(),
            AttributeValue::S("owner_only".into()),
        ),
        (
            attr::LEADERBOARD_WINDOWS.into(),
            AttributeValue::L(vec![AttributeValue::S("hour".into())]),
        ),
        (attr::RULES_SET_AT.into(), AttributeValue::N("1".into())),
    ]))
    .unwrap();
    assert_eq!(
        set.rules(),
        NamespaceRules {
            dislikes: DislikeRule::OwnerOnly,
            like_count: LikeCountRule::OwnerOnly,
            leaderboard_windows: vec![Window::Hour],
        }
    );
}
