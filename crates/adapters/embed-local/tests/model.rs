//! The local embedder with the real all-MiniLM-L6-v2 and all-mpnet-base-v2
//! weights, run by the real ONNX Runtime library.
//!
//! The model directories are `WEFT_MODEL_DIR` (MiniLM) and
//! `WEFT_MPNET_MODEL_DIR`, else `tools/fetch-model.sh`'s defaults;
//! `tools/test.sh` fetches both and the runtime. `WEFT_REFERENCE_PYTHON` is
//! a Python with numpy, safetensors and tokenizers for the reference forward
//! pass (`tools/test.sh` sets it up); without it, `python3` is tried.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use weft_embed_local::{
    AdapterChoice, Architecture, DEFAULT_MAX_TOKENS, INT8_RECIPE, LoadError, LoadOptions,
    LocalEmbedder, Precision, Purpose, QueryAdapter,
};

fn model_dir() -> PathBuf {
    std::env::var_os("WEFT_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/weft/models/all-MiniLM-L6-v2")
        })
}

fn mpnet_dir() -> PathBuf {
    std::env::var_os("WEFT_MPNET_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/weft/models/all-mpnet-base-v2")
        })
}

fn embedder() -> &'static LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        LocalEmbedder::load(&model_dir(), DEFAULT_MAX_TOKENS).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn mpnet() -> &'static LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        LocalEmbedder::load(&mpnet_dir(), DEFAULT_MAX_TOKENS).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

const TEXTS: &[&str] = &[
    "How do I parse a configuration file?",
    "Reads settings from weft.toml and environment variables, validating every key.",
    "The cat sat on the mat.",
    "fn main() { println!(\"hello\"); }",
];

/// The vectors of `tools/reference_embed.py` (numpy, float64) for `texts`.
fn reference(dir: &Path, texts: &[&str]) -> Vec<Vec<f64>> {
    reference_with(&[], dir, texts)
}

/// [`reference`], with the script's `flags` (e.g. `--delta FILE`) first.
fn reference_with(flags: &[&str], dir: &Path, texts: &[&str]) -> Vec<Vec<f64>> {
    let python = std::env::var("WEFT_REFERENCE_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tools/reference_embed.py"
    );
    let out = Command::new(&python)
        .arg(script)
        .args(flags)
        .arg(dir)
        .arg(DEFAULT_MAX_TOKENS.to_string())
        .args(texts)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e}"));
    assert!(
        out.status.success(),
        "reference failed (see tools/test.sh for its venv): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("reference prints JSON")
}

/// The largest difference between one of weft's vectors and the reference's.
fn max_abs_diff(got: &[f32], expected: &[f64]) -> f64 {
    got.iter()
        .zip(expected)
        .map(|(a, b)| (f64::from(*a) - b).abs())
        .fold(0.0, f64::max)
}

/// Chunks embedded by `adapted` get the untouched model's vectors, so an
/// index needs no re-embedding whatever the query adapter.
fn assert_chunks_untouched(adapted: &LocalEmbedder, texts: &[&str]) {
    let plain = embedder().embed(texts).unwrap();
    for (a, b) in adapted.embed(texts).unwrap().iter().zip(&plain) {
        assert!(cosine(a, b) > 0.99999);
    }
}

fn assert_matches_reference(model: &LocalEmbedder, dir: &Path, dimension: usize) {
    // A long text too: truncated at max_tokens, and MPNet's relative
    // positions beyond the exact buckets.
    let long =
        "Splits the input at every separator, trims each part and drops empty ones. ".repeat(30);
    let mut texts = TEXTS.to_vec();
    texts.push(&long);
    let expected = reference(dir, &texts);
    let got = model.embed(&texts).unwrap();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert_eq!(g.len(), dimension);
        let max_diff = max_abs_diff(g, e);
        assert!(max_diff < 1e-4, "max abs difference {max_diff}");
    }
}

#[test]
fn matches_an_independent_reference_forward_pass() {
    assert_matches_reference(embedder(), &model_dir(), 384);
}

#[test]
fn mpnet_matches_an_independent_reference_forward_pass() {
    assert_eq!(mpnet().spec().architecture, Architecture::MpNet);
    assert_matches_reference(mpnet(), &mpnet_dir(), 768);
}

#[test]
fn mpnet_vectors_ignore_padding_and_keep_their_order() {
    let texts: Vec<String> = (0..9)
        .map(|i| format!("entry {i}: {}", "tokens of varying length ".repeat(i * 3)))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = mpnet().embed(&refs).unwrap();
    for (i, text) in refs.iter().enumerate().step_by(4) {
        let alone = mpnet().embed(&[text]).unwrap();
        let diff = alone[0]
            .iter()
            .zip(&together[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            diff < 1e-5,
            "text {i}: padding or order changed the vector by {diff}"
        );
    }
    let related = cosine(&together[1], &together[2]);
    let question = mpnet()
        .embed(&["How do I parse a configuration file?", TEXTS[1], TEXTS[2]])
        .unwrap();
    assert!(
        cosine(&question[0], &question[1]) > cosine(&question[0], &question[2]) + 0.1,
        "config question vs config code, vs cat"
    );
    assert!(related > 0.5, "{related}");
}

#[test]
fn vectors_are_unit_length_and_meaningful() {
    let v = embedder().embed(TEXTS).unwrap();
    for vector in &v {
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    let related = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    assert!(
        related > unrelated + 0.1,
        "config question vs config code {related}, vs cat {unrelated}"
    );
}

#[test]
fn batch_padding_does_not_change_a_vector() {
    let alone = embedder().embed(&[TEXTS[2]]).unwrap();
    let padded = embedder().embed(&[TEXTS[2], TEXTS[1]]).unwrap();
    let diff = alone[0]
        .iter()
        .zip(&padded[0])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-5, "padding changed the vector by {diff}");
}

#[test]
fn long_texts_are_truncated_not_refused() {
    let long = "the quick brown fox jumps over the lazy dog ".repeat(200);
    let same_start = format!("{long} and then something else entirely different at the very end");
    let v = embedder().embed(&[&long, &same_start]).unwrap();
    assert!(
        cosine(&v[0], &v[1]) > 0.9999,
        "text past the truncation point is ignored"
    );
    assert!(embedder().embed(&[]).unwrap().is_empty());
}

#[test]
fn a_missing_model_names_the_fetch_command() {
    let dir = std::env::temp_dir().join("weft-no-model-here");
    let err = LocalEmbedder::load(&dir, DEFAULT_MAX_TOKENS).unwrap_err();
    assert!(matches!(
        err,
        LoadError::Missing {
            file: "config.json",
            ..
        }
    ));
    let message = err.to_string();
    assert!(
        message.contains("tools/fetch-model.sh") && message.contains("weft-no-model-here"),
        "{message}"
    );
}

#[test]
fn weights_that_do_not_fit_the_model_fail_at_load_whatever_is_built_then() {
    // MiniLM with one tensor renamed (same header length, so the file
    // stays well formed): the query encoder's delta (layers 4 and 5) still
    // fits, but no graph can be built from these weights. The word
    // embeddings are checked from the header; a layer's weight when the
    // graph is built, which is at load whichever sessions that builds.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("all-MiniLM-L6-v2");
    std::fs::create_dir(&dir).unwrap();
    for file in ["config.json", "tokenizer.json"] {
        std::fs::copy(model_dir().join(file), dir.join(file)).unwrap();
    }
    let original = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    let header = u64::from_le_bytes(original[..8].try_into().unwrap()) as usize + 8;
    for (from, to) in [
        (
            "embeddings.word_embeddings.weight",
            "embeddings.word_embeddingz.weight",
        ),
        (
            "encoder.layer.0.attention.self.query.weight",
            "encoder.layer.0.attention.self.querz.weight",
        ),
    ] {
        let mut weights = original.clone();
        let at = weights[..header]
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .unwrap_or_else(|| panic!("MiniLM has {from}"));
        weights[at..at + to.len()].copy_from_slice(to.as_bytes());
        std::fs::write(dir.join("model.safetensors"), weights).unwrap();
        for purpose in [Purpose::All, Purpose::Queries] {
            let options = LoadOptions::new(DEFAULT_MAX_TOKENS)
                .query_adapter(AdapterChoice::Auto)
                .purpose(purpose);
            let err = LocalEmbedder::load_with(&dir, &options).unwrap_err();
            assert!(
                matches!(
                    err,
                    LoadError::Invalid {
                        file: "model.safetensors",
                        ..
                    }
                ),
                "{from}, {purpose:?}: {err}"
            );
            assert!(err.to_string().contains(from), "{err}");
        }
    }
}

#[test]
fn max_tokens_beyond_the_model_is_refused() {
    let err = LocalEmbedder::load(&model_dir(), 4096).unwrap_err();
    assert!(err.to_string().contains("max_tokens 4096"), "{err}");
}

#[test]
fn vectors_come_back_in_input_order_whatever_the_lengths() {
    let texts: Vec<String> = (0..20)
        .map(|i| format!("item {i} {}", "word ".repeat((i * 7) % 13)))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let together = embedder().embed(&refs).unwrap();
    for (i, text) in refs.iter().enumerate().step_by(6) {
        let alone = embedder().embed(&[text]).unwrap();
        assert!(cosine(&alone[0], &together[i]) > 0.99999, "text {i} moved");
    }
}

fn int8(save_graph: Option<PathBuf>) -> LocalEmbedder {
    let mut options = LoadOptions::new(DEFAULT_MAX_TOKENS).precision(Precision::Int8);
    options.save_graph = save_graph;
    LocalEmbedder::load_with(&model_dir(), &options).unwrap_or_else(|e| panic!("{e}"))
}

/// The int8 graph is really quantized (ONNX Runtime runs its int8 kernel,
/// the vectors differ from fp32's) and stays close to fp32: every vector
/// within a small angle, unit length, the same nearest texts.
#[test]
fn int8_runs_integer_kernels_and_stays_close_to_fp32() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("int8.onnx");
    let model = int8(Some(graph.clone()));
    assert_eq!(model.precision(), Precision::Int8);
    assert_eq!(
        model.tag(),
        format!("all-MiniLM-L6-v2@{DEFAULT_MAX_TOKENS}+{INT8_RECIPE}")
    );
    assert_eq!(
        embedder().tag(),
        format!("all-MiniLM-L6-v2@{DEFAULT_MAX_TOKENS}")
    );
    let saved = std::fs::read(&graph).expect("the optimized graph was written");
    let has = |op: &str| saved.windows(op.len()).any(|w| w == op.as_bytes());
    assert!(
        has("DynamicQuantizeMatMul"),
        "int8 kernels in the graph ONNX Runtime runs"
    );

    let texts: Vec<String> = TEXTS
        .iter()
        .map(|t| (*t).to_owned())
        .chain((0..24).map(|i| {
            format!(
                "fn handler_{i}(request: Request) -> Response {{ route(request, {i}).await }} {}",
                "// retries the call on timeout ".repeat(i % 5)
            )
        }))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let exact = embedder().embed(&refs).unwrap();
    let quantized = model.embed(&refs).unwrap();
    let mut identical = true;
    for (i, (a, b)) in exact.iter().zip(&quantized).enumerate() {
        let norm: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "text {i}: norm {norm}");
        let cos = cosine(a, b);
        assert!(cos > 0.98, "text {i}: cosine to fp32 {cos}");
        identical &= a == b;
    }
    assert!(!identical, "int8 vectors are not fp32's");
    // The same nearest text for each of the first texts, in both precisions.
    let nearest = |vectors: &[Vec<f32>], i: usize| {
        (0..vectors.len())
            .filter(|&j| j != i)
            .max_by(|&x, &y| {
                cosine(&vectors[i], &vectors[x]).total_cmp(&cosine(&vectors[i], &vectors[y]))
            })
            .unwrap()
    };
    for i in 0..TEXTS.len() {
        assert_eq!(nearest(&exact, i), nearest(&quantized, i), "text {i}");
    }
    // Activations are quantized per forward pass, and a pass holds one
    // text: a text's vector does not depend on the texts embedded with it.
    let alone = model.embed(&[refs[1]]).unwrap();
    let together = model.embed(&refs).unwrap();
    let moved = cosine(&alone[0], &together[1]);
    assert!(moved > 0.99999, "alone vs batched: {moved}");
}

#[test]
fn the_query_encoder_matches_the_reference_with_its_delta_and_leaves_chunks_alone() {
    // `embedding.query_adapter = "auto"` (the default) loads weft's learned
    // adapter for MiniLM, weft-query-4: the model with its top two layers
    // changed, for queries only.
    let encoder = LocalEmbedder::load_with(
        &model_dir(),
        &LoadOptions::new(DEFAULT_MAX_TOKENS).query_adapter(AdapterChoice::Auto),
    )
    .unwrap();
    assert_eq!(encoder.query_adapter_name(), Some("weft-query-4"));
    let plain = embedder();
    let delta = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/learned/all-MiniLM-L6-v2.query-encoder.safetensors"
    );
    let texts = TEXTS.to_vec();
    // Chunks first: the query encoder's session is built at the first
    // query, and chunks never need it.
    assert_chunks_untouched(&encoder, &texts);
    // Queries: what the independent numpy forward pass gives with 0.35 of
    // the delta added to the model's weights.
    let expected = reference_with(&["--delta", delta, "--scale", "0.35"], &model_dir(), &texts);
    let got = encoder.embed_queries(&texts).unwrap();
    for ((g, e), raw) in got.iter().zip(&expected).zip(&plain.embed(&texts).unwrap()) {
        let max_diff = max_abs_diff(g, e);
        assert!(max_diff < 1e-4, "max abs difference {max_diff}");
        // ... which is not the model's own vector.
        assert!(cosine(g, raw) < 0.9999, "the encoder moved the query");
    }
    assert_chunks_untouched(&encoder, &texts);
}

#[test]
fn a_model_loaded_for_queries_builds_what_queries_use_and_the_rest_when_asked() {
    let options = LoadOptions::new(DEFAULT_MAX_TOKENS).query_adapter(AdapterChoice::Auto);
    let all = LocalEmbedder::load_with(&model_dir(), &options).unwrap();
    let queries =
        LocalEmbedder::load_with(&model_dir(), &options.clone().purpose(Purpose::Queries)).unwrap();
    // For queries: the query encoder's session now, not the model's own
    // (a search or the query service never embeds a chunk).
    assert_eq!(queries.sessions_built(), (false, Some(true)));
    // For everything (the default): the model's own now, the encoder's
    // at the first query.
    assert_eq!(all.sessions_built(), (true, Some(false)));
    let texts = TEXTS.to_vec();
    let (q, a) = (
        queries.embed_queries(&texts).unwrap(),
        all.embed_queries(&texts).unwrap(),
    );
    assert_eq!(all.sessions_built(), (true, Some(true)));
    for (q, a) in q.iter().zip(&a) {
        assert!(cosine(q, a) > 0.99999, "the same query encoder");
    }
    // Either embeds chunks: the model's own session is built when first
    // asked, and its vectors are the model's.
    assert_eq!(queries.sessions_built(), (false, Some(true)));
    let (qc, ac) = (queries.embed(&texts).unwrap(), all.embed(&texts).unwrap());
    assert_eq!(queries.sessions_built(), (true, Some(true)));
    for (q, a) in qc.iter().zip(&ac) {
        assert!(cosine(q, a) > 0.99999, "the same model");
    }
    // Without a query encoder, queries use the model's own session: built
    // at load whatever the purpose.
    let plain = LocalEmbedder::load_with(
        &model_dir(),
        &LoadOptions::new(DEFAULT_MAX_TOKENS).purpose(Purpose::Queries),
    )
    .unwrap();
    assert_eq!(plain.sessions_built(), (true, None));
    // Clones share the sessions built.
    let copy = queries.clone();
    assert_eq!(copy.sessions_built(), (true, Some(true)));
}

#[test]
fn the_query_encoder_runs_in_int8_close_to_fp32() {
    // `embedding.precision = "int8"` with the default adapter: the query
    // encoder's session is built in int8 too, at the first query.
    let options = LoadOptions::new(DEFAULT_MAX_TOKENS).query_adapter(AdapterChoice::Auto);
    let int8 = LocalEmbedder::load_with(&model_dir(), &options.clone().precision(Precision::Int8))
        .unwrap();
    let fp32 = LocalEmbedder::load_with(&model_dir(), &options).unwrap();
    assert_eq!(int8.query_adapter_name(), Some("weft-query-4"));
    let texts = TEXTS.to_vec();
    let plain = int8.embed(&texts).unwrap();
    for ((q8, q32), raw) in int8
        .embed_queries(&texts)
        .unwrap()
        .iter()
        .zip(&fp32.embed_queries(&texts).unwrap())
        .zip(&plain)
    {
        // As close as int8 keeps the model's own vectors (int8 test above).
        let close = cosine(q8, q32);
        assert!(close > 0.98, "int8 against fp32 query encoder: {close}");
        assert!(cosine(q8, raw) < 0.9999, "the encoder moved the query");
    }
}

#[test]
fn the_query_adapter_maps_queries_and_leaves_chunks_alone() {
    // `weft-query-2`: a learned linear map over the model's query vectors.
    let adapted = LocalEmbedder::load_with(
        &model_dir(),
        &LoadOptions::new(DEFAULT_MAX_TOKENS).query_adapter(AdapterChoice::parse("weft-query-2")),
    )
    .unwrap();
    assert_eq!(adapted.query_adapter_name(), Some("weft-query-2"));
    let plain = embedder();
    assert_eq!(plain.query_adapter_name(), None);

    let texts = [
        "Returns the number of elements in this collection.",
        "public int size() {\n    return elements.length;\n}",
    ];
    assert_chunks_untouched(&adapted, &texts);
    // Queries: the adapter's map of the model's own vector.
    let raw = plain.embed_queries(&texts[..1]).unwrap().remove(0);
    assert_eq!(raw, plain.embed(&texts[..1]).unwrap().remove(0));
    let mapped = adapted.embed_queries(&texts[..1]).unwrap().remove(0);
    let adapter = QueryAdapter::resolve(
        &AdapterChoice::parse("weft-query-2"),
        "all-MiniLM-L6-v2",
        384,
    )
    .unwrap()
    .unwrap();
    assert!(cosine(&mapped, &adapter.apply(&raw)) > 0.99999);
    assert!(
        cosine(&mapped, &raw) < 0.9999,
        "the adapter moved the query"
    );

    // A named adapter of another model is refused, naming the setting.
    let err = LocalEmbedder::load_with(
        &mpnet_dir(),
        &LoadOptions::new(DEFAULT_MAX_TOKENS)
            .query_adapter(AdapterChoice::Named("weft-query-1".into())),
    )
    .unwrap_err();
    assert!(matches!(err, LoadError::QueryAdapter(_)), "{err}");
    assert!(err.to_string().contains("embedding.query_adapter"), "{err}");
}
