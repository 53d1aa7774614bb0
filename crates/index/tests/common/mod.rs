//! Shared test setup: a small fixture tree of Java, TypeScript and markdown,
//! the real embedding model, and stores in a temporary data directory.

#![allow(dead_code)]

pub mod http;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use weft_core::ports::Embedder;
use weft_embed_local::LocalEmbedder;
use weft_index::Indexer;
use weft_wiring::{DataDir, LazyEmbedder, Stores};

/// The model directory: `WEFT_MODEL_DIR`, else where tools/fetch-model.sh puts it.
pub fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(weft_config::default_model_dir)
}

/// The real model, loaded once per test binary.
pub fn model() -> Arc<dyn Embedder> {
    static MODEL: std::sync::OnceLock<Arc<LocalEmbedder>> = std::sync::OnceLock::new();
    let model = MODEL.get_or_init(|| {
        Arc::new(LocalEmbedder::load(&model_dir(), 256).unwrap_or_else(|e| {
            panic!("these tests need the embedding model (run tools/fetch-model.sh): {e}")
        }))
    });
    model.clone()
}

/// Counts how often the model was asked for.
pub struct Counted {
    pub loads: Arc<AtomicUsize>,
    pub embedder: Arc<dyn Embedder>,
}

/// A lazily loaded model that counts its loads.
pub fn counted_model() -> Counted {
    let loads = Arc::new(AtomicUsize::new(0));
    let model = model();
    let (id, dim) = (model.model_id().to_owned(), model.dimension());
    let l = loads.clone();
    let embedder = LazyEmbedder::new(id, dim, move || {
        l.fetch_add(1, Ordering::SeqCst);
        Ok(model.clone())
    });
    Counted {
        loads,
        embedder: Arc::new(embedder),
    }
}

/// Stores in `data`, created for the real model.
pub fn stores(data: &Path) -> Stores {
    let model = model();
    DataDir::new(data)
        .open_for(model.model_id(), model.dimension())
        .expect("open stores")
}

/// A hybrid search with expansion over `stores`, with the real model.
pub async fn search(
    stores: &Stores,
    query: &str,
    limit: usize,
) -> weft_core::query::SearchResponse {
    let engine = weft_core::query::QueryEngine::new(
        stores.vectors.clone(),
        stores.text.clone(),
        Some(model()),
        None,
        weft_core::retrieval::RetrievalConfig::default(),
    );
    engine
        .search(&weft_core::query::SearchRequest {
            query: query.into(),
            filter: weft_core::retrieval::SearchFilter::default(),
            limit,
            mode: weft_core::query::SearchMode::Hybrid,
            expand: true,
            ..Default::default()
        })
        .await
        .expect("search")
}

/// An indexer over `data` with `embedder`.
pub fn indexer(data: &Path, embedder: Arc<dyn Embedder>) -> Indexer {
    indexer_with(data, embedder, weft_config::WeftConfig::default())
}

/// An indexer over `data` with `embedder` and `config`.
pub fn indexer_with(
    data: &Path,
    embedder: Arc<dyn Embedder>,
    config: weft_config::WeftConfig,
) -> Indexer {
    Indexer::new(stores(data), embedder, &config, data.join("sources")).expect("indexer")
}

/// The configuration of a test that crawls a site on this machine:
/// loopback addresses allowed (they are refused by default).
pub fn loopback_crawl_config() -> weft_config::WeftConfig {
    let mut config = weft_config::WeftConfig::default();
    config.crawl.allow_private_networks = vec!["127.0.0.0/8".into()];
    config
}

pub const RATE_LIMITER: &str = r#"package com.example.throttle;

import java.util.concurrent.TimeUnit;

/**
 * A rate limiter hands out permits at a fixed rate: a token bucket that
 * refills a configurable number of permits per second.
 */
public final class RateLimiter {
  private final double permitsPerSecond;
  private double storedPermits;
  private long nextFreeTicketMicros;

  /** Creates a limiter that allows {@code permitsPerSecond} permits each second. */
  public static RateLimiter create(double permitsPerSecond) {
    if (permitsPerSecond <= 0.0) {
      throw new IllegalArgumentException("rate must be positive: " + permitsPerSecond);
    }
    return new RateLimiter(permitsPerSecond);
  }

  private RateLimiter(double permitsPerSecond) {
    this.permitsPerSecond = permitsPerSecond;
    this.storedPermits = 0.0;
    this.nextFreeTicketMicros = System.nanoTime() / 1000;
  }

  /**
   * Acquires one permit, blocking until it is available; returns the time
   * spent sleeping, in seconds. Callers that exceed the rate are throttled.
   */
  public double acquire() {
    long waitMicros = reserve(1);
    sleepMicrosUninterruptibly(waitMicros);
    return waitMicros / 1_000_000.0;
  }

  /** Acquires a permit if it can be obtained within the timeout, without waiting otherwise. */
  public boolean tryAcquire(long timeout, TimeUnit unit) {
    long timeoutMicros = Math.max(unit.toMicros(timeout), 0);
    long nowMicros = System.nanoTime() / 1000;
    if (nextFreeTicketMicros - timeoutMicros > nowMicros) {
      return false;
    }
    sleepMicrosUninterruptibly(reserve(1));
    return true;
  }

  private long reserve(int permits) {
    long nowMicros = System.nanoTime() / 1000;
    resync(nowMicros);
    long wait = Math.max(nextFreeTicketMicros - nowMicros, 0);
    double fresh = permits - Math.min(permits, storedPermits);
    nextFreeTicketMicros += (long) (fresh * 1_000_000.0 / permitsPerSecond);
    storedPermits -= Math.min(permits, storedPermits);
    return wait;
  }

  private void resync(long nowMicros) {
    if (nowMicros > nextFreeTicketMicros) {
      double newPermits = (nowMicros - nextFreeTicketMicros) * permitsPerSecond / 1_000_000.0;
      storedPermits = Math.min(permitsPerSecond, storedPermits + newPermits);
      nextFreeTicketMicros = nowMicros;
    }
  }

  private static void sleepMicrosUninterruptibly(long micros) {
    if (micros > 0) {
      try {
        TimeUnit.MICROSECONDS.sleep(micros);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
"#;

pub const LRU_CACHE: &str = r#"/**
 * A least-recently-used cache: when full, the entry that was read or written
 * longest ago is evicted to make room for a new one.
 */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly capacity: number) {
    if (capacity < 1) {
      throw new RangeError(`capacity must be at least 1, got ${capacity}`);
    }
  }

  /** Returns the cached value and marks it most recently used. */
  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  /** Stores a value, evicting the least recently used entry when over capacity. */
  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    while (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as K;
      this.entries.delete(oldest);
    }
  }

  /** Number of cached entries. */
  get size(): number {
    return this.entries.size;
  }
}

/** Memoizes a one-argument function with a bounded LRU cache. */
export function memoize<A, R>(fn: (arg: A) => R, capacity = 100): (arg: A) => R {
  const cache = new LruCache<A, R>(capacity);
  return (arg: A) => {
    const hit = cache.get(arg);
    if (hit !== undefined) {
      return hit;
    }
    const result = fn(arg);
    cache.set(arg, result);
    return result;
  };
}
"#;

pub const DEPLOY_GUIDE: &str = r#"# Deployment guide

This guide explains how to run the service in production.

## Installing

Download the release archive for your platform, unpack it into `/opt/service`
and add `/opt/service/bin` to the `PATH`. The archive contains a single static
binary and a sample configuration file.

## Configuring TLS certificates

The server terminates TLS itself. Put the certificate chain and the private
key in PEM files and point `tls.cert_file` and `tls.key_file` at them. The
certificates are reloaded when the files change, so renewing them with an
ACME client needs no restart.

## Scaling out

Run several replicas behind a load balancer. Sessions are stored in the
shared database, so any replica can serve any request. Health checks should
call `/healthz`, which answers once the database connection is established.

## Backups

Snapshot the database volume every night and keep seven copies. Restoring is
a matter of stopping the replicas, restoring the volume and starting them.
"#;

/// Writes the fixture tree into `root`.
pub fn write_fixture(root: &Path) {
    for (path, text) in [
        (
            "src/main/java/com/example/throttle/RateLimiter.java",
            RATE_LIMITER,
        ),
        ("web/src/lru-cache.ts", LRU_CACHE),
        ("docs/deploy.md", DEPLOY_GUIDE),
        (
            "node_modules/left-pad/index.js",
            "module.exports = function leftPad() {};\n",
        ),
    ] {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write fixture");
    }
    std::fs::write(
        root.join("logo.png"),
        [0x89, b'P', b'N', b'G', 0, 0, 0, 13, 0, 1],
    )
    .expect("binary");
}

/// The real vector index, counting the batched `get` and `vectors_by_key`
/// calls made through it.
pub struct CountingVectors {
    pub inner: Arc<dyn weft_core::ports::VectorIndex>,
    pub gets: AtomicUsize,
    /// Calls to `vectors_by_key`.
    pub key_lookups: AtomicUsize,
}

#[async_trait::async_trait]
impl weft_core::ports::VectorIndex for CountingVectors {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn upsert(
        &self,
        chunks: &[weft_core::Chunk],
        vectors: &[Vec<f32>],
        keys: &[String],
    ) -> weft_core::ports::PortResult<()> {
        self.inner.upsert(chunks, vectors, keys).await
    }
    async fn delete_document_from(
        &self,
        document: &weft_core::DocumentId,
        from: u32,
    ) -> weft_core::ports::PortResult<()> {
        self.inner.delete_document_from(document, from).await
    }
    async fn delete_project(&self, project: &str) -> weft_core::ports::PortResult<()> {
        self.inner.delete_project(project).await
    }
    async fn search(
        &self,
        vector: &[f32],
        filter: &weft_core::retrieval::SearchFilter,
        limit: usize,
    ) -> weft_core::ports::PortResult<Vec<weft_core::retrieval::ScoredChunk>> {
        self.inner.search(vector, filter, limit).await
    }
    async fn get(
        &self,
        ids: &[weft_core::ChunkId],
    ) -> weft_core::ports::PortResult<Vec<weft_core::Chunk>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(ids).await
    }
    async fn vectors_by_key(
        &self,
        keys: &[String],
    ) -> weft_core::ports::PortResult<std::collections::HashMap<String, Vec<f32>>> {
        self.key_lookups.fetch_add(1, Ordering::SeqCst);
        self.inner.vectors_by_key(keys).await
    }
    async fn count(&self) -> weft_core::ports::PortResult<u64> {
        self.inner.count().await
    }
    async fn commit(&self) -> weft_core::ports::PortResult<()> {
        self.inner.commit().await
    }
}
