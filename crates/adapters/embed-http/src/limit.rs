//! How many requests go to the API at once: an adaptive limit (AIMD) shared
//! by every call of one [`crate::HttpEmbedder`].
//!
//! The limit starts at `max_in_flight`. A success raises it by `1 / limit`
//! (about one more request per window of answers), up to `max_in_flight`,
//! while the window is in use (as many were in flight as the limit allows
//! since it last changed: a limit that was never tried is not raised). A sign
//! of overload — 429, 503, 504, a timeout, any `Retry-After` — halves it
//! (at least 1), once per window: failures of requests sent before the last
//! cut do not cut again. A `Retry-After` also holds back every request not
//! yet sent until it has passed, so none is sent earlier than the API asked.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Why a request counts as a sign of overload; the metric's `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Throttle {
    /// 429 Too Many Requests.
    RateLimited,
    /// 503 or 504, or another answer with `Retry-After`.
    Unavailable,
    /// No answer within the timeout.
    Timeout,
}

impl Throttle {
    fn label(self) -> &'static str {
        match self {
            Throttle::RateLimited => "rate_limited",
            Throttle::Unavailable => "unavailable",
            Throttle::Timeout => "timeout",
        }
    }
}

#[derive(Debug)]
struct State {
    /// Requests allowed in flight, fractional so that it grows by 1/limit.
    limit: f64,
    in_flight: usize,
    /// The most in flight since the limit's whole part last changed.
    peak: usize,
    /// No request starts before this (the latest `Retry-After`).
    resume_at: Option<Instant>,
    /// When the limit was last cut: a request sent before it cannot cut again.
    last_cut: Option<Instant>,
}

/// The adaptive limit; see the module documentation.
#[derive(Debug)]
pub(crate) struct Limiter {
    max: usize,
    state: Mutex<State>,
    changed: Notify,
}

/// A request slot; released when dropped.
pub(crate) struct Permit<'a> {
    limiter: &'a Limiter,
    sent: Instant,
}

/// What the limiter looks like now (for tests and metrics).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitSnapshot {
    /// Requests allowed in flight now (1 ..= `max_in_flight`).
    pub limit: usize,
    /// Requests in flight now.
    pub in_flight: usize,
}

impl Limiter {
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        let state = State {
            limit: max as f64,
            in_flight: 0,
            peak: 0,
            resume_at: None,
            last_cut: None,
        };
        let limiter = Self {
            max,
            state: Mutex::new(state),
            changed: Notify::new(),
        };
        limiter.publish(&limiter.lock());
        limiter
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent under every operation (plain field
        // updates), so a panic elsewhere while holding it leaves it usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, state: &State) {
        let metrics = weft_telemetry::metrics();
        metrics
            .embedding_api_concurrency
            .set(state.limit.floor() as i64);
        metrics.embedding_api_in_flight.set(state.in_flight as i64);
    }

    pub(crate) fn snapshot(&self) -> LimitSnapshot {
        let state = self.lock();
        LimitSnapshot {
            limit: state.limit.floor() as usize,
            in_flight: state.in_flight,
        }
    }

    /// Waits for a slot: until any `Retry-After` has passed and fewer than
    /// the limit are in flight.
    pub(crate) async fn acquire(&self) -> Permit<'_> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before the state is read, so a release in between
            // is not missed.
            notified.as_mut().enable();
            let wait_until = {
                let mut state = self.lock();
                let now = Instant::now();
                match state.resume_at {
                    Some(at) if at > now => Some(at),
                    _ => {
                        state.resume_at = None;
                        if (state.in_flight as f64) < state.limit.floor() {
                            state.in_flight += 1;
                            state.peak = state.peak.max(state.in_flight);
                            self.publish(&state);
                            return Permit {
                                limiter: self,
                                sent: now,
                            };
                        }
                        None
                    }
                }
            };
            match wait_until {
                Some(at) => tokio::time::sleep_until(at).await,
                None => notified.await,
            }
        }
    }
}

impl Permit<'_> {
    /// The request was answered: one step up, if the window is in use.
    pub(crate) fn succeeded(self) {
        let mut state = self.limiter.lock();
        let whole = state.limit.floor();
        if state.peak as f64 >= whole {
            state.limit = (state.limit + 1.0 / state.limit).min(self.limiter.max as f64);
            if state.limit.floor() != whole {
                // The new width has to be used before it grows again (this
                // request still counts as in flight here).
                state.peak = state.in_flight;
            }
        }
        self.limiter.publish(&state);
        // Dropping self releases the slot and wakes the waiters.
    }

    /// The API is overloaded: halve the limit (once per window) and, with a
    /// `Retry-After`, hold back every request until it has passed.
    pub(crate) fn throttled(self, why: Throttle, retry_after: Option<Duration>) {
        weft_telemetry::metrics()
            .embedding_api_throttled
            .with_label_values(&[why.label()])
            .inc();
        let mut state = self.limiter.lock();
        let now = Instant::now();
        if state.last_cut.is_none_or(|cut| self.sent >= cut) {
            state.limit = (state.limit / 2.0).max(1.0);
            state.last_cut = Some(now);
            state.peak = 0;
        }
        if let Some(after) = retry_after {
            let until = now + after;
            state.resume_at = Some(state.resume_at.map_or(until, |at| at.max(until)));
        }
        self.limiter.publish(&state);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.limiter.lock();
            state.in_flight = state.in_flight.saturating_sub(1);
            self.limiter.publish(&state);
        }
        self.limiter.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_limit_halves_once_per_window_and_grows_back() {
        let limiter = Limiter::new(8);
        let permits: Vec<_> = futures::future::join_all((0..8).map(|_| limiter.acquire())).await;
        assert_eq!(limiter.snapshot().in_flight, 8);
        // Eight requests of one window fail together: one cut, not eight.
        for p in permits {
            p.throttled(Throttle::RateLimited, None);
        }
        assert_eq!(
            limiter.snapshot(),
            LimitSnapshot {
                limit: 4,
                in_flight: 0
            }
        );
        // A request sent after the cut cuts again.
        limiter.acquire().await.throttled(Throttle::Timeout, None);
        assert_eq!(limiter.snapshot().limit, 2);
        // Answers with one request in flight of two allowed: the window is
        // not in use, the limit stays.
        for _ in 0..10 {
            limiter.acquire().await.succeeded();
        }
        assert_eq!(limiter.snapshot().limit, 2);
        // Additive increase with the window full: from 2 back to 8 takes
        // 2+3+…+7 = 27 answers, a few more when a new width is first filled.
        let mut answers = 0;
        while limiter.snapshot().limit < 8 {
            let window = limiter.snapshot().limit;
            let permits: Vec<_> =
                futures::future::join_all((0..window).map(|_| limiter.acquire())).await;
            for p in permits {
                p.succeeded();
                answers += 1;
            }
            assert!(answers < 60, "{:?}", limiter.snapshot());
        }
        assert!((26..=45).contains(&answers), "{answers}");
        for _ in 0..5 {
            let permits: Vec<_> =
                futures::future::join_all((0..8).map(|_| limiter.acquire())).await;
            for p in permits {
                p.succeeded();
            }
        }
        assert_eq!(limiter.snapshot().limit, 8, "bounded by max_in_flight");
    }

    #[tokio::test]
    async fn retry_after_holds_back_every_request() {
        let limiter = Limiter::new(4);
        let t0 = Instant::now();
        limiter
            .acquire()
            .await
            .throttled(Throttle::RateLimited, Some(Duration::from_millis(300)));
        let p = limiter.acquire().await;
        assert!(
            t0.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t0.elapsed()
        );
        drop(p);
        // Never below one request in flight.
        for _ in 0..5 {
            limiter
                .acquire()
                .await
                .throttled(Throttle::Unavailable, None);
        }
        assert_eq!(limiter.snapshot().limit, 1);
    }

    #[tokio::test]
    async fn waiters_get_the_slot_released() {
        let limiter = std::sync::Arc::new(Limiter::new(1));
        let first = limiter.acquire().await;
        let l = limiter.clone();
        let waiter = tokio::spawn(async move {
            let _p = l.acquire().await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one in flight at most");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken when the slot was released")
            .unwrap();
    }
}
