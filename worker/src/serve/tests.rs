//! A worker whose consumer dies ends with an error naming the queue and why, rather than
//! living on with a queue nobody consumes.

use super::*;
use async_trait::async_trait;
use credence_infra::queue::memory::MemoryQueue;
use credence_infra::queue::{Consumer, DeadLetter, Delivery, QueueError};
use credence_infra::store::sqlite::SqliteStore;

/// How the consumer of the model's queue ends.
#[derive(Clone, Copy)]
enum Ending {
    Panic,
    Error,
}

/// The in-process queue, except that the consumer of `credence.jobs.m` ends at its
/// first `next` as `ending` says; the aggregation queue's consumer waits as usual.
struct BrokenQueue {
    inner: MemoryQueue,
    ending: Ending,
}

struct BrokenConsumer(Ending);

#[async_trait]
impl Consumer for BrokenConsumer {
    async fn next(&mut self) -> Result<Option<Box<dyn Delivery>>, QueueError> {
        match self.0 {
            Ending::Panic => panic!("Retry-After out of range"),
            Ending::Error => Err(QueueError::Broker {
                what: "consume",
                message: "channel closed by the broker".into(),
            }),
        }
    }
}

#[async_trait]
impl Queue for BrokenQueue {
    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), QueueError> {
        self.inner.publish(queue, body).await
    }
    async fn consume(&self, queue: &str) -> Result<Box<dyn Consumer>, QueueError> {
        if queue == job_queue("m") {
            Ok(Box::new(BrokenConsumer(self.ending)))
        } else {
            self.inner.consume(queue).await
        }
    }
    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        self.inner.dead_letters().await
    }
}

async fn serve_broken(ending: Ending) -> Result<WorkerReport, ServeError> {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let queue: Arc<dyn Queue> = Arc::new(BrokenQueue {
        inner: MemoryQueue::new(3),
        ending,
    });
    let opts = WorkerOptions {
        models: vec!["m".into()],
        worker_id: "w".into(),
        max_deliveries: 3,
        heartbeat: Duration::from_secs(1),
    };
    let handler = Arc::new(JobHandler::new(["m".to_string()]));
    // Never stopped: only the broken consumer can end it.
    let (_stop, shutdown) = watch::channel(false);
    tokio::time::timeout(
        Duration::from_secs(10),
        serve_with(handler, store, queue, &opts, None, shutdown),
    )
    .await
    .expect("the worker stops when a consumer dies, not never")
}

#[tokio::test]
async fn a_panicking_consumer_ends_the_worker_with_its_queue_and_message() {
    let err = serve_broken(Ending::Panic).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the consumer of queue credence.jobs.m stopped: panicked: Retry-After out of range; \
         the worker exits so that it is replaced"
    );
}

#[tokio::test]
async fn a_consumer_error_ends_the_worker() {
    let err = serve_broken(Ending::Error).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the consumer of queue credence.jobs.m stopped: queue operation (consume): channel \
         closed by the broker; the worker exits so that it is replaced"
    );
}
