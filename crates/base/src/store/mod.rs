//! What survives a restart, in SQLite (rusqlite with its bundled library: one
//! file, transactions, no server to run): each AHP session's state and its
//! chats as of the last turn or metadata boundary, the backend's reference for
//! it (the runtime session id), and the ceiling of `serverSeq`, so that a new
//! instance never issues a number an earlier one did.
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
use serde_json::Value;

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
const SCHEMA_VERSION: i64 = 1;

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
    /// The session's state document.
    pub state: Value,
    /// What the backend needs to find it again (the runtime session id).
    pub backend_ref: Option<String>,
    pub chats: Vec<StoredChat>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoredChat {
    pub uri: String,
    /// The chat's state document.
    pub state: Value,
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
        Ok(())
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
            let state = serde_json::from_str(&state).map_err(|e| StoreError::Corrupt {
                what: format!("state of {uri:?} is not JSON"),
                reason: e.to_string(),
            })?;
            let mut session_chats = Vec::new();
            for c in chats.query_map([&uri], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })? {
                let (chat, text) = c?;
                let state = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                    what: format!("state of {chat:?} is not JSON"),
                    reason: e.to_string(),
                })?;
                session_chats.push(StoredChat { uri: chat, state });
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

    /// Writes a session and its chats, replacing what was stored, in one
    /// transaction. The backend reference is kept unless `s` carries one.
    pub fn save_session(&self, s: &StoredSession) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
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
                s.state.to_string(),
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
                params![c.uri, s.uri, c.state.to_string()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Forgets a session and its chats.
    pub fn delete_session(&self, uri: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM sessions WHERE uri = ?1", params![uri])?;
        Ok(())
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
            state: json!({"title": title}),
            backend_ref: None,
            chats: vec![StoredChat {
                uri: format!("{uri}-chat"),
                state: json!({"turns": [title]}),
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
            store.save_session(&first).unwrap();
            // A later save without a reference keeps the one stored.
            store
                .save_session(&session("ahp-session:/a", "two"))
                .unwrap();
            store
                .save_session(&session("ahp-session:/b", "three"))
                .unwrap();
            store.delete_session("ahp-session:/b").unwrap();
        }
        let store = Store::open(&path).unwrap();
        let all = store.sessions().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].state, json!({"title": "two"}));
        assert_eq!(all[0].backend_ref.as_deref(), Some("rt-a"));
        assert_eq!(all[0].chats[0].state, json!({"turns": ["two"]}));
        let orphan: i64 = store
            .conn()
            .query_row("SELECT COUNT(*) FROM chats", [], |r| r.get(0))
            .unwrap();
        assert_eq!(orphan, 1, "a disposed session's chats go with it");
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
