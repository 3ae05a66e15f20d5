//! Who gets the CPU first: the pumps, and the recorder they may wait for under a
//! flood. Capture and the store are telemetry that never holds the pumps up (they
//! follow the transcript and catch up), so they run a little below, and on a busy
//! machine a burst of capture work does not sit between a line and its answer.
//!
//! Measured with line-at-a-time round trips through `cat`, all of it pinned to one CPU
//! (the worst case of a busy machine), p99 over 5,000 lines, 3 alternating runs each:
//! 151–166 µs with every thread at one priority, 57–63 µs with capture and the store at
//! nice +10, and 35–38 µs with the recorder lowered too. The recorder keeps the pumps'
//! priority all the same: lowered, it slowed the 128 MiB flood from 1211 to 985 MB/s
//! (medians of 6), since the pumps wait for room in its side pipe. Across both CPUs the
//! three measured the same. +10 leaves capture a tenth of a CPU against a busy one;
//! +19 would leave it next to nothing.

use rustix::process::{getpid, getpriority_process, setpriority_process};

/// How much lower than the pumps the telemetry threads run (a nice increment).
pub const TELEMETRY_NICE: i32 = 10;
/// The lowest priority there is.
const NICE_MAX: i32 = 19;

/// Sets the calling thread's CPU priority [`TELEMETRY_NICE`] below the main thread's
/// (Linux keeps a nice value per thread; the process's is its main thread's), however
/// low it was already. For the threads of capture and the store: the binary's async
/// runtime does it for its workers (and so for the threads they start). Threads started
/// from a lowered thread inherit its priority, so the agent, the pumps and the recorder
/// must be, and are, started from one that is not ([`crate::run`]'s caller's). Best effort: a system that refuses keeps one priority for all.
pub fn lower_telemetry_thread() {
    if let Ok(base) = getpriority_process(Some(getpid())) {
        let _ = setpriority_process(None, (base + TELEMETRY_NICE).min(NICE_MAX));
    }
}
