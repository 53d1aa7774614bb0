//! Per-key rate limits: a token bucket per key id, refilled at the key's
//! rate (`rate_per_sec`, else `query.rate_limit_per_sec`) up to its burst.

use std::time::{Duration, Instant};

/// A token bucket's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens added per second.
    pub per_sec: f64,
    /// The bucket's size.
    pub burst: f64,
}

impl RateLimit {
    /// `per_sec` with a bucket of `burst` (default: `per_sec` rounded up, at least 1).
    pub fn new(per_sec: f64, burst: Option<u32>) -> Self {
        Self {
            per_sec,
            burst: burst.map(f64::from).unwrap_or(per_sec.ceil()).max(1.0),
        }
    }
}

/// One key's bucket.
#[derive(Debug)]
pub(crate) struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket under `limit`, at `now`.
    pub(crate) fn full(limit: RateLimit, now: Instant) -> Self {
        Self {
            limit,
            tokens: limit.burst,
            at: now,
        }
    }

    /// Takes one token; `Err(wait)` when the bucket is empty.
    pub(crate) fn take(&mut self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        if self.limit != limit {
            // The limit changed with the file: start full under the new one.
            self.limit = limit;
            self.tokens = limit.burst;
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * limit.per_sec).min(limit.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / limit.per_sec))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_bucket_allows_its_burst_then_its_rate() {
        let limit = RateLimit::new(2.0, Some(3));
        let start = Instant::now();
        let mut bucket = Bucket::full(limit, start);
        for _ in 0..3 {
            bucket.take(limit, start).unwrap();
        }
        let wait = bucket.take(limit, start).unwrap_err();
        assert!(wait > Duration::from_millis(400) && wait <= Duration::from_millis(500));
        // Half a second later one token is back, and only one.
        let later = start + Duration::from_millis(500);
        bucket.take(limit, later).unwrap();
        assert!(bucket.take(limit, later).is_err());
        // Idle for long: the bucket holds its burst, no more.
        let much_later = later + Duration::from_secs(60);
        for _ in 0..3 {
            bucket.take(limit, much_later).unwrap();
        }
        assert!(bucket.take(limit, much_later).is_err());
    }
}
