//! Who reaches `/metrics`, and whom credence's pods reach: the NetworkPolicies of
//! deploy/k8s select the pods of the real Deployments (by their labels), admit only
//! Prometheus to the metrics port, and let workers reach only DNS, PostgreSQL, RabbitMQ
//! and public HTTPS. Where no policy guards it, `/metrics` binds 127.0.0.1.

use super::*;

/// Whether a Kubernetes label selector selects these labels (an empty one selects all).
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let matched = selector["matchLabels"]
        .as_mapping()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(str_of(k)).map(String::as_str) == Some(str_of(v)));
    let expressions = selector["matchExpressions"]
        .as_sequence()
        .into_iter()
        .flatten()
        .all(|e| {
            let value = labels.get(str_of(&e["key"]));
            let values = strings(&e["values"]);
            match str_of(&e["operator"]) {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => !value.is_some_and(|v| values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => panic!("unknown selector operator {other:?}"),
            }
        });
    matched && expressions
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.as_mapping()
        .into_iter()
        .flatten()
        .map(|(k, v)| (str_of(k).to_string(), str_of(v).to_string()))
        .collect()
}

/// A rule's ports as numbers; an absent list (every port) is `None`.
fn ports(rule: &Value) -> Option<Vec<u64>> {
    rule["ports"]
        .as_sequence()
        .map(|ps| ps.iter().filter_map(|p| count(&p["port"])).collect())
}

#[test]
fn network_policies_admit_only_prometheus_and_keep_workers_to_their_services() {
    let docs = k8s_documents();
    let policies: Vec<(&String, &Value)> = docs
        .iter()
        .filter(|(_, d)| str_of(&d["kind"]) == "NetworkPolicy")
        .map(|(f, d)| (f, d))
        .collect();
    assert!(policies.len() >= 2, "no NetworkPolicy under deploy/k8s");
    let kustomization = read(&deploy("k8s/kustomization.yaml"));
    for (file, _) in &policies {
        assert!(
            kustomization.contains(&format!("- {file}")),
            "kustomization.yaml must apply {file}"
        );
    }
    let of_type = |pod: &BTreeMap<String, String>, kind: &str| -> Vec<&Value> {
        policies
            .iter()
            .map(|(_, p)| &p["spec"])
            .filter(|s| strings(&s["policyTypes"]).iter().any(|t| t == kind))
            .filter(|s| selects(&s["podSelector"], pod))
            .collect()
    };
    let mut workers = 0;
    for (file, doc) in &docs {
        if str_of(&doc["kind"]) != "Deployment" {
            continue;
        }
        let what = format!("{file} {}", str_of(&doc["metadata"]["name"]));
        let pod = labels_of(&doc["spec"]["template"]["metadata"]["labels"]);
        let role = pod.get("role").cloned().unwrap_or_default();
        // /metrics: Prometheus's pods in Prometheus's namespace, on the metrics port.
        let ingress = of_type(&pod, "Ingress");
        assert!(
            !ingress.is_empty(),
            "{what}: no Ingress NetworkPolicy selects its pods"
        );
        for rule in ingress
            .iter()
            .flat_map(|s| s["ingress"].as_sequence().into_iter().flatten())
        {
            assert_eq!(
                ports(rule),
                Some(vec![METRICS_PORT]),
                "{what}: ingress ports"
            );
            let peers = rule["from"]
                .as_sequence()
                .expect("an ingress rule names its peers");
            assert!(!peers.is_empty(), "{what}: an ingress rule open to all");
            for peer in peers {
                let namespaced = peer["namespaceSelector"]
                    .as_mapping()
                    .is_some_and(|m| !m.is_empty());
                let podded = peer["podSelector"]
                    .as_mapping()
                    .is_some_and(|m| !m.is_empty());
                assert!(
                    namespaced && podded && peer["ipBlock"].is_null(),
                    "{what}: each peer is Prometheus's namespace and pods, got {peer:?}"
                );
            }
        }
        // Egress: DNS, PostgreSQL, RabbitMQ; workers also HTTPS off private addresses.
        let egress = of_type(&pod, "Egress");
        assert!(
            !egress.is_empty(),
            "{what}: no Egress NetworkPolicy selects its pods"
        );
        let mut allowed = BTreeSet::new();
        for rule in egress
            .iter()
            .flat_map(|s| s["egress"].as_sequence().into_iter().flatten())
        {
            let ports =
                ports(rule).unwrap_or_else(|| panic!("{what}: an egress rule to every port"));
            assert!(!ports.is_empty(), "{what}: an egress rule to every port");
            if ports.contains(&443) {
                let except: Vec<String> = rule["to"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .flat_map(|peer| strings(&peer["ipBlock"]["except"]))
                    .collect();
                for private in [
                    "169.254.0.0/16",
                    "10.0.0.0/8",
                    "172.16.0.0/12",
                    "192.168.0.0/16",
                ] {
                    assert!(
                        except.iter().any(|e| e == private),
                        "{what}: HTTPS egress must leave out {private}"
                    );
                }
            }
            allowed.extend(ports);
        }
        let wanted: BTreeSet<u64> = if role == "worker" {
            workers += 1;
            [53, 443, 5432, 5672].into()
        } else {
            [53, 5432, 5672].into()
        };
        assert_eq!(allowed, wanted, "{what}: egress ports");
    }
    assert!(
        workers >= 4,
        "expected the CPU and three GPU worker Deployments"
    );
}

/// 0.0.0.0 only where Prometheus scrapes over a network that a policy (k8s) or the compose
/// network guards; the native units, Slurm and the CLI's bare port bind 127.0.0.1.
#[test]
fn metrics_bind_loopback_unless_a_recipe_guards_the_network() {
    let wide: Vec<String> = files_under(&workspace().join("deploy"))
        .into_iter()
        .filter(|p| p.extension().is_none_or(|e| e != "md"))
        .filter(|p| {
            read_lossy(p)
                .lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .any(|l| l.contains("metrics-addr") && l.contains("0.0.0.0"))
        })
        .map(|p| {
            p.strip_prefix(workspace())
                .unwrap_or(&p)
                .display()
                .to_string()
        })
        .collect();
    for f in &wide {
        assert!(
            f.ends_with("compose.yaml") || f.contains("/k8s/"),
            "{f} binds /metrics on every interface"
        );
    }
    for unit in ["credence-coordinator.service", "credence-worker@.service"] {
        let text = read(&deploy(&format!("systemd/{unit}")));
        assert!(!text.contains("0.0.0.0"), "{unit}");
    }
    let sbatch = read(&deploy("slurm/credence-workers.sbatch"));
    assert!(sbatch.contains("host=\"${CREDENCE_SLURM_METRICS_HOST:-127.0.0.1}\""));
    assert!(sbatch.contains("args+=(--metrics-addr \"$host:$port\")"));
    assert!(!sbatch.contains("\"0.0.0.0:$port\""));

    // The binary: a bare port is 127.0.0.1, and the variable goes through the same check.
    assert_eq!(
        credence_infra::telemetry::parse_metrics_addr("9464").map(|a| a.to_string()),
        Ok("127.0.0.1:9464".to_string())
    );
    for (args, env) in [
        (&["worker", "--models", "m"][..], Some("nonsense")),
        (&["coordinator", "serve"][..], Some("nonsense")),
        (
            &["worker", "--models", "m", "--metrics-addr", "nonsense"][..],
            None,
        ),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_credence"));
        cmd.args(args)
            .env(
                "CREDENCE_DATABASE_URL",
                "postgres://nobody@127.0.0.1:1/none",
            )
            .env("CREDENCE_BROKER_URL", "amqp://nobody@127.0.0.1:1/%2f")
            .env_remove("CREDENCE_METRICS_ADDR");
        if let Some(v) = env {
            cmd.env("CREDENCE_METRICS_ADDR", v);
        }
        let out = cmd.output().expect("running credence");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(2) && stderr.contains("is not HOST:PORT or PORT"),
            "{args:?} {env:?}: {stderr}"
        );
    }
}

fn read_lossy(p: &Path) -> String {
    std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}
