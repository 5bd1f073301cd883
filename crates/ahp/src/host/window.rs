//! The turns a chat keeps in memory: a window of its newest completed
//! turns, bounded by `[server] turn_window` (a count) and
//! `turn_window_bytes` (their JSON). Older turns live in the store (see
//! [`super::history`]) and come back a page at a time through `fetchTurns`
//! and `chat/turnsLoaded`. A chat state's `turnsNextCursor` names the
//! ordinal of its first kept turn (0: the chat's first turn ever).
//!
//! Pure: what leaves the window and what a page holds, nothing else.

use std::io::Write;

use ahp_types::state::Turn;

/// How much of a chat stays in memory, and how much one page brings back.
#[derive(Debug, Clone, Copy)]
pub(super) struct WindowBounds {
    pub turns: usize,
    pub bytes: usize,
}

const CURSOR: &str = "turns-before:";

/// The cursor of a window whose first turn is the `first`th: none when
/// nothing is older.
pub(super) fn cursor(first: u64) -> Option<String> {
    (first > 0).then(|| format!("{CURSOR}{first}"))
}

/// The ordinal a cursor this host issued names; `None`: not one of ours.
pub(super) fn parse_cursor(c: &str) -> Option<u64> {
    c.strip_prefix(CURSOR)?.parse().ok().filter(|n| *n > 0)
}

/// Takes the oldest turns out of `turns` until the rest fit `bounds`, and
/// returns them, oldest first, each with its JSON text (what the store
/// keeps). The newest turn always stays: a failed turn is resumed from
/// the state, and one turn over the bytes is still the chat's last.
pub(super) fn split_oldest(turns: &mut Vec<Turn>, bounds: WindowBounds) -> Vec<(Turn, String)> {
    let mut kept = 0;
    let mut bytes = 0;
    for t in turns.iter().rev() {
        let size = json_len(t);
        if kept > 0 && (kept >= bounds.turns || bytes + size > bounds.bytes) {
            break;
        }
        kept += 1;
        bytes += size;
    }
    let gone = turns.len() - kept;
    turns
        .drain(..gone)
        .map(|t| {
            let text = serde_json::to_string(&t).unwrap_or_default();
            (t, text)
        })
        .collect()
}

/// The newest of `texts` (oldest first, one page asked of the store) that
/// fit in `bytes`, at least one: what one `chat/turnsLoaded` carries.
pub(super) fn fit_page(mut texts: Vec<String>, bytes: usize) -> Vec<String> {
    let mut total = 0;
    let mut keep = 0;
    for t in texts.iter().rev() {
        if keep > 0 && total + t.len() > bytes {
            break;
        }
        keep += 1;
        total += t.len();
    }
    texts.drain(..texts.len() - keep);
    texts
}

/// The length of a turn's JSON, without writing it anywhere.
fn json_len(t: &Turn) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, t);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, text: &str) -> Turn {
        serde_json::from_value(serde_json::json!({
            "id": id, "message": {"text": text, "origin": {"kind": "user"}},
            "responseParts": [], "state": "complete"
        }))
        .unwrap()
    }

    fn ids(turns: &[Turn]) -> Vec<&str> {
        turns.iter().map(|t| t.id.as_str()).collect()
    }

    #[test]
    fn the_oldest_leave_past_the_count() {
        let mut turns: Vec<Turn> = (0..5).map(|i| turn(&format!("t{i}"), "hi")).collect();
        let gone = split_oldest(
            &mut turns,
            WindowBounds {
                turns: 3,
                bytes: 1 << 20,
            },
        );
        assert_eq!(ids(&turns), ["t2", "t3", "t4"]);
        let gone_ids: Vec<_> = gone.iter().map(|(t, _)| t.id.as_str()).collect();
        assert_eq!(gone_ids, ["t0", "t1"]);
        let back: Turn = serde_json::from_str(&gone[0].1).unwrap();
        assert_eq!(back, turn("t0", "hi"), "the text is the turn");
        assert!(split_oldest(
            &mut turns,
            WindowBounds {
                turns: 3,
                bytes: 1 << 20
            }
        )
        .is_empty());
    }

    #[test]
    fn the_oldest_leave_past_the_bytes_but_the_newest_stays() {
        let big = "x".repeat(1000);
        let mut turns = vec![turn("a", &big), turn("b", &big), turn("c", &big)];
        split_oldest(
            &mut turns,
            WindowBounds {
                turns: 10,
                bytes: 2500,
            },
        );
        assert_eq!(ids(&turns), ["b", "c"]);
        split_oldest(
            &mut turns,
            WindowBounds {
                turns: 10,
                bytes: 10,
            },
        );
        assert_eq!(ids(&turns), ["c"], "one turn over the bytes is still kept");
    }

    #[test]
    fn cursors_round_trip_and_strangers_are_not_ours() {
        assert_eq!(cursor(0), None);
        assert_eq!(parse_cursor(&cursor(42).unwrap()), Some(42));
        for bad in [
            "",
            "42",
            "turns-before:",
            "turns-before:0",
            "turns-before:-1",
            "x:1",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_page_keeps_the_newest_that_fit() {
        let texts = vec!["aaaa".to_string(), "bbbb".into(), "cccc".into()];
        assert_eq!(fit_page(texts.clone(), 8), ["bbbb", "cccc"]);
        assert_eq!(fit_page(texts.clone(), 1), ["cccc"], "at least one");
        assert_eq!(fit_page(texts, 100).len(), 3);
    }
}
