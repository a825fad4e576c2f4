//! deploy/postgres/roles.sql against the real PostgreSQL (127.0.0.1:5432, or
//! CREDENCE_TEST_PG_URL): in a database and under role names of the test's own, the app
//! role is no superuser yet runs the migrations, and the Grafana role reads every table
//! and view and can do nothing else.

use super::*;
use std::process::Output;

fn admin_url() -> String {
    std::env::var("CREDENCE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// `postgres://user:password@HOST:PORT/database` on the admin URL's server.
fn url_for(user: &str, password: &str, database: &str) -> String {
    let admin = admin_url();
    let rest = admin.split_once("://").map_or(admin.as_str(), |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host = rest.split('/').next().unwrap_or(rest);
    format!("postgres://{user}:{password}@{host}/{database}")
}

fn psql(url: &str, statements: &[&str]) -> Output {
    let mut cmd = Command::new("psql");
    cmd.arg(url).args(["-X", "-v", "ON_ERROR_STOP=1", "-Atq"]);
    for s in statements {
        cmd.args(["-c", s]);
    }
    cmd.output().expect("psql is installed with PostgreSQL")
}

/// Runs statements that must succeed; their trimmed output.
fn ok(url: &str, statements: &[&str]) -> String {
    let out = psql(url, statements);
    assert!(
        out.status.success(),
        "{statements:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs statements whose last must fail; its error.
fn refused(url: &str, statements: &[&str]) -> String {
    let out = psql(url, statements);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "{statements:?} must be refused, gave {}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// The test's database and roles, dropped when it ends.
struct Names {
    database: String,
    app: String,
    grafana: String,
}

impl Names {
    fn new() -> Names {
        let id = &uuid::Uuid::new_v4().simple().to_string()[..12];
        Names {
            database: format!("credence_t_{id}"),
            app: format!("credence_t_{id}_app"),
            grafana: format!("credence_t_{id}_ro"),
        }
    }

    fn run_roles_sql(&self, env: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new("psql");
        cmd.arg(admin_url())
            .arg("-X")
            .args(["-v", &format!("database={}", self.database)])
            .args(["-v", &format!("app_role={}", self.app)])
            .args(["-v", &format!("grafana_role={}", self.grafana)])
            .arg("-f")
            .arg(deploy("postgres/roles.sql"))
            .env_remove("CREDENCE_APP_DB_PASSWORD")
            .env_remove("CREDENCE_GRAFANA_DB_PASSWORD");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("psql")
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        let _ = psql(
            &admin_url(),
            &[
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.database),
                &format!("DROP ROLE IF EXISTS {}", self.app),
                &format!("DROP ROLE IF EXISTS {}", self.grafana),
            ],
        );
    }
}

fn postgres_reachable() -> bool {
    let admin = admin_url();
    let out = Command::new("psql")
        .arg(&admin)
        .args(["-X", "-Atqc", "SELECT 1"])
        .output();
    if out.is_ok_and(|o| o.status.success()) {
        return true;
    }
    skip::<()>(&format!(
        "the roles test needs PostgreSQL at {admin} (run scripts/setup --services)"
    ));
    false
}

const APP_PASSWORD: &str = "app0a1b2c3d4e5f60718";
const GRAFANA_PASSWORD: &str = "ro8f9e8d7c6b5a49382";

#[test]
fn the_app_role_is_no_superuser_and_the_grafana_role_only_reads() {
    if !postgres_reachable() {
        return;
    }
    let n = Names::new();
    let passwords = [
        ("CREDENCE_APP_DB_PASSWORD", APP_PASSWORD),
        ("CREDENCE_GRAFANA_DB_PASSWORD", GRAFANA_PASSWORD),
    ];
    // Without its passwords the script stops before it creates anything.
    let out = n.run_roles_sql(&passwords[1..]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CREDENCE_APP_DB_PASSWORD is not set"));
    // Twice: a second run (setup-services runs it every time) changes nothing.
    for _ in 0..2 {
        let out = n.run_roles_sql(&passwords);
        assert!(
            out.status.success(),
            "roles.sql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let admin = admin_url();
    for role in [&n.app, &n.grafana] {
        let attrs = ok(
            &admin,
            &[&format!(
                "SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, \
                 rolcanlogin, (SELECT count(*) FROM pg_auth_members WHERE member = r.oid) \
                 FROM pg_roles r WHERE rolname = '{role}'"
            )],
        );
        assert_eq!(
            attrs, "f|f|f|f|f|t|0",
            "{role}: super, createrole, createdb, replication, bypassrls, login, memberships"
        );
    }
    let owner = ok(
        &admin,
        &[&format!(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '{}'",
            n.database
        )],
    );
    assert_eq!(owner, n.app);

    // The app, no superuser, migrates the store and writes the generated views.
    let app = url_for(&n.app, APP_PASSWORD, &n.database);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = credence_infra::store::postgres::PgStore::connect(&app, 2)
            .await
            .expect("the app role migrates its database");
        store.pool().close().await;
    });
    let superuser_only = refused(&app, &["COPY (SELECT 1) TO PROGRAM 'true'"]);
    assert!(
        superuser_only.contains("pg_execute_server_program"),
        "{superuser_only}"
    );

    // Grafana reads every table and view the app made, after this script ran.
    let grafana = url_for(&n.grafana, GRAFANA_PASSWORD, &n.database);
    let relations = ok(
        &admin,
        &[&format!(
            "\\c {}",
            n.database
        ), "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"],
    );
    let relations: Vec<&str> = relations.lines().collect();
    assert!(
        relations.contains(&"results") && relations.contains(&"runs"),
        "{relations:?}"
    );
    for r in &relations {
        ok(&grafana, &[&format!("SELECT count(*) FROM \"{r}\"")]);
    }
    // And nothing else, even in a transaction it makes read-write itself.
    let read_write = "SET default_transaction_read_only = off";
    for (statement, why) in [
        (
            "CREATE TABLE planted (a int)",
            "permission denied for schema public",
        ),
        (
            "CREATE TEMP TABLE planted (a int)",
            "permission denied to create temporary tables",
        ),
        ("DELETE FROM runs", "permission denied for table runs"),
        (
            "COPY (SELECT 1) TO PROGRAM 'id'",
            "pg_execute_server_program",
        ),
        ("CREATE ROLE planted", "permission denied to create role"),
    ] {
        let e = refused(&grafana, &[read_write, statement]);
        assert!(e.contains(why), "{statement}: {e}");
    }
    // Its sessions start read-only.
    let e = refused(&grafana, &["CREATE TABLE planted (a int)"]);
    assert!(e.contains("read-only transaction"), "{e}");
}
