//! The accounting of `make bench-scale` that could be wrong and still print plausible
//! figures: the write units of the items it bills, Kinesis's hash ranges, each second's
//! worst key in a sliding second, and percentiles. Here rather than beside the code: a
//! `harness = false` bench compiles its `#[cfg(test)]` modules but never runs them.

use crate::{kinesis, mapping, meter, table};
use std::collections::BTreeMap;

use likes_core::likers::LIKER_BUCKETS;
use likes_core::pipeline::{CountTarget, Lane, RowDelta};
use likes_core::{Delta, ItemId};

use kinesis::HashRanges;
use mapping::SECOND;
use meter::{percentile, Histogram, WorstKey};
use table::CountRowSize;

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

/// Epoch millis with 13 significant digits.
const NOW_MS: i64 = 1_732_912_345_678;

fn row(item: &str, lane: Lane, row: u32) -> CountTarget {
    CountTarget {
        item: ItemId::parse(item).unwrap(),
        lane,
        row,
    }
}

/// The write units of an intent listing `rows` cold items' single likes.
fn intent_of(rows: usize) -> u64 {
    let one_like = |bucket: u32| RowDelta {
        total: Delta {
            like: 1,
            dislike: 0,
        },
        by_epoch: BTreeMap::from([(
            5_776_374,
            Delta {
                like: 1,
                dislike: 0,
            },
        )]),
        near_cuts: BTreeMap::new(),
        liked_buckets: [bucket].into(),
    };
    // Cold items of ids as scattered as a hash makes them, each in a row and with a liker's
    // bucket of its own.
    let deltas: BTreeMap<CountTarget, RowDelta> = (0..rows as u64)
        .map(|n| {
            let id = n.wrapping_mul(2_654_435_761) % 1_000_000_007;
            (
                row(&format!("item:{id}"), Lane::Base, (n % 64) as u32),
                one_like((id % u64::from(LIKER_BUCKETS)) as u32),
            )
        })
        .collect();
    table::intent_units(
        "shardId-00000001536019433613-c6a8f3e4",
        NOW_MS,
        NOW_MS,
        &deltas,
        NOW_MS,
    )
}

#[test]
fn an_intent_costs_one_unit_per_started_kilobyte_of_the_rows_it_lists() {
    let one = intent_of(1);
    assert_eq!(one, 1, "a small intent is one unit");
    let thousand = intent_of(1000);
    // Each listed row is its item id and numbers in compact JSON, tens of bytes, deflated to
    // about a third: a thousand of them start about ten kilobytes.
    assert!((8..=30).contains(&thousand), "{thousand} units");
    assert!(
        intent_of(2000) > thousand,
        "units grow with the rows listed"
    );
}

#[test]
fn a_count_row_write_is_one_unit_until_its_notes_pass_a_kilobyte() {
    let size = CountRowSize::new();
    let fit = size.notes_in_one_unit();
    assert!(fit >= 20, "a row keeps about 22 B a note: {size:?}");
    assert_eq!(size.units(0), 1);
    assert_eq!(size.units(fit), 1);
    assert_eq!(size.units(fit + 1), 2);
    assert_eq!(table::small_update_units(), 1);
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
fn a_burst_across_a_seconds_edge_counts_whole_in_the_second_its_window_ends() {
    let mut meter = WorstKey::new();
    meter.charge(SECOND - 100, "a", 600);
    // 200 µs after the first: one sliding second holds both, though the clock's seconds
    // split them (where "b" would be the worst of the second).
    meter.charge(SECOND + 100, "a", 600);
    meter.charge(SECOND + 200, "b", 700);
    // Within a second of the second charge, then past it.
    meter.charge(2 * SECOND + 50, "a", 1);
    meter.charge(2 * SECOND + 150, "a", 1);
    let seconds = meter.finish(2 * SECOND + 150);
    assert_eq!(
        seconds.worst,
        vec![
            (600, Some("a".to_owned())),
            (1200, Some("a".to_owned())),
            (601, Some("a".to_owned()))
        ]
    );
    assert_eq!(seconds.total, vec![600, 1300, 2]);
    assert_eq!(seconds.peak(), (1200, Some(&"a".to_owned()), 1));
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
