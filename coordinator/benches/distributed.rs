//! Throughput of the distributed engine's adapters against the real servers (not a
//! test; not run in CI):
//!
//! - queue: 10,000 job messages published with confirms, then consumed, decoded and
//!   acked with a no-op handler (jobs/s), for prefetch 1 and a larger prefetch;
//! - store: 100,000 example results written by `record_results` in jobs of 100 examples,
//!   sequentially and from 4 tasks (rows/s; one row = a prediction and its metrics).
//!
//! ```sh
//! cargo bench -p credence --bench distributed                 # release build
//! cargo bench --profile dev -p credence --bench distributed   # reuses the dev build
//! ```
//! (The dev profile optimises dependencies fully and our crates at level 1; the figures
//! in the lead's report were measured with it.)
//! Servers: CREDENCE_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test) and
//! CREDENCE_TEST_BROKER_URL (default amqp://guest:guest@127.0.0.1:5672/%2f).

use credence_core::dataset::LoadedDataset;
use credence_core::domain::{Example, ExampleMetrics, ExampleResult, Mode};
use credence_core::job::{plan, Job, Message, PlannedDataset, PlannedModel};
use credence_infra::queue::rabbitmq::{RabbitQueue, RabbitSettings};
use credence_infra::queue::{job_queue, Queue};
use credence_infra::store::postgres::PgStore;
use credence_infra::store::{PlannedDatasetRecord, RunRecord, Store};
use credence_worker::job_loop::decode_work;
use std::sync::Arc;
use std::time::{Duration, Instant};

const JOBS: usize = 10_000;
const ROWS: usize = 100_000;
const SHARD: usize = 100;

fn jobs(n_examples: u32, shard: u32) -> Vec<Job> {
    let models = [PlannedModel {
        name: "bench".into(),
        fingerprint: "f".into(),
    }];
    let ds = [PlannedDataset {
        id: "d".into(),
        hash: "bench-dataset".into(),
        len: n_examples,
    }];
    plan("bench", &models, &ds, &[Mode::Base], shard, "c")
}

async fn queue_bench(url: &str, prefetch: u16, consumers: usize) -> anyhow::Result<()> {
    let mut settings = RabbitSettings::new(url);
    settings.namespace = format!(
        "credence-bench-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    settings.prefetch = prefetch;
    settings.reconnect_for = Some(Duration::from_secs(10));
    let queue = RabbitQueue::connect(settings).await?;
    let name = job_queue("bench");
    let bodies: Vec<Vec<u8>> = jobs(JOBS as u32, 1)
        .into_iter()
        .map(|j| serde_json::to_vec(&Message::job(j)))
        .collect::<Result<_, _>>()?;
    let start = Instant::now();
    queue.publish_batch(&name, bodies).await?;
    let published = start.elapsed();
    let consume_start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(JOBS));
    for _ in 0..consumers {
        let (queue, name, remaining) = (queue.clone(), name.clone(), remaining.clone());
        tasks.spawn(async move {
            let mut consumer = queue.consume(&name).await?;
            while remaining.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                let next = tokio::time::timeout(Duration::from_millis(500), consumer.next()).await;
                let Ok(delivery) = next else { continue };
                let Some(d) = delivery? else { break };
                decode_work(d.body()).map_err(anyhow::Error::msg)?;
                d.ack().await?;
                remaining.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let consumed = consume_start.elapsed();
    let total = start.elapsed();
    println!(
        "queue  prefetch {prefetch:>3} consumers {consumers}: publish {:>7.0} jobs/s, consume+ack {:>7.0} jobs/s, publish->consume->ack {:>7.0} jobs/s ({JOBS} jobs in {:.2} s)",
        JOBS as f64 / published.as_secs_f64(),
        JOBS as f64 / consumed.as_secs_f64(),
        JOBS as f64 / total.as_secs_f64(),
        total.as_secs_f64()
    );
    queue.delete_queues(&[name]).await?;
    Ok(())
}

fn results(examples: &[Example]) -> Vec<ExampleResult> {
    examples
        .iter()
        .map(|e| ExampleResult {
            example_id: e.id.clone(),
            base_claims: vec![e.text.clone(), "A second claim.".into()],
            claims: vec![e.text.clone(), "A second claim.".into()],
            pipeline_version: "base".into(),
            llm_calls: 0,
            verifier_json: Some(r#"{"n_viol":0,"avr":0.0}"#.into()),
            repair_json: None,
            error: None,
            // Every metric set, as a verified sweep with an encoder writes them.
            metrics: ExampleMetrics::from_values(
                ExampleMetrics::DEFS.iter().map(|d| (d.name, 1.0)),
            )
            .expect("metric names from the list"),
            stage_seconds: Default::default(),
        })
        .collect()
}

async fn store_bench(admin: &str, tasks: usize) -> anyhow::Result<()> {
    let name = format!(
        "credence_bench_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let admin_pool = sqlx::PgPool::connect(admin).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin_pool)
        .await?;
    let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
    let result = async {
        let store = Arc::new(PgStore::connect(&format!("{base}/{name}"), tasks as u32 + 1).await?);
        let data = LoadedDataset {
            path: "bench.jsonl".into(),
            hash: "bench-dataset".into(),
            examples: (0..ROWS)
                .map(|i| Example {
                    id: format!("b{i:06}"),
                    text: format!("Example {i} says one thing and then another thing."),
                    references: vec![format!("Example {i} says one thing."), "It says another thing.".into()],
                    meta: Default::default(),
                })
                .collect(),
        };
        let jobs = jobs(ROWS as u32, SHARD as u32);
        let run = RunRecord { run_id: "bench".into(), spec_json: "{}".into() };
        let plan_start = Instant::now();
        store.record_plan(&run, &[PlannedDatasetRecord { id: "d", data: &data }], &jobs).await?;
        let planned = plan_start.elapsed();
        let batches: Vec<(Job, Vec<ExampleResult>)> = jobs
            .iter()
            .map(|j| (j.clone(), results(&data.examples[j.start as usize..(j.start + j.len) as usize])))
            .collect();
        let batches = Arc::new(batches);
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for t in 0..tasks {
            let (store, batches) = (store.clone(), batches.clone());
            set.spawn(async move {
                for (job, results) in batches.iter().skip(t).step_by(tasks) {
                    let _commit = store.record_results(job, results).await?;
                }
                Ok::<_, anyhow::Error>(())
            });
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        let elapsed = start.elapsed();
        println!(
            "store  {tasks} task(s): {:>7.0} result rows/s ({ROWS} rows in {} jobs of {SHARD}, {:.2} s; plan of {ROWS} examples + {} jobs in {:.2} s)",
            ROWS as f64 / elapsed.as_secs_f64(),
            jobs.len(),
            elapsed.as_secs_f64(),
            jobs.len(),
            planned.as_secs_f64()
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&admin_pool)
        .await?;
    result
}

fn main() -> anyhow::Result<()> {
    let pg = std::env::var("CREDENCE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mq = std::env::var("CREDENCE_TEST_BROKER_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        queue_bench(&mq, 1, 1).await?;
        queue_bench(&mq, 1, 4).await?;
        queue_bench(&mq, 50, 1).await?;
        store_bench(&pg, 1).await?;
        store_bench(&pg, 4).await?;
        Ok(())
    })
}
