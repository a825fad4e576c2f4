//! What the adapter tests share: the local servers (PostgreSQL 127.0.0.1:5432,
//! RabbitMQ 127.0.0.1:5672, overridable with CREDENCE_TEST_PG_URL and
//! CREDENCE_TEST_BROKER_URL), a throwaway database per test, a unique queue namespace
//! per test. Under CI=true a missing server fails the test; otherwise it is skipped with
//! a printed reason.

#![allow(dead_code)]

pub mod fixtures;
#[path = "../../../core/tests/support/skip.rs"]
pub mod skip;

use std::process::Command;

/// Admin URL of the local PostgreSQL (a database that exists).
pub fn pg_admin_url() -> String {
    std::env::var("CREDENCE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// URL of the local RabbitMQ.
pub fn broker_url() -> String {
    std::env::var("CREDENCE_TEST_BROKER_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

fn reachable(addr: &str) -> bool {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).is_ok()
        })
}

/// Whether the servers answer; under CI=true their absence is a failure.
pub fn servers_available(test: &str) -> bool {
    let pg = reachable("127.0.0.1:5432");
    let mq = reachable("127.0.0.1:5672");
    if pg && mq {
        return true;
    }
    let missing = format!(
        "{test}: needs PostgreSQL on 127.0.0.1:5432 ({}) and RabbitMQ on 127.0.0.1:5672 ({}); run scripts/setup --services",
        if pg { "up" } else { "down" },
        if mq { "up" } else { "down" }
    );
    skip::skip::<()>(&missing);
    false
}

/// A database of its own, dropped when the test ends.
pub struct TestDb {
    pub name: String,
    pub url: String,
}

fn psql_admin(sql: &str) {
    let out = Command::new("psql")
        .arg(pg_admin_url())
        .args(["-v", "ON_ERROR_STOP=1", "-Atqc", sql])
        .output()
        .expect("psql is installed with PostgreSQL");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestDb {
    pub fn create() -> TestDb {
        let name = format!("credence_t_{}", uuid::Uuid::new_v4().simple());
        psql_admin(&format!("CREATE DATABASE {name}"));
        let admin = pg_admin_url();
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
        TestDb {
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .arg(pg_admin_url())
            .args([
                "-Atqc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// A queue namespace no other test uses.
pub fn namespace() -> String {
    format!(
        "credence-t-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}
