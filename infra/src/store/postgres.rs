//! The distributed engine's store: PostgreSQL, the source of truth of a distributed run.
//! Migrations from `migrations/postgres` run at start under sqlx's migrator, which holds
//! a PostgreSQL advisory lock while it applies them, so workers starting together migrate
//! once. Its statements are the one [`SqlStore`]'s; a job's results and its `done` state
//! commit in one transaction, which also counts down its configuration's `jobs_left`
//! under the row's lock, so exactly one commit sees the configuration finished.
//! The queries the coordinator needs beyond the [`Store`](super::Store) trait (status,
//! resume, cancel, the reaper) live in [`ops`].

pub mod ops;

use super::sql_store::SqlStore;
use super::StoreError;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Postgres;
use std::str::FromStr;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// The PostgreSQL store.
pub type PgStore = SqlStore<Postgres>;

/// Where a database URL points, as `host:port/database`, without user or password; or a
/// placeholder when the URL cannot be parsed.
pub fn describe_url(url: &str) -> String {
    match PgConnectOptions::from_str(url) {
        Ok(o) => format!(
            "{}:{}/{}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or("")
        ),
        Err(_) => "an invalid database URL".into(),
    }
}

impl SqlStore<Postgres> {
    /// Connects (one attempt, up to `connect_timeout`) and applies the migrations.
    /// Errors name `host:port/database`, never the password.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(|_| StoreError::BadUrl)?;
        let location = describe_url(url);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.application_name("credence"))
            .await
            .map_err(|source| StoreError::Connect {
                location: location.clone(),
                source,
            })?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                location: location.clone(),
                source,
            })?;
        let store = SqlStore { pool, location };
        store.update_views().await?;
        Ok(store)
    }
}
