//! The error of every store and cache operation, with the one rule for which of them are
//! worth retrying ([`StoreError::is_transient`]).

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or opened; names where, never the password.
    #[error("cannot open the store at {location}: {source}")]
    Connect {
        /// Host or file, without credentials.
        location: String,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// The database URL cannot be parsed. The URL itself is not shown: it may hold a
    /// password.
    #[error("invalid database URL (not shown, it may hold a password): expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")]
    BadUrl,
    /// Applying the migrations failed.
    #[error("migrating the store at {location}: {source}")]
    Migrate {
        /// Host or file, without credentials.
        location: String,
        /// The migrator's error.
        source: sqlx::migrate::MigrateError,
    },
    /// A query failed.
    #[error("store query ({what}): {source}")]
    Query {
        /// What the query was for.
        what: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// A run that must be in the store is not (no recorded sweep under its id).
    #[error("run {run_id:?} is not in the store")]
    UnknownRun {
        /// The run id asked for.
        run_id: String,
    },
    /// Data in the store could not be decoded.
    #[error("corrupt store data ({what}): {message}")]
    Corrupt {
        /// What was being read.
        what: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl StoreError {
    /// Wraps a driver error with what the query was for.
    pub fn query(what: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Query { what, source }
    }

    /// Whether the error is the database being unreachable (restarting, network down,
    /// pool exhausted) rather than something wrong with the data: the same operation
    /// may succeed later, so a worker backs off and retries instead of failing the job.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Connect { source, .. } | StoreError::Query { source, .. } => {
                is_transient_sqlx(source)
            }
            StoreError::BadUrl
            | StoreError::Migrate { .. }
            | StoreError::UnknownRun { .. }
            | StoreError::Corrupt { .. } => false,
        }
    }
}

fn is_transient_sqlx(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Class 08: connection exceptions; 57P01-03: admin shutdown, crash
            // shutdown, cannot connect now (the server is starting or stopping);
            // 40001/40P01: serialization failure and deadlock, retried by design.
            code.starts_with("08")
                || matches!(&*code, "57P01" | "57P02" | "57P03" | "40001" | "40P01")
        }),
        _ => false,
    }
}
