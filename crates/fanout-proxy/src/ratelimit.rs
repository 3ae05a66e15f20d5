//! At most one WARN per interval for conditions that repeat per frame (queue full,
//! store down, transcript write failing): an operator needs to know, not to be flooded.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct RateLimit {
    interval: Duration,
    last: Mutex<Option<Instant>>,
}

impl RateLimit {
    pub(crate) fn new(interval: Duration) -> Self {
        RateLimit {
            interval,
            last: Mutex::new(None),
        }
    }

    /// True at most once per interval (and the first time).
    pub(crate) fn ready(&self) -> bool {
        self.ready_at(Instant::now())
    }

    fn ready_at(&self, now: Instant) -> bool {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match *last {
            Some(at) if now.duration_since(at) < self.interval => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_interval() {
        // Explicit instants: a paused test thread cannot make this flaky.
        let interval = Duration::from_millis(50);
        let limit = RateLimit::new(interval);
        let start = Instant::now();
        assert!(limit.ready_at(start), "the first time");
        assert!(!limit.ready_at(start + interval / 2));
        assert!(!limit.ready_at(start + interval - Duration::from_nanos(1)));
        assert!(limit.ready_at(start + interval));
        assert!(!limit.ready_at(start + interval + interval / 2));
    }
}
