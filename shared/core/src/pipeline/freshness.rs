//! How fresh a count is: per-shard watermarks, and the `as_of` they add up to.
//!
//! Within one stream shard records arrive in commit order, and the aggregator applies them
//! in that order. So once it has applied a record whose stream time (DynamoDB's
//! `ApproximateCreationDateTime`, taken at commit) is `w`, every flip committed on that shard
//! before `w` is counted: `w` is the shard's **watermark**. Over the whole stream, `as_of` is
//! the lowest watermark among the shards that may still hold unapplied records. A stalled or
//! retrying shard keeps its watermark where it was, so `as_of` stops there; a quiet shard is
//! kept moving by probe writes (see the pulse), so it does not hold `as_of` back.
//!
//! Shard lineage matters: when a shard splits, Lambda finishes the parent before it starts
//! the children. A closed shard is finished once one of its children has a watermark; a shard
//! without a watermark yet is bounded by its nearest ancestor's; a shard with neither leaves
//! `as_of` unknown rather than guessed.

use std::collections::BTreeMap;

/// A stream shard as the stream describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamShard {
    pub shard_id: String,
    pub parent_shard_id: Option<String>,
    /// The shard has an ending sequence number: it takes no new records.
    pub closed: bool,
}

/// Epoch millis before which every flip committed to the stream is counted; `None` when some
/// shard that may hold unapplied records has no watermark to bound it (or there are no
/// shards).
pub fn counts_as_of(shards: &[StreamShard], watermarks: &BTreeMap<String, i64>) -> Option<i64> {
    let by_id: BTreeMap<&str, &StreamShard> =
        shards.iter().map(|s| (s.shard_id.as_str(), s)).collect();
    let has_started_child = |id: &str| {
        shards.iter().any(|s| {
            s.parent_shard_id.as_deref() == Some(id) && watermarks.contains_key(&s.shard_id)
        })
    };
    let mut as_of: Option<i64> = None;
    for shard in shards {
        if shard.closed && has_started_child(&shard.shard_id) {
            continue;
        }
        let bound = bound(shard, &by_id, watermarks)?;
        as_of = Some(as_of.map_or(bound, |a| a.min(bound)));
    }
    as_of
}

/// The probe keys a tick writes: each open shard's own (the aggregator reported it), and the
/// key of each closed shard none of whose open children has reported a key yet. A key stays
/// on its partition key's side of a split, so the parent's key lands in one of its children
/// at once and starts that child's watermark; `uncovered` counts the open shards that neither
/// reaches, for which the pulse tries new keys. Once a child reports a key (the parent's or
/// another it saw last), where the parent's key landed is no longer known, so it covers no
/// other child: a child still without a key is uncovered until a new key lands in it.
pub fn probe_plan(
    shards: &[StreamShard],
    probe_keys: &BTreeMap<String, String>,
) -> (Vec<String>, usize) {
    let lends = |parent: &str| {
        let mut children = shards
            .iter()
            .filter(|s| !s.closed && s.parent_shard_id.as_deref() == Some(parent))
            .peekable();
        children.peek().is_some() && children.all(|s| !probe_keys.contains_key(&s.shard_id))
    };
    let mut keys = Vec::new();
    let mut lent = 0;
    for shard in shards {
        let Some(key) = probe_keys.get(&shard.shard_id) else {
            continue;
        };
        if !shard.closed {
            keys.push(key.clone());
        } else if lends(&shard.shard_id) {
            keys.push(key.clone());
            lent += 1;
        }
    }
    let keyless = shards
        .iter()
        .filter(|s| !s.closed && !probe_keys.contains_key(&s.shard_id))
        .count();
    // A parent's key covers one child of its split, not both.
    let uncovered = keyless.saturating_sub(lent);
    keys.sort();
    keys.dedup();
    (keys, uncovered)
}

/// The shard's own watermark, or its nearest ancestor's (every record of a child comes after
/// all of its parent's).
fn bound(
    shard: &StreamShard,
    by_id: &BTreeMap<&str, &StreamShard>,
    watermarks: &BTreeMap<String, i64>,
) -> Option<i64> {
    let mut current = shard;
    // Lineage is finite, but a malformed description must not loop forever.
    for _ in 0..=by_id.len() {
        if let Some(w) = watermarks.get(&current.shard_id) {
            return Some(*w);
        }
        current = by_id.get(current.parent_shard_id.as_deref()?)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>, closed: bool) -> StreamShard {
        StreamShard {
            shard_id: id.into(),
            parent_shard_id: parent.map(str::to_owned),
            closed,
        }
    }

    fn marks(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn as_of_is_the_lowest_watermark_so_a_stalled_shard_holds_it_back() {
        let shards = [shard("a", None, false), shard("b", None, false)];
        assert_eq!(
            counts_as_of(&shards, &marks(&[("a", 9_000), ("b", 4_000)])),
            Some(4_000)
        );
    }

    #[test]
    fn a_shard_without_any_bound_leaves_as_of_unknown() {
        let shards = [shard("a", None, false), shard("b", None, false)];
        assert_eq!(counts_as_of(&shards, &marks(&[("a", 9_000)])), None);
        assert_eq!(counts_as_of(&[], &marks(&[("a", 9_000)])), None);
    }

    #[test]
    fn a_new_child_is_bounded_by_its_parent_until_it_has_a_watermark() {
        let shards = [
            shard("p", None, true),
            shard("c1", Some("p"), false),
            shard("c2", Some("p"), false),
        ];
        // No child started: the parent may still hold records.
        assert_eq!(counts_as_of(&shards, &marks(&[("p", 5_000)])), Some(5_000));
        // One child started, so the parent is finished; the other child is still bounded by
        // the parent's last watermark.
        assert_eq!(
            counts_as_of(&shards, &marks(&[("p", 5_000), ("c1", 8_000)])),
            Some(5_000)
        );
        assert_eq!(
            counts_as_of(
                &shards,
                &marks(&[("p", 5_000), ("c1", 8_000), ("c2", 7_000)])
            ),
            Some(7_000)
        );
    }

    #[test]
    fn a_closed_shard_nobody_continued_still_counts() {
        let shards = [shard("p", None, true), shard("q", None, false)];
        assert_eq!(
            counts_as_of(&shards, &marks(&[("p", 3_000), ("q", 9_000)])),
            Some(3_000)
        );
    }

    #[test]
    fn a_closed_parents_probe_key_is_written_until_its_children_have_watermarks() {
        let shards = [
            shard("p", None, true),
            shard("c1", Some("p"), false),
            shard("c2", Some("p"), false),
            shard("q", None, false),
        ];
        let keys = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        // Right after the split: the parent's key reaches one child at once; the other child
        // needs new keys.
        assert_eq!(
            probe_plan(&shards, &keys(&[("p", "kp"), ("q", "kq")])),
            (vec!["kp".to_owned(), "kq".to_owned()], 1)
        );
        // The parent's key landed in c1, which reports it: c2 still needs keys of its own.
        assert_eq!(
            probe_plan(&shards, &keys(&[("p", "kp"), ("c1", "kp"), ("q", "kq")])),
            (vec!["kp".to_owned(), "kq".to_owned()], 1)
        );
        // c1 reports another key it saw after the parent's: the parent's key no longer
        // counts for c2, which stays uncovered until a key of its own lands in it.
        assert_eq!(
            probe_plan(&shards, &keys(&[("p", "kp"), ("c1", "k1"), ("q", "kq")])),
            (vec!["k1".to_owned(), "kq".to_owned()], 1)
        );
        // Once both children report keys, the parent's is dropped.
        assert_eq!(
            probe_plan(
                &shards,
                &keys(&[("p", "kp"), ("c1", "k1"), ("c2", "k2"), ("q", "kq")])
            ),
            (vec!["k1".to_owned(), "k2".to_owned(), "kq".to_owned()], 0)
        );
        // A shard with no key and no parent to lend one is uncovered.
        assert_eq!(probe_plan(&shards[3..], &keys(&[])), (vec![], 1));
    }
}
