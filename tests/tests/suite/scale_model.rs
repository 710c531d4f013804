//! The accounting of `make bench-scale` that could be wrong and still print plausible
//! figures: the write units of the items it bills, Kinesis's hash ranges, transaction
//! conflicts, per-second worst keys and percentiles. Here rather than beside the code: a
//! `harness = false` bench compiles its `#[cfg(test)]` modules but never runs them.

use crate::{capacity, kinesis, mapping, meter, table};
use likes_core::pipeline::{CountTarget, Lane};
use likes_core::ItemId;

use kinesis::HashRanges;
use mapping::SECOND;
use meter::{percentile, Histogram, WorstKey};
use table::RowLocks;

#[test]
fn hash_ranges_split_evenly_with_exact_boundaries() {
    let four = HashRanges::new(4);
    let quarter = 1u128 << 126;
    assert_eq!(four.shard_of_hash(0), 0);
    assert_eq!(four.shard_of_hash(quarter - 1), 0);
    assert_eq!(four.shard_of_hash(quarter), 1);
    assert_eq!(four.shard_of_hash(3 * quarter - 1), 2);
    assert_eq!(four.shard_of_hash(3 * quarter), 3);
    assert_eq!(four.shard_of_hash(u128::MAX), 3);
    assert_eq!(HashRanges::new(200).shard_of_hash(u128::MAX), 199);
    assert_eq!(HashRanges::new(1).shard_of_hash(u128::MAX), 0);
}

#[test]
fn a_partition_key_is_placed_by_its_md5_read_big_endian() {
    // MD5("") = d41d8cd98f00b204e9800998ecf8427e: with 256 shards, its first byte.
    assert_eq!(HashRanges::new(256).shard_of(""), 0xd4);
    assert_eq!(HashRanges::new(2).shard_of(""), 1);
    // MD5("a") = 0cc175b9c0f1b6a831c399e269772661.
    assert_eq!(HashRanges::new(256).shard_of("a"), 0x0c);
    assert_eq!(HashRanges::new(16).shard_of("a"), 0);
}

#[test]
fn distinct_partition_keys_spread_over_every_shard() {
    let ranges = HashRanges::new(200);
    let mut per_shard = vec![0u32; 200];
    for n in 0..200_000 {
        per_shard[ranges.shard_of(&format!("key-{n}"))] += 1;
    }
    let (min, max) = (per_shard.iter().min(), per_shard.iter().max());
    assert!(
        *min.unwrap() > 850 && *max.unwrap() < 1150,
        "1000 expected per shard, {min:?}..{max:?}"
    );
}

/// A stream eventID: 32 hex digits.
fn event_id(n: usize) -> String {
    format!("{n:032x}")
}

/// Epoch millis with 13 significant digits: 8 bytes; its TTL in seconds: 6.
const NOW_MS: i64 = 1_732_912_345_678;

fn claim_of(records: usize) -> u64 {
    let ids: Vec<String> = (0..records).map(event_id).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    table::claim_units(ids[0], &ids, NOW_MS)
}

#[test]
fn a_claim_costs_two_units_per_started_kilobyte_of_its_event_ids() {
    // Names (37), key (32) and times (14), plus 33 bytes a record (an id and a comma, one
    // comma fewer than ids): 82 + 33 n.
    let ids: Vec<String> = (0..28).map(event_id).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let item = table::claim_item(ids[0], &ids, NOW_MS);
    assert_eq!(capacity::item_size(&item), 82 + 33 * 28);
    assert_eq!(claim_of(28), 2, "1006 bytes: one started kilobyte, twice");
    assert_eq!(claim_of(29), 4, "1039 bytes: two");
    assert_eq!(claim_of(1000), 2 * 33, "33,082 bytes: 33 started kilobytes");
}

#[test]
fn a_count_row_write_is_two_units_in_a_transaction_and_one_alone() {
    assert_eq!(table::count_update_units(), 2);
    assert_eq!(table::small_update_units(), 1);
}

fn row(item: &str, lane: Lane, row: u32) -> CountTarget {
    CountTarget {
        item: ItemId::parse(item).unwrap(),
        lane,
        row,
    }
}

#[test]
fn transactions_conflict_only_on_the_same_row_while_both_are_in_flight() {
    let mut locks = RowLocks::default();
    let hot = row("viral", Lane::Overflow(3), 7);
    let cold = row("cold", Lane::Base, 7);
    assert!(locks.try_take([&hot].into_iter(), 0, 20));
    // Same partition key and row, overlapping: cancelled, and it takes nothing.
    assert!(!locks.try_take([&cold, &hot].into_iter(), 10, 30));
    assert!(locks.try_take([&cold].into_iter(), 11, 12));
    // The same partition key's other row, the item's other partition: no conflict.
    let other_row = row("viral", Lane::Overflow(3), 8);
    let other_partition = row("viral", Lane::Overflow(4), 7);
    assert!(locks.try_take([&other_row].into_iter(), 10, 30));
    assert!(locks.try_take([&other_partition].into_iter(), 10, 30));
    // Once the first has committed, its row is free again; forgetting it changes nothing.
    locks.release_before(20);
    assert!(locks.try_take([&hot].into_iter(), 20, 40));
    assert!(!locks.try_take([&hot].into_iter(), 39, 50));
}

#[test]
fn each_second_keeps_its_own_worst_key_and_quiet_seconds_are_zero() {
    let mut meter = WorstKey::new();
    meter.charge(10, "a", 2);
    meter.charge(20, "b", 3);
    meter.charge(30, "a", 2);
    meter.charge(2 * SECOND + 5, "b", 1);
    let seconds = meter.finish(2 * SECOND + 9);
    assert_eq!(
        seconds.worst,
        vec![
            (4, Some("a".to_owned())),
            (0, None),
            (1, Some("b".to_owned()))
        ]
    );
    assert_eq!(seconds.total, vec![7, 0, 1]);
    assert_eq!(seconds.peak(), (4, Some(&"a".to_owned()), 0));
}

#[test]
fn percentiles_take_the_nearest_rank() {
    let mut h = Histogram::default();
    h.record(10, 98);
    h.record(500, 2);
    assert_eq!(h.percentile(50.0), Some(10));
    assert_eq!(h.percentile(98.0), Some(10));
    assert_eq!(h.percentile(99.0), Some(500));
    assert_eq!(Histogram::default().percentile(50.0), None);
    assert_eq!(percentile(&[5, 1, 3], 50.0), 3);
    assert_eq!(percentile(&[5, 1, 3], 100.0), 5);
}
