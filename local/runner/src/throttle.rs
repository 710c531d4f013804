//! API Gateway's route throttles, locally: per route, a token bucket of its burst refilled
//! at its rate; a request past it is refused (429) before anything runs. Both fronts keep
//! one set of buckets each, as API Gateway keeps them per stage and route.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::template::Throttle;

/// Each throttled route's bucket: the tokens left and when they were counted.
#[derive(Debug, Default)]
pub struct RouteThrottles {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RouteThrottles {
    /// Whether route `key`'s throttle lets one more request through now (always, without
    /// one), taking its token.
    pub fn admit(&self, key: &str, throttle: Option<Throttle>) -> bool {
        let Some(throttle) = throttle else {
            return true;
        };
        let mut buckets = self.buckets.lock().expect("throttle lock");
        let now = Instant::now();
        let burst = f64::from(throttle.burst);
        let (tokens, counted) = buckets.entry(key.to_owned()).or_insert((burst, now));
        let refill =
            now.duration_since(*counted).as_secs_f64() * f64::from(throttle.rate_per_second);
        *tokens = (*tokens + refill).min(burst);
        *counted = now;
        if *tokens < 1.0 {
            return false;
        }
        *tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_serves_its_burst_then_its_rate_and_each_route_has_its_own() {
        let throttles = RouteThrottles::default();
        let throttle = Some(Throttle {
            rate_per_second: 1,
            burst: 3,
        });
        let served = (0..10)
            .filter(|_| throttles.admit("GET /a", throttle))
            .count();
        assert_eq!(served, 3, "the burst, and no more at once");
        assert!(
            throttles.admit("GET /b", throttle),
            "another route's bucket is full"
        );
        assert!(throttles.admit("GET /a", None), "no throttle, no limit");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(
            throttles.admit("GET /a", throttle),
            "a token refilled in a second"
        );
        assert!(!throttles.admit("GET /a", throttle));
    }
}
