//! DynamoDB's billing arithmetic, from its published item-size rules: an item's size is the
//! sum over its attributes of the name's UTF-8 bytes plus the value's size; a standard write
//! costs one write unit per started 1 KB of the larger of the item's before and after images,
//! and twice that inside `TransactWriteItems`; an eventually consistent read costs half a
//! read unit per started 4 KB of what one request reads (a Query sums its items first).
//!
//! Shared by the benches (`make bench-write`, `make bench-counts`); each uses part of it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

pub type Item = HashMap<String, AttributeValue>;

pub const WRITE_UNIT_BYTES: usize = 1024;
pub const READ_UNIT_BYTES: usize = 4096;
/// Every index entry carries this much overhead on top of its key and projected attributes.
const INDEX_ENTRY_OVERHEAD: usize = 100;
/// A List or Map costs 3 bytes however full, plus 1 byte per element.
const DOCUMENT_OVERHEAD: usize = 3;

pub fn item_size(item: &Item) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(list) => {
            DOCUMENT_OVERHEAD + list.iter().map(|v| value_size(v) + 1).sum::<usize>()
        }
        AttributeValue::M(map) => {
            DOCUMENT_OVERHEAD
                + map
                    .iter()
                    .map(|(k, v)| k.len() + value_size(v) + 1)
                    .sum::<usize>()
        }
        _ => panic!("an attribute type this arithmetic does not know: {value:?}"),
    }
}

/// DynamoDB stores a number as base-100 digit pairs aligned on the decimal point, leading
/// and trailing zero pairs dropped, plus one byte (AWS: "approximately 1 byte per two
/// significant digits, plus 1"); a negative number one byte more, zero one byte, and never
/// more than 21 bytes (38 significant digits). The rule the public calculators apply.
fn number_size(raw: &str) -> usize {
    let (negative, digits) = match raw.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, raw.strip_prefix('+').unwrap_or(raw)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let whole = whole.trim_start_matches('0');
    let fraction = fraction.trim_end_matches('0');
    let mut aligned = String::new();
    if whole.len() % 2 == 1 {
        aligned.push('0');
    }
    aligned.push_str(whole);
    aligned.push_str(fraction);
    if fraction.len() % 2 == 1 {
        aligned.push('0');
    }
    let pairs: Vec<&str> = aligned
        .as_bytes()
        .chunks(2)
        .map(|pair| std::str::from_utf8(pair).expect("ASCII digits"))
        .collect();
    let significant = pairs
        .iter()
        .position(|p| *p != "00")
        .map(|first| {
            let last = pairs
                .iter()
                .rposition(|p| *p != "00")
                .expect("a non-zero pair");
            last - first + 1
        })
        .unwrap_or(0);
    if significant == 0 {
        return 1;
    }
    (significant + 1 + usize::from(negative)).min(21)
}

pub fn write_units(bytes: usize) -> u64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as u64
}

/// An item written inside `TransactWriteItems`: two write units per started 1 KB (AWS bills
/// the prepare and the commit).
pub fn transactional_write_units(bytes: usize) -> u64 {
    2 * write_units(bytes)
}

/// One eventually consistent read request (GetItem, or a Query over the sum of the item
/// sizes it reads, whatever its projection): half a read unit per started 4 KB, at least
/// half a unit even when nothing matches. In half units, so sums stay exact.
pub fn eventually_consistent_half_units(bytes: usize) -> u64 {
    bytes.div_ceil(READ_UNIT_BYTES).max(1) as u64
}

/// A successful UpdateItem: the larger of the before and after images (a new row has no
/// before image).
pub fn update_units(before: &Item, after: &Item) -> u64 {
    write_units(item_size(before).max(item_size(after)))
}

/// A conditional write whose condition is false still consumes write capacity: the size of
/// the existing item, at least one unit. Nothing is written and no index is touched.
pub fn failed_condition_units(existing: &Item) -> u64 {
    write_units(item_size(existing))
}

/// One write of an index entry whose keys and projected attributes take `bytes`.
pub fn index_entry_units(bytes: usize) -> u64 {
    write_units(bytes + INDEX_ENTRY_OVERHEAD)
}

/// A local secondary index with a KEYS_ONLY projection: its entries hold the table's key,
/// the index sort key and nothing else.
pub struct KeysOnlyIndex {
    pub table_keys: [&'static str; 2],
    pub sort_key: &'static str,
}

impl KeysOnlyIndex {
    fn entry_units(&self, item: &Item) -> u64 {
        let key_bytes: usize = self
            .table_keys
            .iter()
            .chain([&self.sort_key])
            .filter_map(|name| item.get(*name).map(|v| name.len() + value_size(v)))
            .sum();
        index_entry_units(key_bytes)
    }

    /// The index writes one table write causes (AWS, "Provisioned throughput considerations
    /// for Local Secondary Indexes"): one put when the indexed attribute appears, one delete
    /// when it disappears, a delete and a put when its value changes, nothing when it stays
    /// (a KEYS_ONLY entry has no other attribute that could change) or is absent throughout.
    pub fn write_units(&self, before: &Item, after: &Item) -> u64 {
        match (before.get(self.sort_key), after.get(self.sort_key)) {
            (None, None) => 0,
            (None, Some(_)) => self.entry_units(after),
            (Some(_), None) => self.entry_units(before),
            (Some(old), Some(new)) if old == new => 0,
            (Some(_), Some(_)) => self.entry_units(before) + self.entry_units(after),
        }
    }
}

/// The worked examples: AWS's own (`shirt-color` = "R", `shirt-size` = "M" is 23 bytes) and
/// the number encoding on the values this service stores. Checked at every run, so a wrong
/// figure cannot be printed from a broken rule.
pub fn check_rules() {
    let shirt: Item = HashMap::from([
        ("shirt-color".to_owned(), AttributeValue::S("R".into())),
        ("shirt-size".to_owned(), AttributeValue::S("M".into())),
    ]);
    assert_eq!(item_size(&shirt), 23);
    for (number, bytes) in [
        ("0", 1),
        ("1", 2),
        ("99", 2),
        ("100", 2),
        ("1000", 2),
        ("120", 3),
        ("1732912345678", 8),
        ("-7", 3),
        ("0.5", 2),
        ("12.34", 3),
    ] {
        assert_eq!(number_size(number), bytes, "size of the number {number}");
    }
    assert_eq!(write_units(0), 1);
    assert_eq!(write_units(1024), 1);
    assert_eq!(write_units(1025), 2);
    assert_eq!(transactional_write_units(3_700), 8);
    assert_eq!(eventually_consistent_half_units(0), 1);
    assert_eq!(eventually_consistent_half_units(4096), 1);
    assert_eq!(eventually_consistent_half_units(4097), 2);
}
