//! What credence's processes do I/O with, over the types of `credence-core`: the
//! [`queue::Queue`] and [`store::Store`] traits with their engines (in-process and
//! RabbitMQ; SQLite and PostgreSQL), the caches the job path reads through ([`cache`]), the error of both ([`error`]),
//! the one seam the job path reports to ([`observe`]), the aggregation job
//! ([`aggregation`]) and the Prometheus endpoint of the distributed engine's processes
//! ([`telemetry`]). Nothing in this crate loads a model.

pub mod aggregation;
pub mod cache;
pub mod error;
pub mod observe;
pub mod queue;
pub mod store;
pub mod telemetry;
