//! `--redis`: the document corpus in a Redis Cluster (`neardup_store::RedisStore`) instead
//! of a data directory, for `neardup serve` and `neardup index`.

use anyhow::anyhow;
use neardup_store::DocConfig;

use crate::failure::Failure;

/// Where a corpus in Redis is, and how its writes are acknowledged.
#[derive(clap::Args, Clone, Debug)]
pub struct RedisArgs {
    /// Keep the corpus in a Redis Cluster reached through these seed nodes
    /// (comma-separated, `redis://host:port` or `host:port`) instead of a data directory.
    #[arg(long, value_name = "URLS")]
    pub redis: Option<String>,
    /// With --redis: the corpus's key prefix; several corpora can share a cluster.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "neardup",
        requires = "redis"
    )]
    pub redis_namespace: String,
    /// With --redis: replicas of each primary that must have a write before it is
    /// acknowledged (Redis WAIT); 0 for a cluster without replicas.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "redis")]
    pub redis_replicas: u32,
}

impl RedisArgs {
    /// What messages call the corpus.
    pub fn describe(&self) -> String {
        format!(
            "redis {} (namespace {})",
            self.redis.as_deref().unwrap_or_default(),
            self.redis_namespace
        )
    }

    /// Opens the corpus (with `create`, makes it first with those settings, sized for
    /// `expected` documents: how finely each band is split into buckets).
    #[cfg(feature = "redis")]
    pub fn open(
        &self,
        create: Option<DocConfig>,
        expected: u64,
    ) -> Result<neardup_store::RedisStore, Failure> {
        use neardup_store::{RedisOptions, RedisStore};
        use std::time::Duration;
        let urls = self
            .redis
            .as_deref()
            .ok_or_else(|| Failure::input(anyhow!("--redis is needed here")))?;
        let options = RedisOptions {
            namespace: self.redis_namespace.clone(),
            wait_replicas: self.redis_replicas,
            wait_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(5),
        };
        match create {
            Some(config) => RedisStore::create(urls, options, config, expected),
            None => RedisStore::connect(urls, options, None),
        }
        .map_err(crate::failure::store_failure)
    }

    /// Without the `redis` feature there is no Redis backend: a clear error (the store
    /// type only fills the signature; none is ever made).
    #[cfg(not(feature = "redis"))]
    pub fn open(
        &self,
        _create: Option<DocConfig>,
        _expected: u64,
    ) -> Result<neardup_store::DocumentStore, Failure> {
        Err(Failure::input(anyhow!(
            "--redis: this neardup was built without the 'redis' feature"
        )))
    }
}
