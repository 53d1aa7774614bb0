//! Learned query adapters: what weft learned about one model's queries
//! (issue 34), applied to queries only.
//!
//! Two kinds. A *map* is a linear map over the model's query vectors: a
//! query `q` becomes `W q / |W q|`. A *query encoder* is the model with its
//! top layers' weights changed for queries (a [`WeightDelta`] added to
//! them): the query costs the same forward pass, in a second ONNX session.
//! Chunks are embedded untouched either way, so an adapter never changes
//! what an index stores and never asks for a re-index. An adapter is
//! trained for one model's vector space, by `tools/train/` on public code
//! and documentation that no evaluation set uses (`tools/train/README.md`),
//! and built into weft: the default install has it without fetching
//! anything.
//!
//! `embedding.query_adapter` chooses: `auto` (weft's default: the adapter
//! trained for the loaded model, if weft has one: `weft-query-4` for
//! MiniLM), `none` (the model's own query vectors) or an adapter by name.
//! (A program loading the model itself starts from [`AdapterChoice::Off`].)
//!
//! `weft-query-4`, MiniLM's top two layers fine-tuned for queries and taken
//! 0.35 of the way from the model's weights to the tuned ones, gains on all
//! twelve dev corpora (bench/RESULTS.md, "Issue 34, fourth step"): the only
//! one that passes the bar for a default (no dev corpus loses more than
//! .005 nDCG@10). The others stay for those who name them: `weft-query-3`,
//! the same change taken halfway, gains more on most corpora but loses .013
//! on redux toolkit (one of its 28 queries from rank 1 to 2); `weft-query-1`,
//! a map, gains most on Java, effect and Hugo's docs but loses on Node.js's
//! docs, rxjs and redux toolkit; `weft-query-2`, the same map taken halfway
//! back to the identity, loses only on rxjs (.005 hybrid) and redux toolkit
//! (.001).

use std::sync::Arc;

use crate::graph::WeightDelta;

/// A learned query adapter: a map over query vectors or a query encoder.
#[derive(Clone, PartialEq)]
pub struct QueryAdapter {
    name: &'static str,
    model: &'static str,
    dimension: usize,
    learned: Learned,
}

/// What an adapter learned.
#[derive(Clone, PartialEq)]
enum Learned {
    /// A linear map: row-major `dimension × dimension`.
    Map(Vec<f32>),
    /// Changes to the model's weights, for the query encoder.
    Encoder(Arc<WeightDelta>),
}

/// How a built-in adapter is stored.
#[derive(Clone, Copy)]
enum Stored {
    /// A matrix: little-endian f32, row-major.
    Map,
    /// A safetensors file of weight changes (F16), taken `scale` of the way.
    Encoder {
        /// How much of the learned change the encoder applies.
        scale: f32,
    },
}

impl std::fmt::Debug for QueryAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryAdapter")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .finish()
    }
}

/// An adapter built into weft: its name, the model id it was trained for,
/// the dimension and its file.
struct BuiltIn {
    name: &'static str,
    model: &'static str,
    dimension: usize,
    stored: Stored,
    bytes: &'static [u8],
}

/// What one epoch of `train_query_encoder.py --final --epochs 1 --lr 5e-5
/// --ship-out F` changed in MiniLM's layers 4 and 5, in f16 (7 MB): the
/// query encoders below take part of it.
const MINILM_QUERY_ENCODER: &[u8] =
    include_bytes!("../learned/all-MiniLM-L6-v2.query-encoder.safetensors");

/// The adapters weft ships; `auto` takes the first one trained for the
/// loaded model. Their training commands, data and figures are in
/// `tools/train/README.md` and bench/RESULTS.md.
const BUILT_IN: &[BuiltIn] = &[
    // 0.35 of what one epoch changed (the largest share that loses on no
    // dev corpus; bench/RESULTS.md, "Issue 34, fourth step").
    BuiltIn {
        name: "weft-query-4",
        model: "all-MiniLM-L6-v2",
        dimension: 384,
        stored: Stored::Encoder { scale: 0.35 },
        bytes: MINILM_QUERY_ENCODER,
    },
    // Half of it: more gain on most corpora, −.013 on redux toolkit.
    BuiltIn {
        name: "weft-query-3",
        model: "all-MiniLM-L6-v2",
        dimension: 384,
        stored: Stored::Encoder { scale: 0.5 },
        bytes: MINILM_QUERY_ENCODER,
    },
    // `train_query_adapter.py --final --shrunk-out F --shrink 0.5`: I + D/2.
    BuiltIn {
        name: "weft-query-2",
        model: "all-MiniLM-L6-v2",
        dimension: 384,
        stored: Stored::Map,
        bytes: include_bytes!("../learned/weft-query-2.f32"),
    },
    // `train_query_adapter.py --final`: I + D.
    BuiltIn {
        name: "weft-query-1",
        model: "all-MiniLM-L6-v2",
        dimension: 384,
        stored: Stored::Map,
        bytes: include_bytes!("../learned/weft-query-1.f32"),
    },
];

/// Which adapter to load (`embedding.query_adapter`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AdapterChoice {
    /// The adapter trained for the loaded model, if weft has one.
    Auto,
    /// None: the model's own query vectors (the default of [`crate::LoadOptions`];
    /// weft's configuration defaults to `auto`).
    #[default]
    Off,
    /// This adapter, which must be trained for the loaded model.
    Named(String),
}

impl AdapterChoice {
    /// Reads `embedding.query_adapter`: `none`, `auto` or a name.
    pub fn parse(setting: &str) -> Self {
        match setting.trim() {
            "auto" => AdapterChoice::Auto,
            "" | "none" => AdapterChoice::Off,
            name => AdapterChoice::Named(name.to_owned()),
        }
    }
}

/// The names of the adapters weft ships, for messages and `--help`.
pub fn built_in_names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|b| b.name).collect()
}

impl QueryAdapter {
    /// Resolves `choice` for the model `model_id` of `dimension`: `Ok(None)`
    /// when no adapter applies, an error naming what is wrong when a named
    /// adapter does not exist or was trained for another model.
    pub fn resolve(
        choice: &AdapterChoice,
        model_id: &str,
        dimension: usize,
    ) -> Result<Option<Self>, String> {
        let found = match choice {
            AdapterChoice::Off => return Ok(None),
            AdapterChoice::Auto => match BUILT_IN
                .iter()
                .find(|b| b.model == model_id && b.dimension == dimension)
            {
                Some(b) => b,
                None => return Ok(None),
            },
            AdapterChoice::Named(name) => {
                let Some(b) = BUILT_IN.iter().find(|b| b.name == name) else {
                    return Err(format!(
                        "no query adapter named {name:?}: weft has {} (or `auto`, `none`)",
                        built_in_names().join(", ")
                    ));
                };
                if b.model != model_id || b.dimension != dimension {
                    return Err(format!(
                        "query adapter {name:?} was trained for {} ({} dimensions), not for {model_id} ({dimension})",
                        b.model, b.dimension
                    ));
                }
                b
            }
        };
        Self::from_bytes(found).map(Some)
    }

    fn from_bytes(b: &BuiltIn) -> Result<Self, String> {
        match b.stored {
            Stored::Map => Self::from_matrix(b.name, b.model, b.dimension, b.bytes),
            Stored::Encoder { scale } => {
                let delta = WeightDelta::parse(b.bytes)
                    .map_err(|e| format!("query adapter {}: {e}", b.name))?;
                Ok(Self {
                    name: b.name,
                    model: b.model,
                    dimension: b.dimension,
                    learned: Learned::Encoder(Arc::new(delta.scaled(scale))),
                })
            }
        }
    }

    /// An adapter from a matrix file's bytes (little-endian f32, row-major,
    /// `dimension × dimension`): the built-in ones, and a candidate being
    /// measured before it is built in (`eval-sweep --query-adapter`).
    pub fn from_matrix(
        name: &'static str,
        model: &'static str,
        dimension: usize,
        bytes: &[u8],
    ) -> Result<Self, String> {
        if bytes.len() != dimension * dimension * 4 {
            return Err(format!(
                "query adapter {name}: {} bytes, not a {dimension}×{dimension} f32 matrix",
                bytes.len()
            ));
        }
        let matrix = bytes
            .chunks_exact(4)
            .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            .collect();
        Ok(Self {
            name,
            model,
            dimension,
            learned: Learned::Map(matrix),
        })
    }

    /// Its name, e.g. `weft-query-2`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The model id it was trained for.
    pub fn model(&self) -> &'static str {
        self.model
    }

    /// A query encoder's changes to the model's weights; `None` for a map.
    pub fn encoder_delta(&self) -> Option<Arc<WeightDelta>> {
        match &self.learned {
            Learned::Encoder(delta) => Some(Arc::clone(delta)),
            Learned::Map(_) => None,
        }
    }

    /// Maps one query vector: `W q`, scaled to unit length. A query
    /// encoder's vector (it is made by the changed model), or a vector of
    /// another length (the embedder checks the dimension when it loads the
    /// adapter), is returned as it is.
    pub fn apply(&self, query: &[f32]) -> Vec<f32> {
        let Learned::Map(matrix) = &self.learned else {
            return query.to_vec();
        };
        if query.len() != self.dimension {
            return query.to_vec();
        }
        let mut out: Vec<f32> = matrix
            .chunks_exact(self.dimension)
            .map(|row| row.iter().zip(query).map(|(w, x)| w * x).sum())
            .collect();
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > f32::EPSILON {
            out.iter_mut().for_each(|x| *x /= norm);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in adapter `name`, resolved for MiniLM.
    fn minilm(name: &str) -> QueryAdapter {
        QueryAdapter::resolve(&AdapterChoice::parse(name), "all-MiniLM-L6-v2", 384)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn auto_finds_the_adapter_of_the_model_and_none_for_others() {
        let a = QueryAdapter::resolve(&AdapterChoice::Auto, "all-MiniLM-L6-v2", 384)
            .unwrap()
            .expect("MiniLM has one");
        assert_eq!(a.name(), "weft-query-4");
        assert!(a.encoder_delta().is_some());
        for (model, dim) in [("all-mpnet-base-v2", 768), ("bge-small-en", 384)] {
            assert_eq!(
                QueryAdapter::resolve(&AdapterChoice::Auto, model, dim).unwrap(),
                None
            );
        }
        assert_eq!(
            QueryAdapter::resolve(&AdapterChoice::Off, "all-MiniLM-L6-v2", 384).unwrap(),
            None
        );
    }

    #[test]
    fn a_named_adapter_must_exist_and_fit_the_model() {
        let e = QueryAdapter::resolve(&AdapterChoice::parse("nope"), "all-MiniLM-L6-v2", 384)
            .unwrap_err();
        assert!(
            e.contains("no query adapter named \"nope\"")
                && e.contains("weft-query-4, weft-query-3, weft-query-2, weft-query-1"),
            "{e}"
        );
        let e = QueryAdapter::resolve(
            &AdapterChoice::parse("weft-query-1"),
            "all-mpnet-base-v2",
            768,
        )
        .unwrap_err();
        assert!(e.contains("trained for all-MiniLM-L6-v2"), "{e}");
        assert_eq!(AdapterChoice::parse(" auto "), AdapterChoice::Auto);
        assert_eq!(AdapterChoice::parse("none"), AdapterChoice::Off);
    }

    #[test]
    fn applying_keeps_unit_length_and_moves_the_vector() {
        let a = minilm("weft-query-2");
        assert!(a.encoder_delta().is_none());
        let mut q = vec![0.0f32; 384];
        q[0] = 0.6;
        q[1] = 0.8;
        let y = a.apply(&q);
        let norm: f32 = y.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
        let cos: f32 = y.iter().zip(&q).map(|(a, b)| a * b).sum();
        // Learned, so not the identity; trained close to it (|W - I| is
        // penalised), so the query keeps most of its direction.
        assert!(cos < 0.99999 && cos > 0.5, "{cos}");
        assert_eq!(a.apply(&[1.0, 0.0]), vec![1.0, 0.0]);
    }

    #[test]
    fn weft_query_2_is_weft_query_1_halfway_to_the_identity() {
        let (one, two) = (minilm("weft-query-1"), minilm("weft-query-2"));
        let (Learned::Map(one), Learned::Map(two)) = (&one.learned, &two.learned) else {
            panic!("both are maps");
        };
        for (i, (a, b)) in one.iter().zip(two).enumerate() {
            let eye = if i % 385 == 0 { 1.0 } else { 0.0 };
            assert!(
                (eye + (a - eye) / 2.0 - b).abs() < 1e-6,
                "entry {i}: {a} {b}"
            );
        }
    }

    #[test]
    fn the_query_encoders_change_the_top_two_layers_of_minilm() {
        let a = minilm("weft-query-3");
        let delta = a.encoder_delta().expect("a query encoder");
        // weft-query-4 takes 0.35 of the learned change, weft-query-3 0.5.
        let four = minilm("weft-query-4")
            .encoder_delta()
            .expect("a query encoder");
        assert_eq!(four.names(), delta.names());
        assert_eq!(
            *four,
            WeightDelta::parse(MINILM_QUERY_ENCODER)
                .unwrap()
                .scaled(0.35)
        );
        assert_eq!(
            *delta,
            WeightDelta::parse(MINILM_QUERY_ENCODER)
                .unwrap()
                .scaled(0.5)
        );
        assert_ne!(*four, *delta);
        let names = delta.names();
        // Every weight of layers 4 and 5 (16 each), nothing else.
        assert_eq!(names.len(), 32, "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("encoder.layer.4.") || n.starts_with("encoder.layer.5.")),
            "{names:?}"
        );
        // A query encoder's vectors come from the model: apply leaves them.
        assert_eq!(a.apply(&[0.6, 0.8]), vec![0.6, 0.8]);
        let e = QueryAdapter::resolve(
            &AdapterChoice::parse("weft-query-3"),
            "all-mpnet-base-v2",
            768,
        )
        .unwrap_err();
        assert!(e.contains("trained for all-MiniLM-L6-v2"), "{e}");
    }
}
