//! What survives a restart, in SQLite (rusqlite with its bundled library: one
//! file, transactions, no server to run): each AHP session's state and its
//! chats as of the last turn or metadata boundary, the backend's reference for
//! it (the runtime session id), the turns older than what its chat keeps in
//! memory (appended one at a time as they leave it, read back a page at a
//! time), and the ceiling of `serverSeq`, so that a new instance never issues
//! a number an earlier one did.
//!
//! Writes are synchronous and few (a turn's end, a title, a working
//! directory; never a streamed delta). WAL with `synchronous = NORMAL`: a
//! committed write survives the process being killed (SIGKILL), which is the
//! promise here: no completed turn is lost.
//!
//! The store knows nothing of AHP: states are JSON documents it keeps whole.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{params, Connection, OptionalExtension};

/// Why the store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the state directory {}: {reason}", dir.display())]
    CreateDir { dir: PathBuf, reason: String },
    #[error("cannot open the state store {}: {reason}", path.display())]
    Open { path: PathBuf, reason: String },
    #[error("cannot use the state store {}: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
    #[error("it has schema version {found}, newer than this build's {SCHEMA_VERSION}; refusing to touch it")]
    NewerSchema { found: i64 },
    #[error("stored {what}: {reason}")]
    Corrupt { what: String, reason: String },
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// The schema this code writes; an older file is migrated, a newer refused.
/// 2: the `turns` table.
const SCHEMA_VERSION: i64 = 2;

/// How many sequence numbers an instance reserves at a time: the ceiling is
/// written once per this many actions, not per action.
pub const SEQ_BLOCK: u64 = 10_000;

pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

/// One stored session with its chats.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    pub uri: String,
    /// The principal that created it.
    pub owner: String,
    pub created_at: String,
    pub modified_at: String,
    /// The session's state document, as JSON text: written as it is
    /// serialized, with no tree built in between (it is stored at every
    /// turn's end).
    pub state: String,
    /// What the backend needs to find it again (the runtime session id).
    pub backend_ref: Option<String>,
    pub chats: Vec<StoredChat>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoredChat {
    pub uri: String,
    /// The chat's state document, as JSON text.
    pub state: String,
}

/// One turn a session's chat no longer keeps in memory: its place in the
/// chat (0 the first turn ever), its id, its document as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTurn {
    pub ordinal: u64,
    pub id: String,
    pub text: String,
}

/// What a save changes in a session's stored turns: those from `drop_from`
/// on go first (a truncated chat), then `append` is added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnChanges {
    pub drop_from: Option<u64>,
    pub append: Vec<StoredTurn>,
}

impl TurnChanges {
    pub fn is_empty(&self) -> bool {
        self.drop_from.is_none() && self.append.is_empty()
    }
}

impl Store {
    /// Opens (or creates) the store at `path`, creating its directory.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::CreateDir {
                dir: dir.to_owned(),
                reason: e.to_string(),
            })?;
        }
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::prepare(&conn).map_err(|e| StoreError::Unusable {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        })
    }

    /// Journal mode, and the schema created or checked.
    fn prepare(conn: &Connection) -> Result<(), StoreError> {
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA foreign_keys = ON;
             PRAGMA busy_timeout = 5000;",
        )?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema { found: version });
        }
        if version < 1 {
            conn.execute_batch(
                "BEGIN;
                 CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS sessions (
                     uri TEXT PRIMARY KEY,
                     owner TEXT NOT NULL,
                     created_at TEXT NOT NULL,
                     modified_at TEXT NOT NULL,
                     state TEXT NOT NULL,
                     backend_ref TEXT
                 );
                 CREATE TABLE IF NOT EXISTS chats (
                     uri TEXT PRIMARY KEY,
                     session TEXT NOT NULL REFERENCES sessions(uri) ON DELETE CASCADE,
                     state TEXT NOT NULL
                 );
                 PRAGMA user_version = 1;
                 COMMIT;",
            )?;
        }
        if version < 2 {
            // No reference to `sessions`: a host without a store keeps its
            // older turns in a temporary store that has no sessions.
            conn.execute_batch(
                "BEGIN;
                 CREATE TABLE IF NOT EXISTS turns (
                     session TEXT NOT NULL,
                     ordinal INTEGER NOT NULL,
                     id TEXT NOT NULL,
                     turn TEXT NOT NULL,
                     PRIMARY KEY (session, ordinal)
                 );
                 CREATE INDEX IF NOT EXISTS turns_by_id ON turns (session, id);
                 PRAGMA user_version = 2;
                 COMMIT;",
            )?;
        }
        Ok(())
    }

    /// A private store in a temporary file SQLite deletes when it closes:
    /// where a host without a state store keeps its older turns, so that
    /// they cost disk, not memory.
    pub fn temporary() -> Result<Self, StoreError> {
        let path = PathBuf::new();
        let conn = Connection::open(&path).map_err(|e| StoreError::Open {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Self::prepare(&conn).map_err(|e| StoreError::Unusable {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            conn: Mutex::new(conn),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every stored session, oldest first.
    pub fn sessions(&self) -> Result<Vec<StoredSession>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT uri, owner, created_at, modified_at, state, backend_ref
             FROM sessions ORDER BY created_at, uri",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut chats =
            conn.prepare("SELECT uri, state FROM chats WHERE session = ?1 ORDER BY uri")?;
        let mut out = Vec::new();
        for row in rows {
            let (uri, owner, created_at, modified_at, state, backend_ref) = row?;
            is_json(&state, &uri)?;
            let mut session_chats = Vec::new();
            for c in chats.query_map([&uri], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })? {
                let (chat, text) = c?;
                is_json(&text, &chat)?;
                session_chats.push(StoredChat {
                    uri: chat,
                    state: text,
                });
            }
            out.push(StoredSession {
                uri,
                owner,
                created_at,
                modified_at,
                state,
                backend_ref,
                chats: session_chats,
            });
        }
        Ok(out)
    }

    /// Writes a session and its chats, replacing what was stored, and
    /// `turns`, in one transaction: a turn that leaves the chat's document
    /// is never in neither. The backend reference is kept unless `s`
    /// carries one.
    pub fn save_session(&self, s: &StoredSession, turns: &TurnChanges) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        change_turns(&tx, &s.uri, turns)?;
        tx.execute(
            "INSERT INTO sessions (uri, owner, created_at, modified_at, state, backend_ref)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(uri) DO UPDATE SET owner = ?2, modified_at = ?4, state = ?5,
                 backend_ref = COALESCE(?6, backend_ref)",
            params![
                s.uri,
                s.owner,
                s.created_at,
                s.modified_at,
                s.state,
                s.backend_ref
            ],
        )?;
        // The chats written now are the session's chats: one renamed since
        // (an earlier version's URI) goes.
        tx.execute("DELETE FROM chats WHERE session = ?1", params![s.uri])?;
        for c in &s.chats {
            tx.execute(
                "INSERT INTO chats (uri, session, state) VALUES (?1, ?2, ?3)
                 ON CONFLICT(uri) DO UPDATE SET session = ?2, state = ?3",
                params![c.uri, s.uri, c.state],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Forgets a session, its chats and its turns.
    pub fn delete_session(&self, uri: &str) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute("DELETE FROM turns WHERE session = ?1", params![uri])?;
        tx.execute("DELETE FROM sessions WHERE uri = ?1", params![uri])?;
        tx.commit()?;
        Ok(())
    }

    /// Changes a session's stored turns alone (a store that keeps no
    /// sessions, see [`Store::temporary`]).
    pub fn change_turns(&self, session: &str, turns: &TurnChanges) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        change_turns(&tx, session, turns)?;
        tx.commit()?;
        Ok(())
    }

    /// How many turns of `session` are stored: the next ordinal.
    pub fn turn_count(&self, session: &str) -> Result<u64, StoreError> {
        let n: i64 = self.conn().query_row(
            "SELECT COALESCE(MAX(ordinal) + 1, 0) FROM turns WHERE session = ?1",
            params![session],
            |r| r.get(0),
        )?;
        Ok(n as u64)
    }

    /// The stored turns of `session` with ordinals in `from..to`, oldest
    /// first, as JSON text.
    pub fn turns(&self, session: &str, from: u64, to: u64) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT turn FROM turns WHERE session = ?1 AND ordinal >= ?2 AND ordinal < ?3
             ORDER BY ordinal",
        )?;
        let rows = stmt.query_map(params![session, from as i64, to as i64], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The ordinal of the newest stored turn of `session` with id `id`.
    pub fn turn_ordinal(&self, session: &str, id: &str) -> Result<Option<u64>, StoreError> {
        let n: Option<i64> = self.conn().query_row(
            "SELECT MAX(ordinal) FROM turns WHERE session = ?1 AND id = ?2",
            params![session, id],
            |r| r.get(0),
        )?;
        Ok(n.map(|n| n as u64))
    }

    /// The highest `serverSeq` any instance may have issued (0: none yet).
    pub fn seq_ceiling(&self) -> Result<u64, StoreError> {
        let v: Option<String> = self
            .conn()
            .query_row(
                "SELECT value FROM meta WHERE key = 'seq_ceiling'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        match v {
            None => Ok(0),
            Some(s) => s
                .parse()
                .map_err(|e: std::num::ParseIntError| StoreError::Corrupt {
                    what: format!("seq_ceiling {s:?} is not a number"),
                    reason: e.to_string(),
                }),
        }
    }

    /// Reserves sequence numbers up to `ceiling` before any is issued.
    pub fn raise_seq_ceiling(&self, ceiling: u64) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO meta (key, value) VALUES ('seq_ceiling', ?1)
             ON CONFLICT(key) DO UPDATE SET value = ?1",
            params![ceiling.to_string()],
        )?;
        Ok(())
    }
}

fn change_turns(
    tx: &rusqlite::Transaction<'_>,
    session: &str,
    turns: &TurnChanges,
) -> Result<(), StoreError> {
    if let Some(from) = turns.drop_from {
        tx.execute(
            "DELETE FROM turns WHERE session = ?1 AND ordinal >= ?2",
            params![session, from as i64],
        )?;
    }
    let mut insert = tx.prepare_cached(
        "INSERT OR REPLACE INTO turns (session, ordinal, id, turn) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for t in &turns.append {
        insert.execute(params![session, t.ordinal as i64, t.id, t.text])?;
    }
    Ok(())
}

/// A stored document is refused at load when it is not JSON at all; its
/// shape is its reader's to judge.
fn is_json(text: &str, uri: &str) -> Result<(), StoreError> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map(drop)
        .map_err(|e| StoreError::Corrupt {
            what: format!("state of {uri:?} is not JSON"),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn session(uri: &str, title: &str) -> StoredSession {
        StoredSession {
            uri: uri.into(),
            owner: "alice".into(),
            created_at: "2026-11-23T10:00:00Z".into(),
            modified_at: "2026-11-23T10:00:01Z".into(),
            state: json!({"title": title}).to_string(),
            backend_ref: None,
            chats: vec![StoredChat {
                uri: format!("{uri}-chat"),
                state: json!({"turns": [title]}).to_string(),
            }],
        }
    }

    #[test]
    fn sessions_survive_a_reopen_and_dispose_forgets_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.sqlite3");
        {
            let store = Store::open(&path).unwrap();
            let mut first = session("ahp-session:/a", "one");
            first.backend_ref = Some("rt-a".into());
            store.save_session(&first, &TurnChanges::default()).unwrap();
            // A later save without a reference keeps the one stored.
            store
                .save_session(&session("ahp-session:/a", "two"), &TurnChanges::default())
                .unwrap();
            store
                .save_session(&session("ahp-session:/b", "three"), &TurnChanges::default())
                .unwrap();
            store.delete_session("ahp-session:/b").unwrap();
        }
        let store = Store::open(&path).unwrap();
        let all = store.sessions().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].state, json!({"title": "two"}).to_string());
        assert_eq!(all[0].backend_ref.as_deref(), Some("rt-a"));
        assert_eq!(all[0].chats[0].state, json!({"turns": ["two"]}).to_string());
        let orphan: i64 = store
            .conn()
            .query_row("SELECT COUNT(*) FROM chats", [], |r| r.get(0))
            .unwrap();
        assert_eq!(orphan, 1, "a disposed session's chats go with it");
    }

    fn turn(ordinal: u64, id: &str) -> StoredTurn {
        StoredTurn {
            ordinal,
            id: id.into(),
            text: format!("{{\"id\":\"{id}\"}}"),
        }
    }

    #[test]
    fn turns_are_appended_paged_truncated_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite3");
        let a = "ahp-session:/a";
        {
            let store = Store::open(&path).unwrap();
            let append = (0..5).map(|i| turn(i, &format!("t{i}"))).collect();
            let changes = TurnChanges {
                drop_from: None,
                append,
            };
            store.save_session(&session(a, "one"), &changes).unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.turn_count(a).unwrap(), 5, "turns survive a reopen");
        assert_eq!(
            store.turns(a, 1, 3).unwrap(),
            vec![r#"{"id":"t1"}"#, r#"{"id":"t2"}"#]
        );
        assert_eq!(store.turn_ordinal(a, "t3").unwrap(), Some(3));
        assert_eq!(store.turn_ordinal(a, "nope").unwrap(), None);
        // A truncation drops the later turns before new ones are added.
        let changes = TurnChanges {
            drop_from: Some(2),
            append: vec![turn(2, "u2")],
        };
        store.change_turns(a, &changes).unwrap();
        assert_eq!(store.turn_count(a).unwrap(), 3);
        assert_eq!(store.turn_ordinal(a, "t3").unwrap(), None);
        assert_eq!(store.turns(a, 2, 9).unwrap(), vec![r#"{"id":"u2"}"#]);
        store.delete_session(a).unwrap();
        assert_eq!(
            store.turn_count(a).unwrap(),
            0,
            "a disposed session's turns go"
        );
    }

    #[test]
    fn a_first_version_store_gains_the_turns_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite3");
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE sessions (uri TEXT PRIMARY KEY, owner TEXT NOT NULL,
                     created_at TEXT NOT NULL, modified_at TEXT NOT NULL, state TEXT NOT NULL,
                     backend_ref TEXT);
                 CREATE TABLE chats (uri TEXT PRIMARY KEY,
                     session TEXT NOT NULL REFERENCES sessions(uri) ON DELETE CASCADE,
                     state TEXT NOT NULL);
                 INSERT INTO sessions VALUES ('ahp-session:/old', 'alice', 't', 't', '{}', NULL);
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        let store = Store::open(&path).unwrap();
        assert_eq!(store.sessions().unwrap().len(), 1, "its sessions are kept");
        assert_eq!(store.turn_count("ahp-session:/old").unwrap(), 0);
        let v: i64 = store
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
    }

    #[test]
    fn a_temporary_store_keeps_turns_without_sessions() {
        let store = Store::temporary().unwrap();
        let changes = TurnChanges {
            drop_from: None,
            append: vec![turn(0, "t0")],
        };
        store.change_turns("ahp-session:/m", &changes).unwrap();
        assert_eq!(store.turns("ahp-session:/m", 0, 1).unwrap().len(), 1);
    }

    #[test]
    fn the_seq_ceiling_only_moves_when_raised() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite3");
        let store = Store::open(&path).unwrap();
        assert_eq!(store.seq_ceiling().unwrap(), 0);
        store.raise_seq_ceiling(SEQ_BLOCK).unwrap();
        drop(store);
        assert_eq!(
            Store::open(&path).unwrap().seq_ceiling().unwrap(),
            SEQ_BLOCK
        );
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite3");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 99;")
            .unwrap();
        let e = format!("{:#}", Store::open(&path).err().unwrap());
        assert!(e.contains("schema version 99"), "{e}");
    }
}
