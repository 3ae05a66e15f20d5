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
        let now = Instant::now();
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
        let limit = RateLimit::new(Duration::from_millis(50));
        assert!(limit.ready());
        assert!(!limit.ready());
        std::thread::sleep(Duration::from_millis(60));
        assert!(limit.ready());
    }
}
