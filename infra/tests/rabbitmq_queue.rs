//! The RabbitMQ queue against the real broker: topology (quorum queues with an explicit
//! delivery limit and a dead-letter exchange), publish with confirms, consume, ack,
//! requeue with the delivery count, dead letters with reasons and delivery counts, the
//! broker's own dead-lettering at the delivery limit, replay, a release that uses no
//! delivery, the consumer timeout and queues declared without it, and a wrong URL.

mod support;

use credence_infra::queue::rabbitmq::{RabbitQueue, RabbitSettings};
use credence_infra::queue::{Consumer, Delivery, Queue, QueueError};
use std::time::Duration;
use support::{broker_url, namespace, servers_available};

async fn queue(ns: &str) -> RabbitQueue {
    let mut s = RabbitSettings::new(&broker_url());
    s.namespace = ns.to_string();
    s.delivery_limit = 2;
    s.reconnect_for = Some(Duration::from_secs(10));
    RabbitQueue::connect(s).await.unwrap()
}

async fn next(c: &mut Box<dyn Consumer>) -> Box<dyn Delivery> {
    tokio::time::timeout(Duration::from_secs(10), c.next())
        .await
        .expect("a delivery within 10 s")
        .unwrap()
        .expect("the consumer does not end")
}

struct Cleanup(RabbitQueue, Vec<String>);

impl Cleanup {
    async fn run(self) {
        // Give the dropped consumer's channel a moment to close first.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if self.0.delete_queues(&self.1).await.is_err() {
            // A connection lost to the cancel of a consumer reconnects on the retry.
            self.0.delete_queues(&self.1).await.unwrap();
        }
    }
}

#[tokio::test]
async fn publish_consume_requeue_dead_letter_and_replay() {
    if !servers_available("rabbitmq queue") {
        return;
    }
    let ns = namespace();
    let q = queue(&ns).await;
    let name = "credence.jobs.m".to_string();
    assert_eq!(q.physical(&name), format!("{ns}.jobs.m"));
    let cleanup = Cleanup(q.clone(), vec![name.clone()]);

    q.publish_batch(&name, (0..5u8).map(|i| vec![b'0' + i]).collect())
        .await
        .unwrap();
    assert_eq!(q.depth(&name).await.unwrap(), (5, 0));
    let mut c = q.consume(&name).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let d = next(&mut c).await;
        assert_eq!(d.previous_deliveries(), 0);
        seen.push(d.body().to_vec());
        d.ack().await.unwrap();
    }
    assert_eq!(seen, (0..5u8).map(|i| vec![b'0' + i]).collect::<Vec<_>>());

    // Requeued: delivered again with its count; dead-lettered with a reason.
    q.publish(&name, b"again".to_vec()).await.unwrap();
    let d = next(&mut c).await;
    d.nack(true).await.unwrap();
    let d = next(&mut c).await;
    assert_eq!((d.body(), d.previous_deliveries()), (&b"again"[..], 1));
    d.dead_letter("job failed: boom").await.unwrap();

    // The broker dead-letters a message returned more than x-delivery-limit (2) times.
    q.publish(&name, b"crash-loop".to_vec()).await.unwrap();
    let mut returns = 0;
    while let Ok(Ok(Some(d))) = tokio::time::timeout(Duration::from_secs(2), c.next()).await {
        assert_eq!(d.body(), b"crash-loop");
        d.nack(true).await.unwrap();
        returns += 1;
    }
    assert!(
        (2..=3).contains(&returns),
        "{returns} returns before the broker gave up"
    );
    let mut dead = Vec::new();
    for _ in 0..50 {
        dead = q.dead_letters().await.unwrap();
        if dead.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!(dead[0].body, b"again");
    assert_eq!(dead[0].reason, "job failed: boom");
    assert_eq!(dead[0].deliveries, 2);
    assert_eq!(dead[0].queue, format!("{ns}.jobs.m"));
    assert_eq!(dead[1].body, b"crash-loop");
    assert!(
        dead[1].reason.starts_with("delivery limit reached"),
        "{}",
        dead[1].reason
    );
    assert_eq!(dead[1].queue, format!("{ns}.jobs.m"));
    assert_eq!(dead[1].deliveries, returns, "{dead:?}");

    let (all, replayed) = q.replay_dead_letters(|d| d.body == b"again").await.unwrap();
    assert_eq!((all.len(), replayed.len()), (2, 1));
    let d = next(&mut c).await;
    assert_eq!((d.body(), d.previous_deliveries()), (&b"again"[..], 0));
    d.ack().await.unwrap();
    // Messages read but not replayed return to the dead-letter queue when the reading
    // channel closes; a quorum queue applies that through its log, so allow it a moment.
    let mut left = 0;
    for _ in 0..50 {
        left = q.dead_letters().await.unwrap().len();
        if left == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, 1);
    drop(c);
    cleanup.run().await;
}

#[tokio::test]
async fn a_dropped_delivery_returns_to_the_queue() {
    if !servers_available("rabbitmq queue") {
        return;
    }
    let ns = namespace();
    let q = queue(&ns).await;
    let name = "credence.aggregate".to_string();
    let cleanup = Cleanup(q.clone(), vec![name.clone()]);
    q.publish(&name, b"x".to_vec()).await.unwrap();
    let mut c = q.consume(&name).await.unwrap();
    drop(next(&mut c).await);
    let d = next(&mut c).await;
    assert_eq!(d.previous_deliveries(), 1);
    d.ack().await.unwrap();
    drop(c);
    cleanup.run().await;
}

#[tokio::test]
async fn wrong_urls_name_the_host_not_the_password() {
    if !servers_available("rabbitmq queue") {
        return;
    }
    let err = RabbitQueue::connect(RabbitSettings::new("amqp://alice:hunter2@127.0.0.1:1/%2f"))
        .await
        .err()
        .expect("nothing listens on port 1");
    let text = err.to_string();
    assert!(
        text.starts_with("cannot reach the broker at 127.0.0.1:1//: "),
        "{text}"
    );
    assert!(!text.contains("hunter2") && !text.contains('\n'), "{text}");
    let err = RabbitQueue::connect(RabbitSettings::new("http://alice:hunter2@x"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, QueueError::Connect { .. }));
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

/// A released delivery (a worker shutting down before it could run the job) returns
/// to the queue without counting against `x-delivery-limit` (2 here): released five
/// times after one real failure, it is never dead-lettered by the broker, and its
/// count of deliveries that did count survives the publish-back.
#[tokio::test]
async fn a_released_delivery_uses_no_delivery() {
    if !servers_available("rabbitmq queue") {
        return;
    }
    let ns = namespace();
    let q = queue(&ns).await;
    let name = "credence.jobs.r".to_string();
    let cleanup = Cleanup(q.clone(), vec![name.clone()]);
    q.publish(&name, b"job".to_vec()).await.unwrap();
    let mut c = q.consume(&name).await.unwrap();
    next(&mut c).await.nack(true).await.unwrap();
    for _ in 0..5 {
        let d = next(&mut c).await;
        assert_eq!((d.body(), d.previous_deliveries()), (&b"job"[..], 1));
        d.release().await.unwrap();
    }
    let d = next(&mut c).await;
    assert_eq!(d.previous_deliveries(), 1);
    d.dead_letter("failed for good").await.unwrap();
    let mut dead = Vec::new();
    for _ in 0..50 {
        dead = q.dead_letters().await.unwrap();
        if !dead.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(
        (dead[0].reason.as_str(), dead[0].deliveries),
        ("failed for good", 2)
    );
    assert_eq!(q.depth(&name).await.unwrap().0, 0);
    drop(c);
    cleanup.run().await;
}

/// The broker's view of a queue's arguments (`rabbitmqctl list_queues`).
fn queue_arguments(physical: &str) -> serde_json::Value {
    let out = std::process::Command::new("rabbitmqctl")
        .args(["list_queues", "name", "arguments", "--formatter", "json"])
        .output()
        .expect("rabbitmqctl is installed with RabbitMQ");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let queues: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let args = queues
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == physical))
        .map(|q| q["arguments"].clone())
        .unwrap_or_else(|| panic!("no queue {physical}: {queues}"));
    // A list of [name, type, value]: as a map of name to value.
    let pairs = args.as_array().cloned().unwrap_or_default();
    pairs
        .iter()
        .filter_map(|a| Some((a.get(0)?.as_str()?.to_string(), a.get(2)?.clone())))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Job queues are declared with `x-consumer-timeout` (the broker accepts it as a queue
/// argument), and a queue an older version declared without it is used as it is:
/// publish, consume and ack work, rather than failing with PRECONDITION_FAILED.
#[tokio::test]
async fn queues_carry_the_consumer_timeout_and_older_queues_still_work() {
    if !servers_available("rabbitmq queue") {
        return;
    }
    let ns = namespace();
    let mut settings = RabbitSettings::new(&broker_url());
    settings.namespace = ns.clone();
    settings.reconnect_for = Some(Duration::from_secs(10));
    settings.consumer_timeout = Duration::from_secs(7200);
    let q = RabbitQueue::connect(settings).await.unwrap();
    let (new, old) = (
        "credence.jobs.new".to_string(),
        "credence.jobs.old".to_string(),
    );
    let cleanup = Cleanup(q.clone(), vec![new.clone(), old.clone()]);

    q.publish(&new, b"n".to_vec()).await.unwrap();
    let args = queue_arguments(&q.physical(&new));
    assert_eq!(args["x-consumer-timeout"], 7_200_000, "{args}");

    // The old version's declaration: the same arguments but the consumer timeout.
    let conn = lapin::Connection::connect(&broker_url(), lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let mut old_args = lapin::types::FieldTable::default();
    for (k, v) in [
        ("x-queue-type", "quorum"),
        ("x-dead-letter-exchange", &*q.dead_letter_queue()),
        ("x-dead-letter-strategy", "at-least-once"),
        ("x-overflow", "reject-publish"),
    ] {
        old_args.insert(k.into(), lapin::types::AMQPValue::LongString(v.into()));
    }
    old_args.insert(
        "x-delivery-limit".into(),
        lapin::types::AMQPValue::LongInt(3),
    );
    ch.queue_declare(
        &q.physical(&old),
        lapin::options::QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        old_args,
    )
    .await
    .unwrap();
    conn.close(200, "declared").await.unwrap();

    q.publish(&old, b"o".to_vec()).await.unwrap();
    assert_eq!(q.depth(&old).await.unwrap(), (1, 0));
    let mut c = q.consume(&old).await.unwrap();
    let d = next(&mut c).await;
    assert_eq!(d.body(), b"o");
    d.ack().await.unwrap();
    assert!(queue_arguments(&q.physical(&old))
        .get("x-consumer-timeout")
        .is_none());
    drop(c);
    cleanup.run().await;
}
