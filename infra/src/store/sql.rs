//! The one seam between the store's SQL and its two drivers. A [`Stmt`] is a statement's
//! text and its values. Its placeholders are `$1`, `$2`, ...: PostgreSQL binds them by
//! number, and so does SQLite (sqlx-sqlite reads `$N` as the N-th value), so one text
//! serves both engines. An [`Engine`] (the driver's database type) runs a statement on a
//! connection, pooled or a transaction's; [`Dialect`] spells what the two spell
//! differently (the clock, a bound list of keys).

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{FromRow, Postgres, Sqlite};

/// The SQL dialect of a store engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The embedded engine.
    Sqlite,
    /// The distributed engine.
    Postgres,
}

impl Dialect {
    /// The current time as the engine stores it (`timestamptz` in PostgreSQL, ISO 8601
    /// text with milliseconds in SQLite).
    pub fn now(self) -> &'static str {
        match self {
            Dialect::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            Dialect::Postgres => "now()",
        }
    }

    /// The condition that `column` is one of the strings of a JSON array bound at
    /// `placeholder`. PostgreSQL gets them as an array (`= ANY`), which the planner
    /// looks up in an index on `column`; as `IN (subquery)` it joins the subquery to
    /// every row the other conditions leave (a cache lookup read the encoder's whole
    /// cache).
    pub fn in_json_strings(self, column: &str, placeholder: &str) -> String {
        match self {
            Dialect::Sqlite => format!("{column} IN (SELECT value FROM json_each({placeholder}))"),
            Dialect::Postgres => format!(
                "{column} = ANY(ARRAY(SELECT json_array_elements_text({placeholder}::json)))"
            ),
        }
    }
}

/// A value bound to a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// Text.
    Text(String),
    /// Text or NULL.
    OptText(Option<String>),
    /// A 64-bit integer.
    Int(i64),
    /// An integer or NULL.
    OptInt(Option<i64>),
    /// A double.
    Real(f64),
    /// A double or NULL.
    OptReal(Option<f64>),
    /// Bytes.
    Bytes(Vec<u8>),
}

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_string())
    }
}

impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}

impl From<&String> for SqlValue {
    fn from(v: &String) -> Self {
        SqlValue::Text(v.clone())
    }
}

impl From<Option<&str>> for SqlValue {
    fn from(v: Option<&str>) -> Self {
        SqlValue::OptText(v.map(str::to_string))
    }
}

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Int(v)
    }
}

impl From<Option<i64>> for SqlValue {
    fn from(v: Option<i64>) -> Self {
        SqlValue::OptInt(v)
    }
}

impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}

impl From<Option<f64>> for SqlValue {
    fn from(v: Option<f64>) -> Self {
        SqlValue::OptReal(v)
    }
}

impl From<Vec<u8>> for SqlValue {
    fn from(v: Vec<u8>) -> Self {
        SqlValue::Bytes(v)
    }
}

/// A statement and its values, in placeholder order.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    sql: String,
    values: Vec<SqlValue>,
}

impl Stmt {
    /// A statement with no values yet.
    pub fn new(sql: impl Into<String>) -> Stmt {
        Stmt {
            sql: sql.into(),
            values: Vec::new(),
        }
    }

    /// Binds the next placeholder.
    pub fn bind(mut self, value: impl Into<SqlValue>) -> Stmt {
        self.values.push(value.into());
        self
    }

    /// Binds the next placeholders, in order.
    pub fn bind_all(mut self, values: impl IntoIterator<Item = SqlValue>) -> Stmt {
        self.values.extend(values);
        self
    }

    /// The text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The values bound so far.
    pub fn values(&self) -> &[SqlValue] {
        &self.values
    }
}

/// `$from, $from+1, ...`: `n` placeholders in a row.
pub fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($1, ..., $k), ($k+1, ..., $2k), ...`: the VALUES list of `rows` rows of `width`.
pub fn value_rows(rows: usize, width: usize) -> String {
    (0..rows)
        .map(|r| format!("({})", placeholders(1 + r * width, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a row decodes into, on both engines: a tuple of plain types or a
/// `#[derive(FromRow)]` struct.
pub trait Record:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> Record for T where
    T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

/// A driver the store runs on: its dialect, and running a [`Stmt`] on one of its
/// connections.
#[async_trait]
pub trait Engine: sqlx::Database {
    /// How it spells what differs.
    const DIALECT: Dialect;

    /// Runs a statement; returns the rows it changed.
    async fn execute(conn: &mut Self::Connection, stmt: &Stmt) -> Result<u64, sqlx::Error>;

    /// Every row of a query.
    async fn fetch_all<T: Record>(
        conn: &mut Self::Connection,
        stmt: &Stmt,
    ) -> Result<Vec<T>, sqlx::Error>;

    /// The first row of a query, if any.
    async fn fetch_optional<T: Record>(
        conn: &mut Self::Connection,
        stmt: &Stmt,
    ) -> Result<Option<T>, sqlx::Error>;
}

/// Binds a statement's values to a sqlx query of either driver (both encode these
/// borrowed types).
macro_rules! bind_values {
    ($query:expr, $values:expr) => {{
        let mut query = $query;
        for value in $values {
            query = match value {
                SqlValue::Text(v) => query.bind(v.as_str()),
                SqlValue::OptText(v) => query.bind(v.as_deref()),
                SqlValue::Int(v) => query.bind(*v),
                SqlValue::OptInt(v) => query.bind(*v),
                SqlValue::Real(v) => query.bind(*v),
                SqlValue::OptReal(v) => query.bind(*v),
                SqlValue::Bytes(v) => query.bind(v.as_slice()),
            };
        }
        query
    }};
}

macro_rules! engine {
    ($db:ty, $dialect:expr) => {
        #[async_trait]
        impl Engine for $db {
            const DIALECT: Dialect = $dialect;

            async fn execute(conn: &mut Self::Connection, stmt: &Stmt) -> Result<u64, sqlx::Error> {
                let done = bind_values!(sqlx::query(&stmt.sql), &stmt.values)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn fetch_all<T: Record>(
                conn: &mut Self::Connection,
                stmt: &Stmt,
            ) -> Result<Vec<T>, sqlx::Error> {
                bind_values!(sqlx::query_as::<_, T>(&stmt.sql), &stmt.values)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn fetch_optional<T: Record>(
                conn: &mut Self::Connection,
                stmt: &Stmt,
            ) -> Result<Option<T>, sqlx::Error> {
                bind_values!(sqlx::query_as::<_, T>(&stmt.sql), &stmt.values)
                    .fetch_optional(&mut *conn)
                    .await
            }
        }
    };
}

engine!(Sqlite, Dialect::Sqlite);
engine!(Postgres, Dialect::Postgres);
