//! The stack's tables as tests read and edit them directly: reactions written through the
//! write path, rows drifted on purpose, and the recount from the source of truth.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Recount, TestStack};

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

    /// Lists the likers buckets of `users`' likes on `item`'s count rows, as counting those
    /// likes does (for likers entries a test writes behind the pipeline).
    pub async fn list_likers_buckets(&self, item: &str, users: &[&str]) {
        let buckets = users
            .iter()
            .map(|user| likes_core::likers::bucket_of(user))
            .collect();
        likes_store::reconciliation::ReconciliationStore::new(
            self.dynamodb(),
            self.name("CountsTable"),
        )
        .list_liked_buckets(&likes_core::ItemId::parse(item).unwrap(), &buckets)
        .await
        .expect("the buckets listed");
    }

    /// The key of `user`'s one like entry of `item` in its bucket: a listed like's, or with
    /// `ended` a tombstone's (panics unless there is exactly one).
    async fn like_entry(&self, item: &str, user: &str, ended: bool) -> likes_store::rows::Item {
        use aws_sdk_dynamodb::types::AttributeValue;
        use likes_core::likers::{bucket_key, bucket_of, LIKES_END};
        let item = likes_core::ItemId::parse(item).unwrap();
        let bucket = AttributeValue::S(bucket_key(&item, bucket_of(user)));
        let liked = if ended {
            "attribute_not_exists(liked_at)"
        } else {
            "attribute_exists(liked_at)"
        };
        let found = self
            .dynamodb()
            .query()
            .table_name(self.name("LikersTable"))
            .key_condition_expression("bucket = :bucket AND entry < :likes_end")
            .filter_expression(format!("user_id = :user AND {liked}"))
            .expression_attribute_values(":bucket", bucket.clone())
            .expression_attribute_values(":likes_end", AttributeValue::S(LIKES_END.into()))
            .expression_attribute_values(":user", AttributeValue::S(user.into()))
            .send()
            .await
            .unwrap();
        let [entry] = found.items() else {
            panic!("{user} has one such like entry of {item} (ended: {ended}): {found:?}");
        };
        likes_store::rows::Item::from([
            ("bucket".to_owned(), bucket),
            ("entry".to_owned(), entry["entry"].clone()),
        ])
    }

    /// Drops `user`'s liked entry for `item` from the likers list, as a lost like event
    /// leaves it.
    pub async fn lose_liker(&self, item: &str, user: &str) {
        self.dynamodb()
            .delete_item()
            .table_name(self.name("LikersTable"))
            .set_key(Some(self.like_entry(item, user, false).await))
            .send()
            .await
            .unwrap();
    }

    /// Lists `user`'s like of `item` that a flip ended (an unlike, an erasure) again, as the
    /// flip's lost event leaves it: the like's tombstone is its entry again, at the like's
    /// order.
    pub async fn keep_liker(&self, item: &str, user: &str) {
        use aws_sdk_dynamodb::types::AttributeValue;
        let key = self.like_entry(item, user, true).await;
        let position = key["entry"].as_s().unwrap();
        let liked_at = position.split_once('#').unwrap().0.trim_start_matches('0');
        let liked_at = AttributeValue::N(liked_at.into());
        self.dynamodb()
            .update_item()
            .table_name(self.name("LikersTable"))
            .set_key(Some(key))
            .update_expression(
                "SET liked_at = :liked_at, op_id = op_id - :one REMOVE expires_at, ended_by",
            )
            .expression_attribute_values(":liked_at", liked_at)
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .send()
            .await
            .unwrap();
    }

    /// Lists `user` as liking `item` since a day ago, as a lost unlike leaves it (counting
    /// the like then listed its bucket).
    pub async fn invent_liker(&self, item: &str, user: &str) {
        use likes_core::likers::{repair, LikeAt};
        let day_ago = likes_core::clock::now_ms() - 86_400_000;
        let like = LikeAt {
            row_created_ms: day_ago,
            op_id: 1,
            liked_at_ms: day_ago,
        };
        let item_id = likes_core::ItemId::parse(item).unwrap();
        let [update] = &repair(&item_id, user, None, Some(like), 0, 0)[..] else {
            panic!("an unlisted like is one write");
        };
        self.list_likers_buckets(item, &[user]).await;
        let written = likes_store::LikersStore::new(self.dynamodb(), self.name("LikersTable"))
            .apply(update)
            .await
            .unwrap();
        assert!(written);
    }

    /// `item`'s count rows (base and overflow partitions) as if the aggregator had never
    /// taken its likes: each row's likes taken off and its likers buckets unlisted. The
    /// likes each row took away, in all.
    pub async fn uncount_likes(&self, item: &str) -> i64 {
        use aws_sdk_dynamodb::types::AttributeValue;
        use likes_store::rows::attr;
        let table = self.name("CountsTable");
        let rows = self.rows("CountsTable").await;
        let mut taken = 0;
        for row in rows {
            let (Some(AttributeValue::S(partition)), Some(AttributeValue::S(sort))) =
                (row.get("item_id"), row.get("shard"))
            else {
                continue;
            };
            let of_item = partition == item || partition.starts_with(&format!("{item}#"));
            if !of_item || !sort.starts_with("D#") {
                continue;
            }
            let likes: i64 = match row.get("like_count") {
                Some(AttributeValue::N(n)) => n.parse().expect("a count"),
                _ => 0,
            };
            self.dynamodb()
                .update_item()
                .table_name(&table)
                .key("item_id", AttributeValue::S(partition.clone()))
                .key("shard", AttributeValue::S(sort.clone()))
                .update_expression(format!(
                    "ADD like_count :taken REMOVE {}, {}",
                    attr::LIKED_BUCKETS,
                    attr::LIKED_BUCKET_NUMBERS
                ))
                .expression_attribute_values(":taken", AttributeValue::N((-likes).to_string()))
                .send()
                .await
                .expect("UpdateItem of a count row");
            taken += likes;
        }
        taken
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

    /// The partition of `item`'s all-time score row.
    pub fn all_time_board(&self, item: &str) -> String {
        self.score_board(&likes_core::leaderboard::Window::All, item)
    }

    /// The partition of `item`'s score row in `window`.
    pub fn score_board(&self, window: &likes_core::leaderboard::Window, item: &str) -> String {
        window.board_key(likes_core::leaderboard::item_shard(
            item,
            self.leaderboard_shards(),
        ))
    }

    /// `item`'s score row in `window`, read strongly consistent; panics when it has none.
    pub async fn score_row(
        &self,
        window: &likes_core::leaderboard::Window,
        item: &str,
    ) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
        use aws_sdk_dynamodb::types::AttributeValue;
        self.dynamodb()
            .get_item()
            .table_name(self.name("LeaderboardTable"))
            .key("board", AttributeValue::S(self.score_board(window, item)))
            .key("item_id", AttributeValue::S(item.into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap_or_else(|err| panic!("GetItem of a score row: {err:?}"))
            .item
            .unwrap_or_else(|| panic!("{item} has a score row in {window:?}"))
    }

    /// The leaderboard's store, with the stack's board shards.
    pub fn leaderboard_store(&self) -> likes_store::LeaderboardStore {
        likes_store::LeaderboardStore::new(self.dynamodb(), self.name("LeaderboardTable"))
            .with_board_shards(self.leaderboard_shards())
    }

    pub(crate) fn leaderboard_shards(&self) -> u32 {
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

    /// `delta` added to `item`'s all-time score row by hand, as a lost event would leave it:
    /// its score, and its key in the score index with it, as every write but a row's first
    /// keeps them.
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
            .update_expression("SET score = score + :delta, ranked = score + :delta")
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
        recount_of(&self.rows("ReactionsTable").await)
    }

    /// The pipeline's invariant: every item's count (a `CountsStore::read`) equals the
    /// recount of the Reactions table, for `items` and every item the table holds, and its
    /// count rows list the likers bucket of every like it holds that the pipeline can read.
    pub async fn assert_counts_match_recount(&self, items: &[&str]) -> Recount {
        let reactions = self.rows("ReactionsTable").await;
        let recount = recount_of(&reactions);
        let liked = buckets_of_likes(&reactions);
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
            let listed = store.liked_buckets(&id).await.expect("buckets read");
            let unlisted: Vec<&u32> = liked
                .get(item)
                .into_iter()
                .flatten()
                .filter(|bucket| !listed.contains(bucket))
                .collect();
            if !unlisted.is_empty() {
                wrong.push(format!("{item}: likes in unlisted buckets {unlisted:?}"));
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
}

/// Reactions rows in LIKE and DISLIKE per item.
fn recount_of(rows: &[likes_store::rows::Item]) -> Recount {
    use aws_sdk_dynamodb::types::AttributeValue;
    let mut counts = Recount::new();
    for row in rows {
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

/// The likers buckets of the users in LIKE per item among Reactions `rows`, of the rows the
/// pipeline can read (a row whose `op_id` is no number is counted by reconciliation, never
/// listed).
fn buckets_of_likes(
    rows: &[likes_store::rows::Item],
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<u32>> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let like = AttributeValue::S("LIKE".into());
    let mut buckets = std::collections::BTreeMap::<_, std::collections::BTreeSet<_>>::new();
    for row in rows {
        if let (Some(AttributeValue::S(item)), Some(AttributeValue::S(user))) =
            (row.get("item_id"), row.get("user_id"))
        {
            let readable = matches!(row.get("op_id"), Some(AttributeValue::N(_)));
            if row.get("state") == Some(&like) && readable {
                let bucket = likes_core::likers::bucket_of(user);
                buckets.entry(item.clone()).or_default().insert(bucket);
            }
        }
    }
    buckets
}
