//! # weft-embed-local
//!
//! Sentence embeddings computed in-process: a BERT or MPNet encoder
//! (all-MiniLM-L6-v2 by default, all-mpnet-base-v2 as the stronger option)
//! run by [ONNX Runtime], mean-pooled over the attention mask and
//! L2-normalised. The encoder graph is built in memory from the model
//! directory's safetensors weights (see [`graph`]); ONNX Runtime's library is
//! loaded at run time from the file [`runtime::library_path`] names, so
//! nothing of it is needed to build weft.
//!
//! Texts are truncated at `max_tokens`, sorted by token count and embedded
//! in batches of similar length (little padding); vectors come back in the
//! order of the texts.
//!
//! The model directory holds `config.json`, `tokenizer.json` and
//! `model.safetensors`; `tools/fetch-model.sh` fetches a model, checks its
//! weights, and fetches the runtime library.
//!
//! [ONNX Runtime]: https://onnxruntime.ai

#![warn(missing_docs)]

pub mod graph;
pub mod query_adapter;
pub mod runtime;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ort::session::Session;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::value::Tensor;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

pub use graph::{Architecture, INT8_RECIPE, Precision, Spec};
pub use query_adapter::{AdapterChoice, QueryAdapter};

/// The command that fetches a model and the runtime, for error messages.
pub const FETCH_HINT: &str = "tools/fetch-model.sh";

/// The default truncation, in tokens.
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// At most this many texts per forward pass.
const MAX_ROWS: usize = 32;

/// Int8: at most this many sessions run texts side by side (each holds its
/// own copy of the graph's weights, ~70 MB for MiniLM).
const MAX_SESSIONS: usize = 4;

/// At most this many tokens (padding included) per forward pass: batches of
/// long texts are smaller, which keeps the attention temporaries
/// (`rows × heads × tokens²`) in cache.
const MAX_BATCH_TOKENS: usize = 4096;

/// How [`LocalEmbedder::load_with`] loads a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Texts are truncated at this many tokens (at most the model's
    /// position limit).
    pub max_tokens: usize,
    /// The arithmetic of the linear layers.
    pub precision: Precision,
    /// Threads per forward pass; `None`: one per core.
    pub threads: Option<usize>,
    /// Writes the graph ONNX Runtime runs, after its optimizer (the fused
    /// kernels it chose), to this ONNX file.
    pub save_graph: Option<PathBuf>,
    /// The learned map applied to query vectors ([`query_adapter`]).
    pub query_adapter: AdapterChoice,
    /// What the model will embed, which decides what is built at load.
    pub purpose: Purpose,
}

/// What a loaded model will embed: it decides which ONNX sessions are
/// built at load (and fail there, naming the file or setting at fault) and
/// which only when first used. Either embeds chunks and queries alike.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Purpose {
    /// Chunks and queries (an index run, the embedder service, a process
    /// doing both): the model's own sessions at load; a query encoder's
    /// at the first query, so a process that only indexes never holds it.
    #[default]
    All,
    /// Queries (a search, the query service): a query encoder's session at
    /// load (no first query pays for building it); the model's own
    /// sessions at load only when queries use them (no query encoder),
    /// else at the first chunk, which such a process never embeds. Each
    /// session holds its own copy of the weights (~120 MB for MiniLM).
    Queries,
}

impl LoadOptions {
    /// fp32, texts cut at `max_tokens`, every core.
    pub fn new(max_tokens: usize) -> Self {
        Self {
            max_tokens,
            precision: Precision::Fp32,
            threads: None,
            save_graph: None,
            query_adapter: AdapterChoice::Off,
            purpose: Purpose::All,
        }
    }

    /// These options in `precision`.
    pub fn precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// These options with `choice` of query adapter.
    pub fn query_adapter(mut self, choice: AdapterChoice) -> Self {
        self.query_adapter = choice;
        self
    }

    /// These options for `purpose`.
    pub fn purpose(mut self, purpose: Purpose) -> Self {
        self.purpose = purpose;
        self
    }
}

/// The index identity's name for vectors of the model `model_id`, texts cut
/// at `max_tokens`, in `precision`: `all-MiniLM-L6-v2@256` (fp32),
/// `all-MiniLM-L6-v2@256+int8.1` (int8).
pub fn embedder_tag(model_id: &str, max_tokens: usize, precision: Precision) -> String {
    format!("{model_id}@{max_tokens}{}", precision.identity_suffix())
}

/// Why a model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file of the model is missing.
    #[error(
        "no embedding model in {dir}: {file} is missing; fetch it with `{FETCH_HINT} [MODEL] {dir}` (MODEL: all-MiniLM-L6-v2, the default, or all-mpnet-base-v2)"
    )]
    Missing {
        /// The model directory.
        dir: PathBuf,
        /// The missing file.
        file: &'static str,
    },
    /// A file is there but cannot be used.
    #[error("embedding model in {dir}: {file}: {message}")]
    Invalid {
        /// The model directory.
        dir: PathBuf,
        /// The file at fault.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The ONNX Runtime library cannot be loaded.
    #[error(
        "ONNX Runtime {version} ({path}): {message}; fetch it with `{FETCH_HINT}`, or set {env} to a libonnxruntime of version {version} or later",
        version = runtime::VERSION,
        env = runtime::LIB_ENV
    )]
    Runtime {
        /// The library file tried.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// `embedding.query_adapter` names no adapter for this model.
    #[error("embedding.query_adapter: {0}")]
    QueryAdapter(String),
    /// ONNX Runtime refused the encoder graph.
    #[error("embedding model in {dir}: ONNX Runtime: {message}")]
    Session {
        /// The model directory.
        dir: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The tokenizer failed.
    #[error("embedding failed: tokenizer: {0}")]
    Tokenizer(#[source] tokenizers::Error),
    /// ONNX Runtime failed.
    #[error("embedding failed: ONNX Runtime: {0}")]
    Runtime(#[from] ort::Error),
    /// The session is unusable after a panic in another thread.
    #[error("embedding failed: the model was poisoned by a panic in another thread")]
    Poisoned,
    /// A session built at its first use (see [`Purpose`]) could not be.
    #[error("embedding failed: {0}")]
    Session(String),
}

impl EmbedError {
    /// What kind of failure it is: a text the tokenizer refuses is
    /// `Invalid`; ONNX Runtime failing or a poisoned session `Internal`.
    pub fn kind(&self) -> weft_core::ErrorKind {
        match self {
            EmbedError::Tokenizer(_) => weft_core::ErrorKind::Invalid,
            EmbedError::Runtime(_) | EmbedError::Poisoned | EmbedError::Session(_) => {
                weft_core::ErrorKind::Internal
            }
        }
    }
}

/// A loaded sentence-embedding model.
#[derive(Clone)]
pub struct LocalEmbedder {
    /// The model's own sessions: chunks, and queries when no query
    /// encoder is loaded.
    sessions: Arc<Sessions>,
    tokenizer: Arc<Tokenizer>,
    spec: Spec,
    pad_id: i64,
    model_id: String,
    max_tokens: usize,
    precision: Precision,
    /// Applied to query vectors only ([`query_adapter`]).
    query_adapter: Option<Arc<QueryAdapter>>,
    /// A query encoder's session (the model with the adapter's weight
    /// changes), which embeds queries in place of `sessions`.
    query_encoder: Option<Arc<Sessions>>,
}

/// The ONNX sessions of one graph, the model's own or a query encoder's,
/// built at load or at their first use ([`Purpose`]).
struct Sessions {
    /// What they run, for errors: "the model" or the adapter's name.
    label: &'static str,
    /// `model.safetensors`, read (again) when they are built.
    weights: PathBuf,
    spec: Spec,
    max_tokens: usize,
    precision: Precision,
    /// How many sessions, each with `intra` threads.
    count: usize,
    intra: usize,
    /// A query encoder's changes to the model's weights.
    delta: Option<Arc<graph::WeightDelta>>,
    save_graph: Option<PathBuf>,
    /// The sessions once built, or why they could not be.
    built: OnceLock<Result<Vec<Mutex<Session>>, BuildError>>,
}

/// Why sessions could not be built.
#[derive(Debug, Clone)]
enum BuildError {
    /// The ONNX Runtime library could not be loaded.
    Runtime { path: PathBuf, message: String },
    /// The weights file cannot be read or does not fit the model.
    Weights(String),
    /// ONNX Runtime refused the graph.
    Session(String),
}

impl Sessions {
    /// The sessions, built on first use.
    fn get(&self) -> Result<&[Mutex<Session>], &BuildError> {
        self.built.get_or_init(|| self.build()).as_deref()
    }

    /// [`Self::get`] while embedding: an error names what was being built.
    fn for_embedding(&self) -> Result<&[Mutex<Session>], EmbedError> {
        self.get().map_err(|e| {
            let message = match e {
                BuildError::Runtime { path, message } => {
                    format!("ONNX Runtime ({}): {message}", path.display())
                }
                BuildError::Weights(m) => format!("{}: {m}", self.weights.display()),
                BuildError::Session(m) => format!("ONNX Runtime: {m}"),
            };
            EmbedError::Session(format!("building the session of {}: {message}", self.label))
        })
    }

    /// Builds them now, at load: an error is the load's.
    fn build_now(&self, dir: &Path) -> Result<(), LoadError> {
        self.get().map(|_| ()).map_err(|e| match e.clone() {
            BuildError::Runtime { path, message } => LoadError::Runtime { path, message },
            BuildError::Weights(message) => LoadError::Invalid {
                dir: dir.to_owned(),
                file: "model.safetensors",
                message,
            },
            BuildError::Session(message) => LoadError::Session {
                dir: dir.to_owned(),
                message,
            },
        })
    }

    fn build(&self) -> Result<Vec<Mutex<Session>>, BuildError> {
        let environment = runtime::environment()
            .map_err(|(path, message)| BuildError::Runtime { path, message })?;
        let file =
            std::fs::File::open(&self.weights).map_err(|e| BuildError::Weights(e.to_string()))?;
        // SAFETY: the weights file is mapped read-only while the graph is
        // built (the weights are copied into it); weft does not modify it.
        let bytes =
            unsafe { memmap2::Mmap::map(&file) }.map_err(|e| BuildError::Weights(e.to_string()))?;
        let options = session_builder(environment, self.intra, self.save_graph.as_deref())
            .map_err(|e| BuildError::Session(e.to_string()))?;
        (0..self.count)
            .map(|_| {
                let model = graph::build(
                    &self.spec,
                    &bytes,
                    self.max_tokens,
                    self.precision,
                    self.delta.as_deref(),
                )
                .map_err(BuildError::Weights)?;
                let session = model
                    .into_session(&options)
                    .map_err(|e| BuildError::Session(e.to_string()))?;
                Ok(Mutex::new(session))
            })
            .collect()
    }
}

/// How every session is built: `intra` threads per pass, threads sleeping
/// between operators, optionally saving the optimized graph.
fn session_builder(
    environment: &'static ort::environment::Environment,
    intra: usize,
    save_graph: Option<&Path>,
) -> Result<SessionBuilder, ort::Error> {
    let builder = Session::builder(environment)?;
    let builder = match save_graph {
        Some(path) => builder.with_optimized_model_path(path)?,
        None => builder,
    };
    Ok(builder
        .with_optimization_level(GraphOptimizationLevel::All)?
        .with_intra_threads(intra)?
        .with_inter_threads(1)?
        // Threads sleep between operators instead of spinning: the
        // indexer chunks and writes on the same cores meanwhile
        // (spinning took ~8% more CPU for the same work on a
        // loaded machine).
        .with_intra_op_spinning(false)?)
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("architecture", &self.spec.architecture)
            .field("dimension", &self.spec.hidden)
            .field("max_tokens", &self.max_tokens)
            .field("precision", &self.precision)
            .field("query_adapter", &self.query_adapter_name())
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir` in fp32, truncating texts at `max_tokens`
    /// (at most the model's position limit).
    pub fn load(dir: &Path, max_tokens: usize) -> Result<Self, LoadError> {
        Self::load_with(dir, &LoadOptions::new(max_tokens))
    }

    /// Loads the model in `dir` as `options` say.
    pub fn load_with(dir: &Path, options: &LoadOptions) -> Result<Self, LoadError> {
        let (max_tokens, precision) = (options.max_tokens, options.precision);
        let path = |file: &'static str| {
            let p = dir.join(file);
            if p.is_file() {
                Ok(p)
            } else {
                Err(LoadError::Missing {
                    dir: dir.to_owned(),
                    file,
                })
            }
        };
        let invalid = |file: &'static str, message: String| LoadError::Invalid {
            dir: dir.to_owned(),
            file,
            message,
        };
        let (config_path, tokenizer_path, weights_path) = (
            path("config.json")?,
            path("tokenizer.json")?,
            path("model.safetensors")?,
        );

        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|e| invalid("config.json", e.to_string()))?;
        let spec = Spec::parse(&config_text).map_err(|m| invalid("config.json", m))?;
        let model_id = Self::model_id_of(dir);
        let query_adapter = QueryAdapter::resolve(&options.query_adapter, &model_id, spec.hidden)
            .map_err(LoadError::QueryAdapter)?
            .map(Arc::new);
        if max_tokens == 0 || max_tokens > spec.max_tokens {
            return Err(invalid(
                "config.json",
                format!(
                    "max_tokens {max_tokens} must be between 1 and {}",
                    spec.max_tokens
                ),
            ));
        }

        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| invalid("tokenizer.json", e.to_string()))?;
        // The shipped tokenizers pad every text to 128 tokens; batches are
        // padded here instead, to their longest text.
        let pad_id = tokenizer
            .get_padding()
            .map(|p| p.pad_id)
            .or_else(|| tokenizer.token_to_id("[PAD]"))
            .or_else(|| tokenizer.token_to_id("<pad>"))
            .unwrap_or(0);
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| invalid("tokenizer.json", e.to_string()))?;

        // The runtime library is loaded now, whatever is built later.
        runtime::environment().map_err(|(path, message)| LoadError::Runtime { path, message })?;
        let threads = options
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1);
        // fp32 passes hold many texts and use every thread. An int8 pass
        // holds one text (see `batches`), too little work to share between
        // threads well (2 threads gained nothing over 1 here), so texts run
        // side by side instead, one session per thread.
        let (count, intra) = match precision {
            Precision::Fp32 => (1, threads),
            Precision::Int8 => {
                let count = threads.min(MAX_SESSIONS);
                (count, threads / count)
            }
        };
        let sessions = |label, count, delta, save_graph| Sessions {
            label,
            weights: weights_path.clone(),
            spec: spec.clone(),
            max_tokens,
            precision,
            count,
            intra,
            delta,
            save_graph,
            built: OnceLock::new(),
        };
        let model = Arc::new(sessions(
            "the model",
            count,
            None,
            options.save_graph.clone(),
        ));
        // A query encoder: one more session, the model with the adapter's
        // weight changes (queries come one or a few at a time, so one
        // session, its threads as each of the model's has). Whether the
        // changes fit the model is checked now, from the file's header.
        let file = std::fs::File::open(&weights_path)
            .map_err(|e| invalid("model.safetensors", e.to_string()))?;
        // SAFETY: mapped read-only to read the header; weft does not
        // modify the file.
        let bytes = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| invalid("model.safetensors", e.to_string()))?;
        // The model's own file first: its faults are not the adapter's.
        graph::check_model(&spec, &bytes).map_err(|m| invalid("model.safetensors", m))?;
        let query_encoder = match query_adapter.as_deref() {
            Some(adapter) => match adapter.encoder_delta() {
                Some(delta) => {
                    delta
                        .check_fits(&spec, &bytes)
                        .map_err(|m| LoadError::QueryAdapter(format!("{}: {m}", adapter.name())))?;
                    Some(Arc::new(sessions(adapter.name(), 1, Some(delta), None)))
                }
                None => None,
            },
            None => None,
        };
        drop(bytes);
        // What queries use is built now; the model's own sessions too
        // unless only queries are embedded and they do not use them.
        match (&query_encoder, options.purpose) {
            (Some(encoder), Purpose::Queries) => encoder.build_now(dir)?,
            _ => model.build_now(dir)?,
        }

        Ok(LocalEmbedder {
            sessions: model,
            tokenizer: Arc::new(tokenizer),
            pad_id: i64::from(pad_id),
            spec,
            model_id,
            max_tokens,
            precision,
            query_adapter,
            query_encoder,
        })
    }

    /// The id a model in `dir` gets: the directory's name (known without
    /// loading it; `tools/fetch-model.sh` names it after the model).
    pub fn model_id_of(dir: &Path) -> String {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        dir.file_name()
            .map_or_else(|| "local".into(), |n| n.to_string_lossy().into_owned())
    }

    /// The model's name (its directory's name).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The length of every embedding.
    pub fn dimension(&self) -> usize {
        self.spec.hidden
    }

    /// Texts are truncated at this many tokens.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The arithmetic of the linear layers.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The learned adapter applied to query vectors, if any
    /// ([`query_adapter`]).
    pub fn query_adapter_name(&self) -> Option<&'static str> {
        self.query_adapter.as_deref().map(QueryAdapter::name)
    }

    /// Which sessions are built so far ([`Purpose`]): the model's own, and
    /// the query encoder's (`None` without one).
    pub fn sessions_built(&self) -> (bool, Option<bool>) {
        let built = |s: &Sessions| s.built.get().is_some_and(Result::is_ok);
        (
            built(&self.sessions),
            self.query_encoder.as_deref().map(built),
        )
    }

    /// Embeds search queries: [`Self::embed`], or the query encoder if the
    /// adapter is one, then the adapter's map if it is one.
    pub fn embed_queries(&self, queries: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let vectors = match &self.query_encoder {
            Some(encoder) => self.embed_on(encoder.for_embedding()?, queries)?,
            None => self.embed(queries)?,
        };
        Ok(match &self.query_adapter {
            Some(adapter) => vectors.iter().map(|v| adapter.apply(v)).collect(),
            None => vectors,
        })
    }

    /// The index identity's name for this model's vectors ([`embedder_tag`]).
    pub fn tag(&self) -> String {
        embedder_tag(&self.model_id, self.max_tokens, self.precision)
    }

    /// The encoder's shape, as `config.json` gives it.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// How many tokens each text is embedded as (after truncation).
    pub fn count_tokens(&self, texts: &[&str]) -> Result<Vec<usize>, EmbedError> {
        Ok(self.encode(texts)?.iter().map(Encoding::len).collect())
    }

    fn encode(&self, texts: &[&str]) -> Result<Vec<Encoding>, EmbedError> {
        self.tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(EmbedError::Tokenizer)
    }

    /// Embeds `texts`: one unit-length vector of [`Self::dimension`] floats each.
    ///
    /// Texts are sorted by token count and embedded in batches of similar
    /// length (a batch pads to its longest text); the vectors come back in
    /// the order of `texts`.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_on(self.sessions.for_embedding()?, texts)
    }

    /// [`Self::embed`] with `sessions`.
    fn embed_on(
        &self,
        sessions: &[Mutex<Session>],
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self.encode(texts)?;
        let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let plan = batches(&lengths, self.precision);
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        if sessions.len() == 1 || plan.len() == 1 {
            for batch in &plan {
                let vectors = self.embed_batch(&sessions[0], batch, &encodings)?;
                for (&i, vector) in batch.iter().zip(vectors) {
                    out[i] = vector;
                }
            }
            return Ok(out);
        }
        // Several sessions: each takes the next pass until none is left.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let done: Mutex<Vec<(usize, Vec<Vec<f32>>)>> = Mutex::new(Vec::new());
        let failed: Mutex<Option<EmbedError>> = Mutex::new(None);
        std::thread::scope(|scope| {
            for session in sessions {
                let (next, done, failed, plan, encodings) =
                    (&next, &done, &failed, &plan, &encodings);
                scope.spawn(move || {
                    loop {
                        let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(batch) = plan.get(b) else { break };
                        match self.embed_batch(session, batch, encodings) {
                            Ok(vectors) => {
                                if let Ok(mut done) = done.lock() {
                                    done.push((b, vectors));
                                }
                            }
                            Err(e) => {
                                if let Ok(mut failed) = failed.lock() {
                                    failed.get_or_insert(e);
                                }
                                // Stop every worker.
                                next.store(plan.len(), std::sync::atomic::Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = failed.into_inner().map_err(|_| EmbedError::Poisoned)? {
            return Err(e);
        }
        for (b, vectors) in done.into_inner().map_err(|_| EmbedError::Poisoned)? {
            for (&i, vector) in plan[b].iter().zip(vectors) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    /// One forward pass of `session` over the encodings `batch` indexes.
    fn embed_batch(
        &self,
        session: &Mutex<Session>,
        batch: &[usize],
        encodings: &[Encoding],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let width = batch.iter().map(|&i| encodings[i].len()).max().unwrap_or(0);
        let mut ids = vec![self.pad_id; batch.len() * width];
        let mut mask = vec![0i64; batch.len() * width];
        for (row, &i) in batch.iter().enumerate() {
            let e = &encodings[i];
            for (t, (&id, &m)) in e.get_ids().iter().zip(e.get_attention_mask()).enumerate() {
                ids[row * width + t] = i64::from(id);
                mask[row * width + t] = i64::from(m);
            }
        }
        let shape = [batch.len(), width];
        let inputs = ort::inputs![
            "input_ids" => Tensor::from_array((shape, ids))?,
            "attention_mask" => Tensor::from_array((shape, mask))?,
        ];
        let mut session = session.lock().map_err(|_| EmbedError::Poisoned)?;
        let outputs = session.run(inputs)?;
        let (_, values) = outputs["embeddings"].try_extract_tensor::<f32>()?;
        Ok(values
            .chunks_exact(self.spec.hidden)
            .map(<[f32]>::to_vec)
            .collect())
    }
}

/// The texts' indexes grouped into forward passes, from the texts' token
/// counts: sorted by length, at most [`MAX_ROWS`] texts and
/// [`MAX_BATCH_TOKENS`] tokens (padding included) per batch.
///
/// Int8: one text per pass. Its activations are quantized with one scale
/// per pass, so a text's vector then depends on that text alone (not on
/// the texts batched beside it: 0.990 cosine between the two otherwise),
/// is closer to fp32, and a query, embedded alone, is quantized the way its
/// documents were. It costs nothing measurable: a text is already
/// ~170 rows of each product, and there is no padding.
fn batches(lengths: &[usize], precision: Precision) -> Vec<Vec<usize>> {
    let rows = match precision {
        Precision::Fp32 => MAX_ROWS,
        Precision::Int8 => 1,
    };
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        // Sorted ascending: this text is the batch's longest.
        let width = lengths[i].max(1);
        if !current.is_empty()
            && (current.len() == rows || (current.len() + 1) * width > MAX_BATCH_TOKENS)
        {
            out.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The tokens the forward passes over texts of these token counts compute,
/// padding included (one [`LocalEmbedder::embed`] call in `precision`).
pub fn padded_tokens(lengths: &[usize], precision: Precision) -> usize {
    batches(lengths, precision)
        .iter()
        .map(|b| b.len() * b.iter().map(|&i| lengths[i]).max().unwrap_or(0))
        .sum()
}

/// The embedder port over [`LocalEmbedder`]: each call runs on tokio's
/// blocking pool.
#[async_trait::async_trait]
impl weft_core::ports::Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        LocalEmbedder::model_id(self)
    }
    fn dimension(&self) -> usize {
        LocalEmbedder::dimension(self)
    }
    async fn embed(&self, texts: &[String]) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        self.run(texts, false).await
    }
    async fn embed_queries(
        &self,
        queries: &[String],
    ) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        self.run(queries, true).await
    }
}

impl LocalEmbedder {
    /// Embeds on tokio's blocking pool, as chunks or as queries.
    async fn run(
        &self,
        texts: &[String],
        queries: bool,
    ) -> weft_core::ports::PortResult<Vec<Vec<f32>>> {
        const COMPONENT: &str = "embedder (local model)";
        let (model, texts) = (self.clone(), texts.to_vec());
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            if queries {
                model.embed_queries(&refs)
            } else {
                model.embed(&refs)
            }
        })
        .await
        // The embedding thread panicked.
        .map_err(|e| weft_core::ports::PortError::internal(COMPONENT, e))?
        .map_err(|e| weft_core::ports::PortError::new(e.kind(), COMPONENT, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_every_text_once_sorted_and_capped() {
        let lengths: Vec<usize> = (0..200).map(|i| (i * 37) % 256 + 1).collect();
        let plan = batches(&lengths, Precision::Fp32);
        let mut seen: Vec<usize> = plan.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
        let mut previous = 0;
        for batch in &plan {
            let widths: Vec<usize> = batch.iter().map(|&i| lengths[i]).collect();
            assert!(widths.windows(2).all(|w| w[0] <= w[1]), "sorted");
            assert!(widths[0] >= previous, "batches in length order");
            previous = *widths.last().unwrap();
            assert!(batch.len() <= MAX_ROWS);
            assert!(batch.len() * previous <= MAX_BATCH_TOKENS);
        }
        // Sorted batching pads little: 12.7% here, where lengths are spread
        // evenly over 1..=256 (in input order, batches of 32 would pad 94%).
        let real: usize = lengths.iter().sum();
        assert_eq!(padded_tokens(&lengths, Precision::Fp32), 28_546);
        assert_eq!(real, 25_332);
        assert!(batches(&[], Precision::Fp32).is_empty());
        // Int8: one text per pass, shortest first, no padding.
        let one = batches(&lengths, Precision::Int8);
        assert_eq!(one.len(), lengths.len());
        assert!(one.windows(2).all(|w| lengths[w[0][0]] <= lengths[w[1][0]]));
        assert_eq!(padded_tokens(&lengths, Precision::Int8), real);
    }
}
