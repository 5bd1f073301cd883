//! The one monotonic `serverSeq` and the actions kept for `reconnect`
//! replay, bounded in count and in bytes. Numbers are reserved in the store
//! in blocks before they are issued (see [`super::durable`]), so a new
//! instance continues above every number an earlier one issued.

use std::collections::{HashSet, VecDeque};

use serde_json::Value;

pub(super) struct ReplayBuffer {
    /// The last `serverSeq` issued.
    seq: u64,
    /// This instance's first `serverSeq`, less one: numbers up to it were
    /// (or may have been) issued by an earlier instance, so a client that
    /// last saw one of them gets snapshots, never a replay.
    base: u64,
    /// Numbers above this are not reserved in the store yet.
    ceiling: u64,
    kept: VecDeque<Kept>,
    /// Bytes of what `kept` holds (envelopes and channel names).
    kept_bytes: usize,
}

/// One action kept for replay, as it was broadcast.
struct Kept {
    seq: u64,
    channel: String,
    /// The `action` notification's params, serialized.
    envelope: String,
}

impl Kept {
    /// What it costs against `[server] replay_buffer_bytes`: the channel
    /// name counts as well as the envelope (many actions on short-lived
    /// channels must not hide behind small envelopes).
    fn bytes(&self) -> usize {
        self.envelope.len() + self.channel.len()
    }
}

impl ReplayBuffer {
    /// Without a store, the clock orders instances: microseconds since
    /// 1970 stay below 2^53 (a JSON number any client reads exactly) until
    /// the year 2255, and no instance issues one action per microsecond for
    /// its whole life. A store replaces this with its reserved ceiling.
    pub(super) fn new() -> Self {
        let base = jiff::Timestamp::now().as_microsecond().max(0) as u64;
        Self {
            seq: base,
            base,
            ceiling: u64::MAX,
            kept: VecDeque::new(),
            kept_bytes: 0,
        }
    }

    /// Continues above `stored_ceiling`, the highest number an earlier
    /// instance may have issued; returns the first number of this one.
    pub(super) fn continue_above(&mut self, stored_ceiling: u64) -> u64 {
        // Burn the ceiling itself: it may have been issued.
        self.seq = stored_ceiling + 1;
        self.base = self.seq;
        // Actions kept before the store was opened (the audit log's channel
        // publishes from startup) carry numbers of the clock-based series
        // just abandoned: above every new one, they would make the oldest
        // kept action look newer than anything a client saw, and no
        // reconnect would ever be replayed. No client has seen them.
        self.kept.clear();
        self.kept_bytes = 0;
        self.seq + 1
    }

    /// The last number issued.
    pub(super) fn current(&self) -> u64 {
        self.seq
    }

    /// The next number, if it is reserved; `Err(n)`: reserve above `n` first.
    pub(super) fn next(&mut self) -> Result<u64, u64> {
        if self.seq >= self.ceiling {
            return Err(self.seq);
        }
        self.seq += 1;
        Ok(self.seq)
    }

    /// Numbers up to `ceiling` are reserved now.
    pub(super) fn reserved(&mut self, ceiling: u64) {
        self.ceiling = ceiling;
    }

    /// Issues the next number whatever the reservation (the store failed:
    /// serving goes on, and the log says a restart may reuse numbers).
    pub(super) fn next_unreserved(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Keeps an action for replay, dropping the oldest beyond either bound.
    pub(super) fn keep(
        &mut self,
        seq: u64,
        channel: &str,
        envelope: String,
        max_count: usize,
        max_bytes: usize,
    ) {
        let kept = Kept {
            seq,
            channel: channel.to_owned(),
            envelope,
        };
        self.kept_bytes += kept.bytes();
        self.kept.push_back(kept);
        while self.kept.len() > max_count || self.kept_bytes > max_bytes {
            match self.kept.pop_front() {
                Some(old) => self.kept_bytes -= old.bytes(),
                None => break,
            }
        }
    }

    /// Every kept action on `channels` after `last`, when all of them are
    /// still kept and `last` was issued by this instance; `None`: the client
    /// needs snapshots.
    pub(super) fn since(&self, last: u64, channels: &HashSet<&str>) -> Option<Vec<Value>> {
        let oldest = self.kept.front().map(|k| k.seq).unwrap_or(self.seq + 1);
        let replayable = last >= self.base && last <= self.seq && last.saturating_add(1) >= oldest;
        if !replayable {
            return None;
        }
        let actions = self
            .kept
            .iter()
            .filter(|k| k.seq > last && channels.contains(k.channel.as_str()))
            .filter_map(|k| serde_json::from_str(&k.envelope).ok())
            .collect();
        Some(actions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_is_bounded_and_only_for_this_instance() {
        let mut replay = ReplayBuffer::new();
        replay.continue_above(100);
        replay.reserved(1000);
        let mut issued = Vec::new();
        for i in 0..5 {
            let seq = replay.next().unwrap();
            issued.push(seq);
            replay.keep(seq, "c", format!("{{\"n\":{i}}}"), 3, 1 << 20);
        }
        let channels = HashSet::from(["c"]);
        assert_eq!(replay.since(issued[1], &channels).map(|v| v.len()), Some(3));
        assert_eq!(
            replay.since(issued[0], &channels),
            None,
            "dropped: snapshots"
        );
        assert_eq!(
            replay.since(50, &channels),
            None,
            "an earlier instance's number"
        );
        replay.reserved(replay.current());
        assert!(replay.next().is_err(), "past the reservation");
    }

    #[test]
    fn actions_kept_before_the_store_opened_do_not_stop_replay() {
        let mut replay = ReplayBuffer::new();
        let early = replay.next_unreserved();
        replay.keep(early, "c", "{\"early\":1}".into(), 10, 1 << 20);
        replay.continue_above(100);
        replay.reserved(1000);
        let first = replay.next().unwrap();
        replay.keep(first, "c", "{\"n\":1}".into(), 10, 1 << 20);
        let second = replay.next().unwrap();
        replay.keep(second, "c", "{\"n\":2}".into(), 10, 1 << 20);
        let channels = HashSet::from(["c"]);
        assert_eq!(replay.since(first, &channels).map(|v| v.len()), Some(1));
    }

    #[test]
    fn channel_names_count_against_the_bytes() {
        let mut replay = ReplayBuffer::new();
        replay.continue_above(0);
        replay.reserved(1000);
        let long = "c".repeat(100);
        let mut first = 0;
        for i in 0..4 {
            let seq = replay.next().unwrap();
            first = if i == 0 { seq } else { first };
            replay.keep(seq, &long, "{}".into(), 10, 250);
        }
        let channels = HashSet::from([long.as_str()]);
        // 102 bytes each: two fit in 250, the envelopes alone would not say so.
        assert_eq!(replay.since(first, &channels), None);
        assert_eq!(replay.since(first + 1, &channels).map(|v| v.len()), Some(2));
    }
}
