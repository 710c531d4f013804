//! Where a partition key lands: the MD5 of the key read as a 128-bit unsigned integer, in
//! one of N hash-key ranges split evenly over 0..2^128, as Kinesis places a record on a shard
//! (`PutRecord`'s partition key is "hashed with MD5 to map it to a 128-bit integer").

use md5::{Digest, Md5};

/// Kinesis takes at most this many records a second into one shard.
pub const RECORDS_PER_SHARD_SECOND: u64 = 1000;

/// N shards with even hash-key ranges: shard i starts at ceil(i * 2^128 / N).
#[derive(Debug, Clone, Copy)]
pub struct HashRanges {
    shards: u32,
}

impl HashRanges {
    pub fn new(shards: u32) -> Self {
        assert!(shards > 0, "a stream has at least one shard");
        Self { shards }
    }

    pub fn shard_of(&self, partition_key: &str) -> usize {
        let digest = Md5::digest(partition_key.as_bytes());
        self.shard_of_hash(u128::from_be_bytes(digest.into()))
    }

    /// floor(hash * N / 2^128), exactly: the high half of a 256-bit product, from two
    /// 64-bit halves of the hash (N < 2^32, so neither partial product overflows).
    pub fn shard_of_hash(&self, hash: u128) -> usize {
        let n = u128::from(self.shards);
        let high = (hash >> 64) * n;
        let low = (hash & u128::from(u64::MAX)) * n;
        ((high + (low >> 64)) >> 64) as usize
    }
}
