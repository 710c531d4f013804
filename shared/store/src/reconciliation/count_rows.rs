//! The count rows as reconciliation reads them back (every row of every item, with its
//! subtotals and near-cut counts), the corrections it writes, and the subtotals it drops
//! once a cut is reconciled.

use std::collections::{BTreeMap, BTreeSet};

use likes_core::pipeline::overflow_partition;
use likes_core::reconcile::{
    near_cut_attribute, subtotal_attributes, CountRowState, BEFORE_FIRST_LIKES, FIRST_EPOCH,
    FIRST_NEAR_CUTS,
};
use likes_core::{Delta, ItemId};

use crate::counts::{INTENT_NOTE_PREFIX, OVERFLOW_MARKER};
use crate::error::condition_held;
use crate::pages::query_all;
use crate::rows::{attr, from_item, listed_buckets, Attribute, CountRow, Item, ReconciledRow};
use crate::StoreError;

use super::{
    n, remove_attributes, s, ItemCountRows, ItemRows, ReconciliationStore, RowKey, CORRECTION_ROW,
    SCAN_SEGMENTS,
};

impl ReconciliationStore {
    /// Every item's count rows (base, overflow and correction rows), by item, with its
    /// overflow marker and the likers buckets its rows list. A full Scan in parallel
    /// segments: it finds every overflow partition, those no marker names too.
    pub async fn count_rows(&self) -> Result<ItemRows, StoreError> {
        let mut segments = tokio::task::JoinSet::new();
        for segment in 0..SCAN_SEGMENTS {
            let store = self.clone();
            segments.spawn(async move { store.scan_segment(segment).await });
        }
        let mut rows = ItemRows::new();
        while let Some(joined) = segments.join_next().await {
            for row in joined.map_err(StoreError::Task)?? {
                add_row(&mut rows, row)?;
            }
        }
        Ok(rows)
    }

    /// One item's count rows (base, overflow and correction rows) with their subtotals,
    /// strongly consistent: the base partition, then every overflow partition its marker
    /// names, each read page by page.
    pub async fn item_rows(&self, item: &ItemId) -> Result<Vec<CountRowState>, StoreError> {
        Ok(self.item_count_rows(item, 0).await?.states())
    }

    /// As [`Self::item_rows`], with the marker and the listed likers buckets, reading the
    /// overflow partitions up to `beyond` too where the marker names fewer (rows a lost
    /// marker hides, which Athena found in an export).
    pub async fn item_count_rows(
        &self,
        item: &ItemId,
        beyond: u32,
    ) -> Result<ItemCountRows, StoreError> {
        let mut rows = ItemRows::new();
        let mut partition = item.as_str().to_owned();
        let mut h = 0;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.counts_table)
                .consistent_read(true)
                .key_condition_expression(format!("{} = :partition", attr::ITEM_ID))
                .expression_attribute_values(":partition", s(&partition));
            for row in query_all(query).await? {
                add_row(&mut rows, row)?;
            }
            let marked = rows.get(item).map_or(0, |rows| rows.marked);
            h += 1;
            if h > marked.max(beyond) {
                return Ok(rows.remove(item).unwrap_or_default());
            }
            partition = overflow_partition(item, h);
        }
    }

    /// Names overflow partitions `1..=partitions` of `item` on its marker again, as the
    /// aggregator's marker does (it only grows), so readers add the rows a lost marker hid.
    /// `false` when the marker names as many already.
    pub async fn restore_overflow_marker(
        &self,
        item: &ItemId,
        partitions: u32,
    ) -> Result<bool, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, s(item.as_str()))
            .key(attr::SHARD, s(OVERFLOW_MARKER))
            .update_expression("SET #partitions = :h")
            .condition_expression("attribute_not_exists(#partitions) OR #partitions < :h")
            .expression_attribute_names("#partitions", attr::PARTITIONS)
            .expression_attribute_values(":h", n(i64::from(partitions)))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    pub(super) async fn scan_segment(&self, segment: i32) -> Result<Vec<Item>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let (rows, next) = self.scan_items(segment, start).await?;
            found.extend(rows);
            match next {
                Some(key) => start = Some(key),
                None => return Ok(found),
            }
        }
    }

    /// One page of Scan segment `segment` of [`SCAN_SEGMENTS`] from `start`: its count rows,
    /// and where the next page starts (`None` after the last).
    pub async fn scan_page(
        &self,
        segment: i32,
        start: Option<Item>,
    ) -> Result<(Vec<(ItemId, RowKey, CountRowState)>, Option<Item>), StoreError> {
        let (rows, next) = self.scan_items(segment, start).await?;
        let mut found = Vec::new();
        for row in rows {
            if let Some(parsed) = parse_count_row(row)? {
                found.push(parsed);
            }
        }
        Ok((found, next))
    }

    /// One page of Scan segment `segment` as it is, and where the next starts.
    async fn scan_items(
        &self,
        segment: i32,
        start: Option<Item>,
    ) -> Result<(Vec<Item>, Option<Item>), StoreError> {
        let page = self
            .client
            .scan()
            .table_name(&self.counts_table)
            .segment(segment)
            .total_segments(SCAN_SEGMENTS)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|err| StoreError::aws("Scan", err))?;
        Ok((
            page.items.unwrap_or_default(),
            page.last_evaluated_key.filter(|key| !key.is_empty()),
        ))
    }

    /// Lists likers buckets of `item` on its correction row, as the aggregator lists the
    /// buckets of the likes it counts: before a repair writes a liked entry the pipeline
    /// never counted (its stream record lost), so a page reads its bucket. An ADD to a set,
    /// so writing it again changes nothing.
    pub async fn list_liked_buckets(
        &self,
        item: &ItemId,
        liked: &BTreeSet<u32>,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, s(item.as_str()))
            .key(attr::SHARD, s(CORRECTION_ROW))
            .update_expression("ADD #lb :lb")
            .expression_attribute_names("#lb", attr::LIKED_BUCKETS)
            .expression_attribute_values(":lb", listed_buckets(liked))
            .send()
            .await
            .map_err(|err| StoreError::aws("UpdateItem", err))?;
        Ok(())
    }

    /// Adds `delta` to the item's correction row, attributed to the epoch before the cut, once
    /// per run: `false` when this run already corrected the item (a rerun writes nothing).
    /// Runs go forward in cut order, so the row keeps only the last cut that corrected it
    /// (`last_cut`), one number however many runs there are; a row of the older layout, which
    /// named every run in a set `runs`, is still checked against it and moved to the number.
    pub async fn correct(
        &self,
        item: &ItemId,
        delta: Delta,
        cut_epoch: i64,
        run_id: &str,
    ) -> Result<bool, StoreError> {
        let (like, dislike) = subtotal_attributes(cut_epoch - 1);
        let result = self
            .client
            .update_item()
            .table_name(&self.counts_table)
            .key(attr::ITEM_ID, s(item.as_str()))
            .key(attr::SHARD, s(CORRECTION_ROW))
            .update_expression(format!(
                "SET {last} = :cut ADD {} :like, {} :dislike, #el :like, #ed :dislike \
                 REMOVE {runs}",
                attr::LIKE_COUNT,
                attr::DISLIKE_COUNT,
                last = attr::LAST_CUT,
                runs = attr::RUNS
            ))
            .condition_expression(format!(
                "(attribute_not_exists({last}) OR {last} < :cut) AND \
                 (attribute_not_exists({runs}) OR NOT contains({runs}, :id))",
                last = attr::LAST_CUT,
                runs = attr::RUNS
            ))
            .expression_attribute_names("#el", like)
            .expression_attribute_names("#ed", dislike)
            .expression_attribute_values(":like", n(delta.like))
            .expression_attribute_values(":dislike", n(delta.dislike))
            .expression_attribute_values(":cut", n(cut_epoch))
            .expression_attribute_values(":id", s(run_id))
            .send()
            .await;
        condition_held("UpdateItem", result)
    }

    /// Drops subtotals of epochs before the cut, and near-cut counts before it, from one row:
    /// no later cut needs them, and rows stay small; and the intent `notes` still below
    /// `notes_before` (one a shard wrote again since the row was read stays). However many
    /// there are, each update removes at most
    /// [`REMOVED_PER_UPDATE`](super::REMOVED_PER_UPDATE), so no expression nears DynamoDB's 4 KB.
    pub async fn drop_reconciled(
        &self,
        key: &RowKey,
        attributes: &[String],
        (notes, notes_before): (&[String], i64),
    ) -> Result<(), StoreError> {
        let key = [
            (attr::ITEM_ID.to_owned(), s(&key.partition)),
            (attr::SHARD.to_owned(), s(&key.sort_key)),
        ];
        remove_attributes(
            &self.client,
            &self.counts_table,
            &key,
            attributes,
            (notes, notes_before),
        )
        .await
    }
}

/// The attributes of a row that neither a later cut nor a rerun of `cut` needs: a rerun must
/// still see the changes near its own cut, or it would correct the items it deferred.
pub fn reconciled_attributes(row: &CountRowState, cut: i64) -> Vec<String> {
    let mut names = Vec::new();
    for epoch in row.subtotals.keys().filter(|e| **e < cut) {
        let (like, dislike) = subtotal_attributes(*epoch);
        names.push(like);
        names.push(dislike);
    }
    for k in row.near_cuts.keys().filter(|k| **k < cut) {
        names.push(near_cut_attribute(*k));
    }
    names
}

/// A row's notes of intents numbered before `before_ms` (intent numbers follow the clock),
/// to drop: no intent that old is applied again (see
/// [`likes_core::pipeline::INTENT_NOTE_HORIZON_MS`]), so they guard nothing. Dropped only
/// when the row is written anyway (`cleaned`), or once it keeps more than
/// `NOTES_KEPT` (8) of them: a row a few shards wrote once is never written again for its
/// notes alone, and no row keeps more than that many stale ones.
pub fn stale_intent_notes(row: &CountRowState, before_ms: i64, cleaned: bool) -> Vec<String> {
    let stale: Vec<String> = row
        .intent_notes
        .iter()
        .filter(|(_, n)| **n < before_ms)
        .map(|(name, _)| name.clone())
        .collect();
    if cleaned || stale.len() > NOTES_KEPT {
        stale
    } else {
        Vec::new()
    }
}

/// Stale intent notes a row keeps until it is written anyway: a few hundred bytes at most.
const NOTES_KEPT: usize = 8;

/// A row's totals with the epoch subtotals (`e<j>l`, `e<j>d`), near-cut counts (`n<k>`),
/// first epoch (`fe`), likes from before it (`bfl`) and changes near its edges (`nf0`,
/// `nf1`) among its other attributes; an attribute of another name is left
/// out.
pub(crate) fn row_state(total: Delta, others: &BTreeMap<String, Attribute>) -> CountRowState {
    let mut state = CountRowState {
        total,
        ..CountRowState::default()
    };
    for (name, value) in others {
        let Attribute::Number(number) = *value else {
            continue;
        };
        if name.starts_with(INTENT_NOTE_PREFIX) {
            state.intent_notes.insert(name.clone(), number);
            continue;
        }
        if name == FIRST_EPOCH {
            state.first_epoch = Some(number);
            continue;
        }
        if name == BEFORE_FIRST_LIKES {
            state.before_first.like = number;
            continue;
        }
        if let Some(at) = FIRST_NEAR_CUTS.iter().position(|first| name == first) {
            state.first_near_cuts[at] = number.max(0) as u64;
            continue;
        }
        let (kind, tail) = name.split_at(1.min(name.len()));
        let epoch = |suffix: char| {
            tail.strip_suffix(suffix)
                .and_then(|e| e.parse::<i64>().ok())
        };
        match kind {
            "e" => {
                if let Some(epoch) = epoch('l') {
                    state.subtotals.entry(epoch).or_default().like = number;
                } else if let Some(epoch) = epoch('d') {
                    state.subtotals.entry(epoch).or_default().dislike = number;
                }
            }
            "n" => {
                if let Ok(cut) = tail.parse::<i64>() {
                    state.near_cuts.insert(cut, number.max(0) as u64);
                }
            }
            _ => {}
        }
    }
    state
}

/// Adds one row of the Counts table to the item it belongs to: a count row with its listed
/// likers buckets, or a base partition's overflow marker. Other rows are left out.
fn add_row(rows: &mut ItemRows, row: Item) -> Result<(), StoreError> {
    let text = |name: &str| row.get(name).and_then(|v| v.as_s().ok()).cloned();
    let (Some(partition), Some(shard)) = (text(attr::ITEM_ID), text(attr::SHARD)) else {
        return Ok(());
    };
    if partition.starts_with('#') {
        return Ok(());
    }
    if shard == OVERFLOW_MARKER && !partition.contains('#') {
        let item = ItemId::parse(&partition)
            .map_err(|err| StoreError::Corrupt(format!("overflow marker {partition}: {err}")))?;
        let marked = from_item::<CountRow>(row)?.partitions.unwrap_or(0);
        rows.entry(item).or_default().marked = marked;
        return Ok(());
    }
    let liked: Vec<u32> = match shard.starts_with("D#") {
        true => from_item::<CountRow>(row.clone())?
            .liked_buckets()
            .collect(),
        false => return Ok(()),
    };
    let Some((item, key, state)) = parse_count_row(row)? else {
        return Ok(());
    };
    // An overflow partition is `<item>#<h>`.
    let h = key
        .partition
        .split_once('#')
        .and_then(|(_, h)| h.parse::<u32>().ok())
        .unwrap_or(0);
    let entry = rows.entry(item).or_default();
    entry.overflow = entry.overflow.max(h);
    entry.liked_buckets.extend(liked);
    entry.rows.push((key, state));
    Ok(())
}

/// A count row as (item, state), with its key kept for cleanup; `None` for rows that are not
/// count rows (freshness rows, the run state, overflow markers).
pub(super) fn parse_count_row(
    row: Item,
) -> Result<Option<(ItemId, RowKey, CountRowState)>, StoreError> {
    let row: ReconciledRow = from_item(row)?;
    if row.item_id.starts_with('#') || !row.shard.starts_with("D#") {
        return Ok(None);
    }
    // An overflow partition is `<item>#<h>`; `#` never appears in an item id.
    let item = row.item_id.split('#').next().unwrap_or_default();
    let item = ItemId::parse(item)
        .map_err(|err| StoreError::Corrupt(format!("count row {}: {err}", row.item_id)))?;
    let state = row_state(
        Delta {
            like: row.like_count,
            dislike: row.dislike_count,
        },
        &row.others,
    );
    let key = RowKey {
        partition: row.item_id,
        sort_key: row.shard,
    };
    Ok(Some((item, key, state)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_rows_are_read_with_their_subtotals_and_near_cut_counts() {
        let row: Item = [
            (attr::ITEM_ID, s("game:1#3")),
            (attr::SHARD, s("D#4")),
            ("like_count", n(7)),
            ("dislike_count", n(-1)),
            ("e12l", n(5)),
            ("e12d", n(-1)),
            ("e13l", n(2)),
            ("n13", n(1)),
            ("i#00aa00bb00cc", n(1_000)),
            ("i#00dd00ee00ff", n(5_000)),
            ("updated_at", n(99)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let (item, key, state) = parse_count_row(row).unwrap().unwrap();
        assert_eq!(
            (key.partition.as_str(), key.sort_key.as_str()),
            ("game:1#3", "D#4")
        );
        assert_eq!(
            item.as_str(),
            "game:1",
            "an overflow partition belongs to its item"
        );
        assert_eq!(
            state.total,
            Delta {
                like: 7,
                dislike: -1
            }
        );
        assert_eq!(
            state.subtotals[&12],
            Delta {
                like: 5,
                dislike: -1
            }
        );
        assert_eq!(
            state.subtotals[&13],
            Delta {
                like: 2,
                dislike: 0
            }
        );
        assert_eq!(state.near_cuts[&13], 1);
        assert_eq!(state.intent_notes.len(), 2);
        assert_eq!(stale_intent_notes(&state, 4_000, true), ["i#00aa00bb00cc"]);
        assert!(
            stale_intent_notes(&state, 4_000, false).is_empty(),
            "one stale note is not worth a write of its own"
        );
        let mut crowded = state.clone();
        crowded.intent_notes = (0..=NOTES_KEPT as i64)
            .map(|n| (format!("i#{n:012x}"), n))
            .collect();
        assert_eq!(
            stale_intent_notes(&crowded, 4_000, false).len(),
            NOTES_KEPT + 1,
            "a row with more stale notes than it keeps is written for them"
        );
        assert_eq!(reconciled_attributes(&state, 13), ["e12l", "e12d"]);
        assert_eq!(
            reconciled_attributes(&state, 14),
            ["e12l", "e12d", "e13l", "e13d", "n13"]
        );
    }

    #[test]
    fn rows_that_are_not_count_rows_are_skipped() {
        for (pk, sk) in [("#wm#s1", "W"), ("#reconcile", "S"), ("game:1", "H")] {
            let row: Item = [(attr::ITEM_ID, s(pk)), (attr::SHARD, s(sk))]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
            assert_eq!(parse_count_row(row).unwrap(), None, "{pk} {sk}");
        }
    }
}
