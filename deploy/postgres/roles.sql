-- The PostgreSQL roles of a credence deployment, one script for every recipe: compose
-- (deploy/postgres/init-roles.sh, run once by the postgres image on an empty data folder),
-- deploy/native/setup-services and Kubernetes (deploy/k8s/db-roles-job.yaml).
--
--   credence  the app (coordinator, workers, sweep commands): LOGIN, owner of the
--             database and its schema `public`, so its migrations create the tables; no
--             SUPERUSER, CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS, and no
--             membership in any role (pg_execute_server_program and the like).
--   grafana   the dashboards: CONNECT, USAGE on `public`, SELECT on its tables and views
--             (now and, by default privileges, every one the app creates later), reads
--             only (default_transaction_read_only), nothing else; no TEMP, no CREATE.
--
-- The superuser stays the image's (or the system's) admin, used only to run this.
-- Run it as that superuser with psql 15 or later, passwords in the environment (never on
-- a command line or in a file of the checkout):
--   CREDENCE_APP_DB_PASSWORD=CHANGE-ME CREDENCE_GRAFANA_DB_PASSWORD=CHANGE-ME \
--     psql -X -d postgres -f deploy/postgres/roles.sql
-- Idempotent: a second run changes nothing but the passwords. Names can be changed with
-- -v database=NAME -v app_role=NAME -v grafana_role=NAME (the tests use their own).
\set ON_ERROR_STOP on
\set QUIET on
\if :{?database}
\else
  \set database credence
\endif
\if :{?app_role}
\else
  \set app_role credence
\endif
\if :{?grafana_role}
\else
  \set grafana_role grafana
\endif
\getenv app_password CREDENCE_APP_DB_PASSWORD
\getenv grafana_password CREDENCE_GRAFANA_DB_PASSWORD
\if :{?app_password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql: CREDENCE_APP_DB_PASSWORD is not set'; END $$;
\endif
\if :{?grafana_password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql: CREDENCE_GRAFANA_DB_PASSWORD is not set'; END $$;
\endif

SELECT format('CREATE ROLE %I', :'app_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'app_role') \gexec
SELECT format('CREATE ROLE %I', :'grafana_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'grafana_role') \gexec
ALTER ROLE :"app_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
  NOBYPASSRLS INHERIT PASSWORD :'app_password';
ALTER ROLE :"grafana_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
  NOBYPASSRLS NOINHERIT PASSWORD :'grafana_password';
-- No role memberships: pg_execute_server_program alone would allow COPY ... TO PROGRAM.
SELECT format('REVOKE %I FROM %I', g.rolname, m.rolname)
  FROM pg_auth_members a
  JOIN pg_roles g ON g.oid = a.roleid
  JOIN pg_roles m ON m.oid = a.member
 WHERE m.rolname IN (:'app_role', :'grafana_role') \gexec
-- Dashboards read; a runaway panel query stops.
ALTER ROLE :"grafana_role" SET default_transaction_read_only = on;
ALTER ROLE :"grafana_role" SET statement_timeout = '60s';

SELECT format('CREATE DATABASE %I OWNER %I', :'database', :'app_role')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'database') \gexec
ALTER DATABASE :"database" OWNER TO :"app_role";
-- Only the owner and the roles granted here connect; nobody else makes TEMP tables.
REVOKE ALL ON DATABASE :"database" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"database" TO :"grafana_role";

\connect :"database"
-- The app owns the schema its migrations write (PostgreSQL 14 and older let every role
-- create in `public`; 15 gives it to the database owner): only it creates there.
ALTER SCHEMA public OWNER TO :"app_role";
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"grafana_role";
GRANT SELECT ON ALL TABLES IN SCHEMA public TO :"grafana_role";
ALTER DEFAULT PRIVILEGES FOR ROLE :"app_role" IN SCHEMA public
  GRANT SELECT ON TABLES TO :"grafana_role";
\echo roles.sql: :"app_role" (app, database owner) and :"grafana_role" (read only) are set up in :"database"
