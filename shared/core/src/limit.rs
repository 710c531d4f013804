//! Per-user write limits: a token bucket of `burst` tokens refilled at `rate` tokens a
//! second, kept in one DynamoDB row per user, and spent by containers through short leases.
//!
//! **The row.** The bucket is kept in its GCRA form, one number: `tat`, the time at which the
//! bucket is full again, on the bucket's own clock (`now_ms × rate`, i.e. the millitokens
//! the bucket would have been refilled by since the epoch). The bucket holds
//! `burst − max(0, tat − clock)` millitokens; taking `n` tokens moves `tat` to
//! `max(tat, clock) + 1000·n`, allowed only while that stays within `clock + 1000·burst`.
//! All integers: no float drift. Written this way DynamoDB can apply a take without
//! the writer reading the row first and without losing a concurrent take: when the bucket is
//! in debt the update is relative (`tat = tat + cost`), guarded by `tat <= at_most`
//! ([`BucketUpdate::Extend`]); when it is full the update is absolute, guarded by
//! `tat <= clock` ([`BucketUpdate::Restart`]). The two conditions are disjoint, so exactly
//! one can hold, and a refused one returns the row that says which.
//!
//! **Leases.** A container takes up to [`WriteLimit::lease_size`] tokens (one second of the
//! rate) in one conditional write and spends them locally for [`LEASE_MS`]; what it has not
//! spent by then is lost, never given back. Every token spent was first taken from the
//! shared bucket, so over any window of `t` seconds one user's accepted writes are at most
//! `burst + rate × (t + 1 s)`, however many containers serve them: the error is one second
//! of the rate (5 writes with the defaults), from tokens taken just before the window and
//! spent in it. A writer below the rate in one container is never refused: its leases drain
//! at most one second of refill per second.

use crate::ValidationError;

/// Millitokens per token.
pub const MILLI: i64 = 1000;
/// How long a container may spend a lease's tokens.
pub const LEASE_MS: i64 = 1000;

/// The per-user write limit: `rate_per_second` tokens a second, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteLimit {
    rate_per_second: u32,
    burst: u32,
}

/// A user's bucket as stored: its `tat` and the rate whose clock `tat` is on. A row written
/// under another rate (the template's parameter changed) reads as a full bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub tat: i64,
    pub rate: u32,
}

/// What one conditional write on the bucket row does, and on which condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketUpdate {
    /// The bucket is full (no row, a row of another rate, or `tat <= clock`): set `tat`.
    Restart { clock: i64, tat: i64 },
    /// The bucket is in debt by no more than allows this take (`clock < tat <= at_most`):
    /// add `cost` to `tat`.
    Extend { clock: i64, cost: i64, at_most: i64 },
}

/// A take the limit allows: how many tokens, and the write that takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    pub tokens: u32,
    pub update: BucketUpdate,
}

/// What the bucket, as last seen, allows now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    Take(Take),
    /// Empty: no token before `retry_after_ms` from now.
    Refuse {
        retry_after_ms: i64,
    },
}

/// Whether one write may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// Past the limit: nothing may be written; a token is due in `retry_after_ms`.
    Limited {
        retry_after_ms: i64,
    },
    /// A moderator suspended the user's writes: nothing may be written until it is lifted.
    Suspended,
}

/// `Retry-After` of a refusal: whole seconds, rounded up, at least 1 (a client told 0 would
/// retry at once, into the same refusal).
pub fn retry_after_seconds(retry_after_ms: i64) -> u64 {
    (retry_after_ms.max(1) as u64).div_ceil(1000)
}

impl WriteLimit {
    pub fn new(rate_per_second: u32, burst: u32) -> Result<Self, ValidationError> {
        if rate_per_second == 0 || burst == 0 {
            return Err(ValidationError::WriteLimit {
                rate_per_second,
                burst,
            });
        }
        Ok(Self {
            rate_per_second,
            burst,
        })
    }

    pub fn rate_per_second(self) -> u32 {
        self.rate_per_second
    }

    pub fn burst(self) -> u32 {
        self.burst
    }

    /// Tokens one lease asks for: one second of the rate (never more than the burst), so a
    /// lease's unspent tokens cost at most what the bucket refills while it lasts.
    pub fn lease_size(self) -> u32 {
        self.rate_per_second.min(self.burst)
    }

    /// Seconds an empty bucket takes to fill (the `w` of `RateLimit-Policy`), rounded up.
    pub fn window_seconds(self) -> u32 {
        self.burst.div_ceil(self.rate_per_second)
    }

    /// Now on the bucket's clock: millitokens of refill since the epoch.
    fn clock(self, now_ms: i64) -> i64 {
        now_ms * i64::from(self.rate_per_second)
    }

    fn capacity(self) -> i64 {
        i64::from(self.burst) * MILLI
    }

    /// `tat` of a bucket this limit can read: one of another rate is full, as if absent.
    fn debt(self, bucket: Option<Bucket>, clock: i64) -> i64 {
        bucket
            .filter(|b| b.rate == self.rate_per_second)
            .map_or(0, |b| (b.tat - clock).max(0))
    }

    /// Whole tokens the bucket holds now.
    pub fn available(self, bucket: Option<Bucket>, now_ms: i64) -> u32 {
        let clock = self.clock(now_ms);
        ((self.capacity() - self.debt(bucket, clock)) / MILLI) as u32
    }

    /// The take of up to `want` tokens that `bucket` (as last seen) allows at `now_ms`, or
    /// how long until it holds a token again.
    pub fn plan(self, bucket: Option<Bucket>, now_ms: i64, want: u32) -> Plan {
        let clock = self.clock(now_ms);
        let debt = self.debt(bucket, clock);
        let tokens = want.min(self.available(bucket, now_ms));
        if tokens == 0 {
            // A token is due once the debt is down to `capacity - MILLI`; the clock runs
            // `rate` millitokens per millisecond.
            let due = debt - (self.capacity() - MILLI);
            let rate = i64::from(self.rate_per_second);
            return Plan::Refuse {
                retry_after_ms: (due + rate - 1) / rate,
            };
        }
        let cost = i64::from(tokens) * MILLI;
        let update = if debt == 0 {
            BucketUpdate::Restart {
                clock,
                tat: clock + cost,
            }
        } else {
            BucketUpdate::Extend {
                clock,
                cost,
                at_most: clock + self.capacity() - cost,
            }
        };
        Plan::Take(Take { tokens, update })
    }

    /// When a row written at `now_ms` is surely full again, in epoch seconds: its TTL. A
    /// row past its `tat` reads as full, the same as no row, so when TTL really deletes it
    /// never matters.
    pub fn full_again_s(self, now_ms: i64) -> i64 {
        let refill_ms = self.capacity() / i64::from(self.rate_per_second);
        (now_ms + refill_ms) / 1000 + 1
    }

    /// The IETF `RateLimit-Policy` field (draft-ietf-httpapi-ratelimit-headers-09): a quota
    /// of `burst` writes, refilled over `window_seconds`.
    pub fn policy_field(self) -> String {
        format!("\"default\";q={};w={}", self.burst, self.window_seconds())
    }

    /// The `RateLimit` field of a refused write: nothing left, a token in `retry_after_s`.
    pub fn exhausted_field(retry_after_s: u64) -> String {
        format!("\"default\";r=0;t={retry_after_s}")
    }
}

impl BucketUpdate {
    /// Whether the write's condition holds on `stored`: the same test the store states in
    /// DynamoDB's words.
    pub fn holds(&self, stored: Option<Bucket>, rate: u32) -> bool {
        let same_rate = stored.filter(|b| b.rate == rate);
        match *self {
            Self::Restart { clock, .. } => same_rate.is_none_or(|b| b.tat <= clock),
            Self::Extend { clock, at_most, .. } => {
                same_rate.is_some_and(|b| b.tat > clock && b.tat <= at_most)
            }
        }
    }

    /// The row after the write, when its condition held.
    pub fn apply(&self, stored: Option<Bucket>, rate: u32) -> Option<Bucket> {
        if !self.holds(stored, rate) {
            return None;
        }
        let tat = match (*self, stored) {
            (Self::Restart { tat, .. }, _) => tat,
            (Self::Extend { cost, .. }, Some(bucket)) => bucket.tat + cost,
            (Self::Extend { .. }, None) => unreachable!("Extend holds only on a stored row"),
        };
        Some(Bucket { tat, rate })
    }
}

/// The tokens a container holds for one user: spent locally until the lease runs out. It
/// also remembers the bucket as last seen (to pick the right write next time) and, after a
/// refusal, when a token is due: until then it refuses without asking DynamoDB, which is
/// exact or early-refusing only, since other containers can only push that time later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub tokens: u32,
    pub until_ms: i64,
    pub bucket: Option<Bucket>,
    pub refused_until_ms: i64,
}

impl Lease {
    /// A lease of `tokens` just taken at `now_ms` (one of them already spent by the caller).
    pub fn taken(tokens: u32, bucket: Bucket, now_ms: i64) -> Self {
        Self {
            tokens,
            until_ms: now_ms + LEASE_MS,
            bucket: Some(bucket),
            refused_until_ms: 0,
        }
    }

    /// What a refusal leaves: no tokens, and no need to ask again before a token is due.
    pub fn refused(bucket: Option<Bucket>, now_ms: i64, retry_after_ms: i64) -> Self {
        Self {
            tokens: 0,
            until_ms: now_ms,
            bucket,
            refused_until_ms: now_ms + retry_after_ms,
        }
    }

    /// Spends one token of the lease if it holds one and is still running.
    pub fn spend(&mut self, now_ms: i64) -> bool {
        let running = now_ms < self.until_ms && self.tokens > 0;
        if running {
            self.tokens -= 1;
        }
        running
    }

    /// The answer a recent refusal still gives, without a store call.
    pub fn still_refused(&self, now_ms: i64) -> Option<Admission> {
        (now_ms < self.refused_until_ms).then_some(Admission::Limited {
            retry_after_ms: self.refused_until_ms - now_ms,
        })
    }

    /// Whether the entry still says anything a fresh one would not: tokens to spend or a
    /// refusal to repeat (the bucket as seen is only a guess, safe to forget).
    pub fn is_live(&self, now_ms: i64) -> bool {
        (self.tokens > 0 && now_ms < self.until_ms) || now_ms < self.refused_until_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: i64 = 1_764_000_000_000;

    fn defaults() -> WriteLimit {
        WriteLimit::new(5, 30).unwrap()
    }

    /// The store's loop, in memory: plan from the row as seen, write on its condition, and
    /// on a refused condition plan again from the row the refusal returns.
    fn take(limit: WriteLimit, row: &mut Option<Bucket>, now_ms: i64, want: u32) -> u32 {
        loop {
            match limit.plan(*row, now_ms, want) {
                Plan::Refuse { .. } => return 0,
                Plan::Take(take) => {
                    if let Some(after) = take.update.apply(*row, limit.rate_per_second) {
                        *row = Some(after);
                        return take.tokens;
                    }
                }
            }
        }
    }

    #[test]
    fn a_new_user_gets_a_full_bucket_and_a_first_write_is_never_refused() {
        let limit = defaults();
        assert_eq!(limit.available(None, T0), 30);
        let mut row = None;
        assert_eq!(take(limit, &mut row, T0, limit.lease_size()), 5);
        assert_eq!(limit.available(row, T0), 25);
        // The smallest limit too.
        let tiny = WriteLimit::new(1, 1).unwrap();
        let mut row = None;
        assert_eq!(take(tiny, &mut row, T0, tiny.lease_size()), 1);
    }

    #[test]
    fn an_empty_bucket_refills_at_the_rate_and_says_when() {
        let limit = defaults();
        let mut row = None;
        assert_eq!(take(limit, &mut row, T0, 30), 30);
        assert_eq!(
            limit.plan(row, T0, 1),
            Plan::Refuse {
                retry_after_ms: 200
            }
        );
        assert_eq!(
            limit.plan(row, T0 + 150, 1),
            Plan::Refuse { retry_after_ms: 50 }
        );
        assert_eq!(
            take(limit, &mut row, T0 + 200, 5),
            1,
            "one token per 200 ms"
        );
        assert_eq!(take(limit, &mut row, T0 + 1200, 10), 5);
        // Six seconds refill the whole burst, and no more.
        assert_eq!(limit.available(row, T0 + 1200 + 6000), 30);
        assert_eq!(limit.available(row, T0 + 1200 + 60_000), 30);
    }

    #[test]
    fn the_two_writes_have_disjoint_conditions() {
        let limit = defaults();
        let full = limit.plan(None, T0, 5);
        let Plan::Take(Take {
            update: restart @ BucketUpdate::Restart { .. },
            ..
        }) = full
        else {
            panic!("a full bucket restarts: {full:?}");
        };
        let row = restart.apply(None, 5);
        let Plan::Take(Take {
            update: extend @ BucketUpdate::Extend { .. },
            ..
        }) = limit.plan(row, T0, 5)
        else {
            panic!("a bucket in debt extends");
        };
        for stored in [None, row, Some(Bucket { tat: 0, rate: 5 })] {
            assert!(
                !(restart.holds(stored, 5) && extend.holds(stored, 5)),
                "{stored:?}"
            );
        }
        // A stale guess (the row moved on meanwhile) fails and the refusal's row replans.
        assert!(!restart.holds(row, 5));
        assert!(extend.holds(row, 5));
    }

    #[test]
    fn a_row_of_another_rate_reads_as_full() {
        let limit = defaults();
        let old = Some(Bucket {
            tat: i64::MAX / 2,
            rate: 50,
        });
        assert_eq!(limit.available(old, T0), 30);
        let Plan::Take(take) = limit.plan(old, T0, 5) else {
            panic!("a full bucket grants");
        };
        assert!(take.update.holds(old, 5));
    }

    #[test]
    fn a_lease_is_spent_locally_until_it_runs_out() {
        let mut lease = Lease::taken(2, Bucket { tat: 0, rate: 5 }, T0);
        assert!(lease.spend(T0 + 10));
        assert!(lease.spend(T0 + 20));
        assert!(!lease.spend(T0 + 30), "spent");
        let mut late = Lease::taken(4, Bucket { tat: 0, rate: 5 }, T0);
        assert!(!late.spend(T0 + LEASE_MS), "expired: the rest is lost");
        let refused = Lease::refused(None, T0, 200);
        assert_eq!(
            refused.still_refused(T0 + 50),
            Some(Admission::Limited {
                retry_after_ms: 150
            })
        );
        assert_eq!(refused.still_refused(T0 + 200), None);
        assert!(!refused.is_live(T0 + 200));
    }

    #[test]
    fn header_fields_follow_the_structured_field_form() {
        assert_eq!(defaults().policy_field(), "\"default\";q=30;w=6");
        assert_eq!(
            WriteLimit::new(4, 30).unwrap().policy_field(),
            "\"default\";q=30;w=8"
        );
        assert_eq!(WriteLimit::exhausted_field(1), "\"default\";r=0;t=1");
        assert_eq!(retry_after_seconds(200), 1);
        assert_eq!(retry_after_seconds(0), 1);
        assert_eq!(retry_after_seconds(1001), 2);
        assert!(WriteLimit::new(0, 30).is_err());
        assert!(WriteLimit::new(5, 0).is_err());
    }

    proptest! {
        /// However takes are interleaved (one shared row, several containers each spending
        /// leases locally), the writes accepted in any window of `t` ms are at most
        /// `burst + rate × (t + LEASE_MS) / 1000`; with direct takes (no lease), at most
        /// `burst + rate × t / 1000`, rounded down.
        #[test]
        fn accepted_writes_never_exceed_burst_plus_rate_over_any_window(
            rate in 1u32..20,
            burst in 1u32..40,
            steps in prop::collection::vec((0i64..400, 0usize..3), 1..200),
        ) {
            let limit = WriteLimit::new(rate, burst).unwrap();
            let mut direct_row = None;
            let mut leased_row = None;
            let mut leases: [Option<Lease>; 3] = [None; 3];
            let mut now = T0;
            let mut direct = Vec::new();
            let mut leased = Vec::new();
            for (dt, container) in steps {
                now += dt;
                if take(limit, &mut direct_row, now, 1) == 1 {
                    direct.push(now);
                }
                let spent = leases[container].as_mut().is_some_and(|l| l.spend(now));
                if spent {
                    leased.push(now);
                    continue;
                }
                let got = take(limit, &mut leased_row, now, limit.lease_size());
                if got > 0 {
                    leases[container] = Some(Lease::taken(got - 1, leased_row.unwrap(), now));
                    leased.push(now);
                }
            }
            let bound = |times: &[i64], slack: i64| {
                for (i, start) in times.iter().enumerate() {
                    for (j, end) in times.iter().enumerate().skip(i) {
                        let window = end - start;
                        let allowed = i64::from(burst)
                            + i64::from(rate) * (window + slack) / 1000;
                        prop_assert!(
                            (j - i + 1) as i64 <= allowed,
                            "{} writes in {window} ms, {allowed} allowed", j - i + 1
                        );
                    }
                }
                Ok(())
            };
            bound(&direct, 0)?;
            bound(&leased, LEASE_MS)?;
        }

        /// One container writing below the rate is never refused, leases and all.
        #[test]
        fn a_writer_below_the_rate_is_never_refused(
            rate in 1u32..20,
            burst in 1u32..40,
            gaps in prop::collection::vec(0i64..2000, 1..100),
        ) {
            let limit = WriteLimit::new(rate, burst).unwrap();
            let min_gap = 1000 / i64::from(rate) + 1;
            let mut row = None;
            let mut lease: Option<Lease> = None;
            let mut now = T0;
            for gap in gaps {
                now += gap.max(min_gap);
                if lease.as_mut().is_some_and(|l| l.spend(now)) {
                    continue;
                }
                let got = take(limit, &mut row, now, limit.lease_size());
                prop_assert!(got > 0, "refused at {now}");
                lease = Some(Lease::taken(got - 1, row.unwrap(), now));
            }
        }
    }
}
