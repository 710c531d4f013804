//! Keys a function reads from elsewhere (the token issuer's JWKS, the cursor secret's
//! versions) and keeps for its warm invocations, so a key rotated at its source takes effect
//! without a deploy: the keys are fetched again when they are older than their age limit,
//! and as soon as a caller meets a key they do not hold (signed or sealed after a rotation),
//! at most once per interval however many callers meet one at once. The interval bounds what
//! a stream of unknown keys (a forger's, or garbage) can make a function fetch.

use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

/// `T` as last fetched, shared by the invocations of one function instance.
#[derive(Debug)]
pub struct FetchedKeys<T> {
    held: RwLock<Option<Held<T>>>,
    /// One fetch at a time; callers that wait on it use what it fetched.
    fetching: tokio::sync::Mutex<()>,
    max_age: Duration,
    min_interval: Duration,
}

#[derive(Debug)]
struct Held<T> {
    keys: Arc<T>,
    fetched_at: Instant,
}

impl<T> FetchedKeys<T> {
    /// Keys kept up to `max_age`, fetched again on a miss no sooner than `min_interval` after
    /// the last fetch.
    pub fn new(max_age: Duration, min_interval: Duration) -> Self {
        Self {
            held: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(()),
            max_age,
            min_interval,
        }
    }

    fn held(&self) -> Option<(Arc<T>, Instant)> {
        let held = self.held.read().unwrap_or_else(|e| e.into_inner());
        held.as_ref()
            .map(|held| (held.keys.clone(), held.fetched_at))
    }

    /// The keys held, fetched first when none are or they have passed their age. When a
    /// refresh of keys already held fails, those keys serve on (the source is down, not
    /// rotated) and the failure is logged; with none held, the failure is the caller's.
    pub async fn get<F, Fut, E>(&self, fetch: F) -> Result<Arc<T>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: std::fmt::Display,
    {
        if let Some((keys, fetched_at)) = self.held() {
            if fetched_at.elapsed() < self.max_age {
                return Ok(keys);
            }
        }
        let _turn = self.fetching.lock().await;
        match self.held() {
            Some((keys, fetched_at)) if fetched_at.elapsed() < self.max_age => Ok(keys),
            held => match fetch().await {
                Ok(keys) => Ok(self.keep(keys)),
                Err(error) => match held {
                    Some((keys, _)) => {
                        tracing::warn!(%error, "keys not refreshed; the ones held serve on");
                        Ok(keys)
                    }
                    None => Err(error),
                },
            },
        }
    }

    /// Keys fetched after `missed_at`, the moment a caller read the keys held and found its
    /// key missing: those of a fetch another caller began since, or of a fetch made now,
    /// once `min_interval` has passed since the last one.
    pub async fn refreshed<F, Fut, E>(&self, missed_at: Instant, fetch: F) -> Result<Arc<T>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let _turn = self.fetching.lock().await;
        let held = self.held();
        if let Some((keys, fetched_at)) = &held {
            if *fetched_at >= missed_at {
                return Ok(keys.clone());
            }
            tokio::time::sleep_until(*fetched_at + self.min_interval).await;
        }
        Ok(self.keep(fetch().await?))
    }

    fn keep(&self, keys: T) -> Arc<T> {
        let keys = Arc::new(keys);
        *self.held.write().unwrap_or_else(|e| e.into_inner()) = Some(Held {
            keys: keys.clone(),
            fetched_at: Instant::now(),
        });
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    const MIN_INTERVAL: Duration = Duration::from_millis(200);

    /// A source whose fetches are counted: each answers the fetch's number.
    #[derive(Default)]
    struct Source(AtomicU32);

    impl Source {
        async fn fetch(&self) -> Result<u32, String> {
            Ok(self.0.fetch_add(1, Ordering::SeqCst) + 1)
        }
        fn fetches(&self) -> u32 {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn keys_are_fetched_once_and_kept_until_their_age() {
        let source = Source::default();
        let keys = FetchedKeys::new(Duration::from_millis(300), MIN_INTERVAL);
        assert_eq!(*keys.get(|| source.fetch()).await.unwrap(), 1);
        assert_eq!(*keys.get(|| source.fetch()).await.unwrap(), 1);
        assert_eq!(source.fetches(), 1);
        tokio::time::sleep(Duration::from_millis(320)).await;
        assert_eq!(*keys.get(|| source.fetch()).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn misses_at_once_fetch_once_and_never_sooner_than_the_interval() {
        let source = Source::default();
        let keys = FetchedKeys::new(Duration::from_secs(60), MIN_INTERVAL);
        let missed_at = Instant::now();
        keys.get(|| source.fetch()).await.unwrap();
        // A miss seen before the first fetch ended is answered by that fetch.
        assert_eq!(
            *keys.refreshed(missed_at, || source.fetch()).await.unwrap(),
            1
        );
        let missed_at = Instant::now();
        let started = Instant::now();
        let misses = tokio::join!(
            keys.refreshed(missed_at, || source.fetch()),
            keys.refreshed(missed_at, || source.fetch()),
        );
        assert_eq!((*misses.0.unwrap(), *misses.1.unwrap()), (2, 2));
        assert_eq!(source.fetches(), 2, "two misses at once, one fetch");
        assert!(started.elapsed() >= MIN_INTERVAL - Duration::from_millis(20));
    }

    #[tokio::test]
    async fn a_failed_refresh_keeps_the_keys_held_and_a_first_fetch_fails() {
        let keys = FetchedKeys::<u32>::new(Duration::ZERO, MIN_INTERVAL);
        let down = || async { Err::<u32, _>("the source is down".to_owned()) };
        assert!(keys.get(down).await.is_err());
        keys.get(|| async { Ok::<_, String>(7) }).await.unwrap();
        assert_eq!(*keys.get(down).await.unwrap(), 7);
    }
}
