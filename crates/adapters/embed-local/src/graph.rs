//! The encoders as ONNX graphs, built in memory from a model directory's
//! `config.json` and `model.safetensors` with ONNX Runtime's model editor.
//!
//! Two architectures: BERT (all-MiniLM-L6-v2: absolute positions, token
//! types) and MPNet (all-mpnet-base-v2: positions counted from the padding
//! index, and a relative-position bias from 32 log-spaced buckets added to
//! every layer's attention scores). Both end in mean pooling over the
//! attention mask and L2 normalisation, so the graph maps
//! `input_ids`, `attention_mask` (`[batch, tokens]`, int64) to
//! `embeddings` (`[batch, hidden]`, float32, unit length).
//!
//! The graph uses plain ONNX operators (opset 17); ONNX Runtime's optimiser
//! fuses them into its attention, layer-norm and GELU kernels.
//! `tools/reference_embed.py` computes the same forward passes in numpy,
//! independently, and the tests compare the two.

use std::collections::HashMap;

use ort::editor::{Graph, Model, Node, ONNX_DOMAIN, Opset};
use ort::memory::Allocator;
use ort::operator::Attribute;
use ort::value::{Outlet, Shape, SymbolicDimensions, Tensor, TensorElementType, ValueType};
use safetensors::SafeTensors;
use serde_json::Value;

type Result<T, E = String> = std::result::Result<T, E>;

/// A value added to the attention scores of padding: far below any real
/// score, and finite (no `inf - inf` anywhere).
const MASKED: f32 = -1e9;

/// The encoder family, from `config.json`'s `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// BERT: absolute position embeddings and token-type embeddings.
    Bert,
    /// MPNet: positions from the padding index plus relative-position buckets.
    MpNet,
}

/// What `config.json` says about the encoder.
#[derive(Debug, Clone)]
pub struct Spec {
    /// BERT or MPNet.
    pub architecture: Architecture,
    /// Width of every hidden state (and of the embedding).
    pub hidden: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Width of the feed-forward layer.
    pub intermediate: usize,
    /// Layer-norm epsilon.
    pub eps: f32,
    /// The most tokens a text can have (positions the model knows).
    pub max_tokens: usize,
    /// MPNet: relative-position buckets.
    pub buckets: usize,
}

impl Spec {
    /// Reads the settings of `config.json` (its text).
    pub fn parse(config: &str) -> Result<Spec, String> {
        let v: Value = serde_json::from_str(config).map_err(|e| e.to_string())?;
        let int = |key: &str| -> Result<usize, String> {
            v.get(key)
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| format!("no {key}"))
        };
        let architecture = match v.get("model_type").and_then(Value::as_str) {
            Some("bert") => Architecture::Bert,
            Some("mpnet") => Architecture::MpNet,
            other => {
                return Err(format!(
                    "model_type {other:?} is not supported (bert or mpnet)"
                ));
            }
        };
        match v.get("hidden_act").and_then(Value::as_str) {
            Some("gelu") | None => {}
            Some(other) => return Err(format!("hidden_act {other:?} is not supported (gelu)")),
        }
        let (hidden, heads) = (int("hidden_size")?, int("num_attention_heads")?);
        if heads == 0 || hidden % heads != 0 {
            return Err(format!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            ));
        }
        let positions = int("max_position_embeddings").unwrap_or(512);
        // MPNet counts positions from its padding index + 1 (RoBERTa style).
        let max_tokens = match architecture {
            Architecture::Bert => positions,
            Architecture::MpNet => positions.saturating_sub(2),
        };
        let eps = v
            .get("layer_norm_eps")
            .and_then(Value::as_f64)
            .unwrap_or(1e-12) as f32;
        Ok(Spec {
            architecture,
            hidden,
            heads,
            layers: int("num_hidden_layers")?,
            intermediate: int("intermediate_size")?,
            eps,
            max_tokens,
            buckets: int("relative_attention_num_buckets").unwrap_or(32),
        })
    }

    /// Floating-point operations of one forward pass over `rows` texts of
    /// `tokens` tokens each (padding included): the matrix products, two
    /// operations per multiply-add.
    pub fn flops(&self, rows: usize, tokens: usize) -> f64 {
        let (h, i, n) = (
            self.hidden as f64,
            self.intermediate as f64,
            (rows * tokens) as f64,
        );
        let linear = n * (4.0 * h * h + 2.0 * h * i);
        let attention = 2.0 * rows as f64 * (tokens * tokens) as f64 * h;
        2.0 * self.layers as f64 * (linear + attention)
    }
}

/// The weights of `model.safetensors`, looked up with or without a
/// `bert.` / `mpnet.` prefix.
struct Weights<'a> {
    tensors: SafeTensors<'a>,
    prefix: &'static str,
}

impl<'a> Weights<'a> {
    fn new(bytes: &'a [u8], architecture: Architecture) -> Result<Self, String> {
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let names: Vec<String> = tensors.names().into_iter().map(str::to_owned).collect();
        let with = |prefix: &str| {
            names
                .iter()
                .any(|n| *n == format!("{prefix}embeddings.word_embeddings.weight"))
        };
        let prefix = match architecture {
            Architecture::Bert if with("bert.") => "bert.",
            Architecture::MpNet if with("mpnet.") => "mpnet.",
            _ if with("") => "",
            _ => return Err("no embeddings.word_embeddings.weight".into()),
        };
        Ok(Weights { tensors, prefix })
    }

    /// The tensor `name` as f32 values, with its shape.
    fn get(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>), String> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .tensors
            .tensor(&full)
            .map_err(|e| format!("{full}: {e}"))?;
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(format!(
                "{full}: {:?} weights are not supported (F32)",
                view.dtype()
            ));
        }
        let values = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok((view.shape().to_vec(), values))
    }

    /// The tensor `name`, checked to have `shape`.
    fn shaped(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let (found, values) = self.get(name)?;
        if found != shape {
            return Err(format!(
                "{}{name}: shape {found:?}, expected {shape:?}",
                self.prefix
            ));
        }
        Ok(values)
    }
}

/// Names, nodes and initializers of the graph being built.
struct Builder {
    graph: Graph,
    next: usize,
    constants: HashMap<Vec<i64>, String>,
}

fn ort_error(e: ort::Error) -> String {
    e.to_string()
}

impl Builder {
    /// Adds `op` over `inputs` and returns the name of its output.
    fn op(&mut self, op: &str, inputs: &[&str], attributes: Vec<Attribute>) -> Result<String> {
        self.next += 1;
        let output = format!("{op}_{}", self.next);
        let node = Node::new(
            op,
            ONNX_DOMAIN,
            format!("n{}", self.next),
            inputs,
            [output.as_str()],
            attributes,
        )
        .map_err(ort_error)?;
        self.graph.add_node(node).map_err(ort_error)?;
        Ok(output)
    }

    fn f32_tensor(&mut self, name: &str, shape: &[usize], values: &[f32]) -> Result<String> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let mut tensor =
            Tensor::<f32>::new(&Allocator::default(), Shape::new(dims)).map_err(ort_error)?;
        tensor.extract_tensor_mut().1.copy_from_slice(values);
        self.graph
            .add_initializer(name, tensor, false)
            .map_err(ort_error)?;
        Ok(name.to_owned())
    }

    fn i64_tensor(&mut self, name: &str, values: &[i64]) -> Result<String> {
        let mut tensor =
            Tensor::<i64>::new(&Allocator::default(), Shape::new([values.len() as i64]))
                .map_err(ort_error)?;
        tensor.extract_tensor_mut().1.copy_from_slice(values);
        self.graph
            .add_initializer(name, tensor, false)
            .map_err(ort_error)?;
        Ok(name.to_owned())
    }

    /// A 1-D int64 constant, shared by every use of the same values.
    fn ints(&mut self, values: &[i64]) -> Result<String> {
        if let Some(name) = self.constants.get(values) {
            return Ok(name.clone());
        }
        let name = format!("const_{}", self.constants.len());
        self.i64_tensor(&name, values)?;
        self.constants.insert(values.to_vec(), name.clone());
        Ok(name)
    }

    /// A float constant of one element (broadcast by the operators).
    fn scalar(&mut self, name: &str, value: f32) -> Result<String> {
        self.f32_tensor(name, &[1], &[value])
    }

    /// A weight from the model file, as stored.
    fn weight(&mut self, w: &Weights, name: &str, shape: &[usize]) -> Result<String> {
        let values = w.shaped(name, shape)?;
        self.f32_tensor(name, shape, &values)
    }

    /// `x · Wᵀ + b` for the linear layer `name` (`[out, in]` weights).
    fn linear(
        &mut self,
        w: &Weights,
        x: &str,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<String> {
        let weight = w.shaped(&format!("{name}.weight"), &[outputs, inputs])?;
        let mut transposed = vec![0f32; weight.len()];
        for o in 0..outputs {
            for i in 0..inputs {
                transposed[i * outputs + o] = weight[o * inputs + i];
            }
        }
        let wt = self.f32_tensor(&format!("{name}.weight_t"), &[inputs, outputs], &transposed)?;
        let b = self.weight(w, &format!("{name}.bias"), &[outputs])?;
        let product = self.op("MatMul", &[x, &wt], vec![])?;
        self.op("Add", &[&product, &b], vec![])
    }

    fn layer_norm(&mut self, w: &Weights, x: &str, name: &str, spec: &Spec) -> Result<String> {
        let gamma = self.weight(w, &format!("{name}.weight"), &[spec.hidden])?;
        let beta = self.weight(w, &format!("{name}.bias"), &[spec.hidden])?;
        self.op(
            "LayerNormalization",
            &[x, &gamma, &beta],
            vec![
                Attribute::new("axis", -1i64).map_err(ort_error)?,
                Attribute::new("epsilon", spec.eps).map_err(ort_error)?,
            ],
        )
    }
}

/// The names of one layer's weights, which differ between BERT and MPNet.
struct LayerNames {
    query: String,
    key: String,
    value: String,
    output: String,
    attention_norm: String,
}

impl LayerNames {
    fn of(architecture: Architecture, layer: usize) -> Self {
        let p = format!("encoder.layer.{layer}.attention.");
        match architecture {
            Architecture::Bert => LayerNames {
                query: format!("{p}self.query"),
                key: format!("{p}self.key"),
                value: format!("{p}self.value"),
                output: format!("{p}output.dense"),
                attention_norm: format!("{p}output.LayerNorm"),
            },
            Architecture::MpNet => LayerNames {
                query: format!("{p}attn.q"),
                key: format!("{p}attn.k"),
                value: format!("{p}attn.v"),
                output: format!("{p}attn.o"),
                attention_norm: format!("{p}LayerNorm"),
            },
        }
    }
}

/// MPNet's relative-position bucket (`MPNetEncoder.relative_position_bucket`
/// in Hugging Face transformers): exact buckets for distances below 8 in
/// each direction, log-spaced ones up to 128, then the last bucket.
pub fn relative_position_bucket(relative: i64, buckets: usize) -> i64 {
    const MAX_DISTANCE: f64 = 128.0;
    let half = (buckets / 2) as i64;
    let n = -relative;
    let mut bucket = if n < 0 { half } else { 0 };
    let n = n.abs();
    let exact = half / 2;
    if n < exact {
        bucket += n;
    } else {
        let large = exact
            + ((n as f64 / exact as f64).ln() / (MAX_DISTANCE / exact as f64).ln()
                * (half - exact) as f64) as i64;
        bucket += large.min(half - 1);
    }
    bucket
}

/// Builds the encoder of `spec` from the safetensors file `bytes`, for
/// texts of at most `max_tokens` tokens.
pub fn build(spec: &Spec, bytes: &[u8], max_tokens: usize) -> Result<Model> {
    let w = Weights::new(bytes, spec.architecture)?;
    let mut b = Builder {
        graph: Graph::new().map_err(ort_error)?,
        next: 0,
        constants: HashMap::new(),
    };
    let int_input = |name: &str| {
        Outlet::new(
            name,
            ValueType::Tensor {
                ty: TensorElementType::Int64,
                shape: Shape::new([-1, -1]),
                dimension_symbols: SymbolicDimensions::new(["batch".into(), "tokens".into()]),
            },
        )
    };
    b.graph
        .set_inputs([int_input("input_ids"), int_input("attention_mask")])
        .map_err(ort_error)?;
    b.graph
        .set_outputs([Outlet::new(
            "embeddings",
            ValueType::Tensor {
                ty: TensorElementType::Float32,
                shape: Shape::new([-1, spec.hidden as i64]),
                dimension_symbols: SymbolicDimensions::new(["batch".into(), String::new()]),
            },
        )])
        .map_err(ort_error)?;

    let (hidden, heads) = (spec.hidden, spec.heads);
    let head_size = hidden / heads;
    let attr = |name: &str, v: i64| Attribute::new(name, v).map_err(ort_error);
    let attr_list = |name: &str, v: Vec<i64>| Attribute::new(name, v).map_err(ort_error);

    // The number of tokens, as a 1-D tensor [tokens].
    let shape = b.op("Shape", &["input_ids"], vec![])?;
    let (one, two, zero) = (b.ints(&[1])?, b.ints(&[2])?, b.ints(&[0])?);
    let tokens = b.op("Slice", &[&shape, &one, &two], vec![])?;
    let mask = b.op("Cast", &["attention_mask"], vec![attr("to", 1)?])?; // float

    // Embeddings.
    let (vocab, _) = w.get("embeddings.word_embeddings.weight")?;
    let words = b.weight(&w, "embeddings.word_embeddings.weight", &[vocab[0], hidden])?;
    let word_vectors = b.op("Gather", &[&words, "input_ids"], vec![])?;
    let (positions_shape, positions) = w.get("embeddings.position_embeddings.weight")?;
    if positions_shape.len() != 2 || positions_shape[1] != hidden {
        return Err(format!(
            "embeddings.position_embeddings.weight: shape {positions_shape:?}"
        ));
    }
    let embedded = match spec.architecture {
        Architecture::Bert => {
            // Every text is one segment: token type 0 for all, folded into
            // the position table.
            let types = w.shaped(
                "embeddings.token_type_embeddings.weight",
                &[
                    w.get("embeddings.token_type_embeddings.weight")?.0[0],
                    hidden,
                ],
            )?;
            let table: Vec<f32> = positions
                .iter()
                .enumerate()
                .map(|(i, p)| p + types[i % hidden])
                .collect();
            let table = b.f32_tensor("positions_and_type0", &positions_shape, &table)?;
            let position_vectors = b.op("Slice", &[&table, &zero, &tokens, &zero], vec![])?;
            b.op("Add", &[&word_vectors, &position_vectors], vec![])?
        }
        Architecture::MpNet => {
            // Position of a real token: its 1-based index + the padding
            // index (1); of padding: the padding index.
            let ones = b.op("Cast", &["attention_mask"], vec![attr("to", 7)?])?; // int64
            let axis = b.ints(&[1])?;
            let counted = b.op("CumSum", &[&ones, &axis], vec![])?;
            let counted = b.op("Mul", &[&counted, &ones], vec![])?;
            let ids = b.op("Add", &[&counted, &one], vec![])?;
            let table = b.f32_tensor("positions", &positions_shape, &positions)?;
            let position_vectors = b.op("Gather", &[&table, &ids], vec![])?;
            b.op("Add", &[&word_vectors, &position_vectors], vec![])?
        }
    };
    let mut x = b.layer_norm(&w, &embedded, "embeddings.LayerNorm", spec)?;

    // The additive attention bias: padding masked, [batch, 1, 1, tokens],
    // plus MPNet's relative positions, [1, heads, tokens, tokens].
    let one_f = b.scalar("one", 1.0)?;
    let masked_f = b.scalar("masked", MASKED)?;
    let padding = b.op("Sub", &[&one_f, &mask], vec![])?;
    let padding = b.op("Mul", &[&padding, &masked_f], vec![])?;
    let axes_12 = b.ints(&[1, 2])?;
    let mut bias = b.op("Unsqueeze", &[&padding, &axes_12], vec![])?;
    if spec.architecture == Architecture::MpNet {
        let span = max_tokens as i64;
        let range: Vec<i64> = (0..span).collect();
        let range = b.i64_tensor("token_index", &range)?;
        let index = b.op("Slice", &[&range, &zero, &tokens], vec![])?;
        let row = b.op("Unsqueeze", &[&index, &zero], vec![])?;
        let column = b.op("Unsqueeze", &[&index, &one], vec![])?;
        // relative[i][j] = j - i, shifted to index the bucket table.
        let relative = b.op("Sub", &[&row, &column], vec![])?;
        let offset = b.ints(&[span - 1])?;
        let relative = b.op("Add", &[&relative, &offset], vec![])?;
        let table: Vec<i64> = (-(span - 1)..span)
            .map(|r| relative_position_bucket(r, spec.buckets))
            .collect();
        let table = b.i64_tensor("relative_buckets", &table)?;
        let buckets = b.op("Gather", &[&table, &relative], vec![])?;
        let weights = b.weight(
            &w,
            "encoder.relative_attention_bias.weight",
            &[spec.buckets, heads],
        )?;
        let per_head = b.op("Gather", &[&weights, &buckets], vec![])?; // [t, t, heads]
        let per_head = b.op(
            "Transpose",
            &[&per_head],
            vec![attr_list("perm", vec![2, 0, 1])?],
        )?;
        let per_head = b.op("Unsqueeze", &[&per_head, &zero], vec![])?;
        bias = b.op("Add", &[&bias, &per_head], vec![])?;
    }

    let split = b.ints(&[0, 0, heads as i64, head_size as i64])?;
    let merge = b.ints(&[0, 0, hidden as i64])?;
    let scale = b.scalar("scale", 1.0 / (head_size as f32).sqrt())?;
    let half = b.scalar("half", 0.5)?;
    let sqrt2 = b.scalar("sqrt2", std::f32::consts::SQRT_2)?;
    for layer in 0..spec.layers {
        let names = LayerNames::of(spec.architecture, layer);
        let heads_of = |b: &mut Builder, name: &str, perm: Vec<i64>| -> Result<String> {
            let projected = b.linear(&w, &x, name, hidden, hidden)?;
            let split = b.op("Reshape", &[&projected, &split], vec![])?;
            b.op("Transpose", &[&split], vec![attr_list("perm", perm)?])
        };
        let q = heads_of(&mut b, &names.query, vec![0, 2, 1, 3])?;
        let k = heads_of(&mut b, &names.key, vec![0, 2, 3, 1])?;
        let v = heads_of(&mut b, &names.value, vec![0, 2, 1, 3])?;
        let scores = b.op("MatMul", &[&q, &k], vec![])?;
        let scores = b.op("Mul", &[&scores, &scale], vec![])?;
        let scores = b.op("Add", &[&scores, &bias], vec![])?;
        let probs = b.op("Softmax", &[&scores], vec![attr("axis", -1)?])?;
        let context = b.op("MatMul", &[&probs, &v], vec![])?;
        let context = b.op(
            "Transpose",
            &[&context],
            vec![attr_list("perm", vec![0, 2, 1, 3])?],
        )?;
        let context = b.op("Reshape", &[&context, &merge], vec![])?;
        let attended = b.linear(&w, &context, &names.output, hidden, hidden)?;
        let residual = b.op("Add", &[&attended, &x], vec![])?;
        x = b.layer_norm(&w, &residual, &names.attention_norm, spec)?;

        let p = format!("encoder.layer.{layer}.");
        let inner = b.linear(
            &w,
            &x,
            &format!("{p}intermediate.dense"),
            hidden,
            spec.intermediate,
        )?;
        // GELU, exact: x/2 · (1 + erf(x/√2)).
        let scaled = b.op("Div", &[&inner, &sqrt2], vec![])?;
        let erf = b.op("Erf", &[&scaled], vec![])?;
        let erf = b.op("Add", &[&erf, &one_f], vec![])?;
        let halved = b.op("Mul", &[&inner, &half], vec![])?;
        let activated = b.op("Mul", &[&halved, &erf], vec![])?;
        let out = b.linear(
            &w,
            &activated,
            &format!("{p}output.dense"),
            spec.intermediate,
            hidden,
        )?;
        let residual = b.op("Add", &[&out, &x], vec![])?;
        x = b.layer_norm(&w, &residual, &format!("{p}output.LayerNorm"), spec)?;
    }

    // Mean over the tokens the mask keeps, then unit length.
    let last = b.ints(&[-1])?;
    let mask3 = b.op("Unsqueeze", &[&mask, &last], vec![])?;
    let kept = b.op("Mul", &[&x, &mask3], vec![])?;
    let summed = b.op("ReduceSum", &[&kept, &one], vec![attr("keepdims", 0)?])?;
    let counts = b.op("ReduceSum", &[&mask3, &one], vec![attr("keepdims", 0)?])?;
    let mean = b.op("Div", &[&summed, &counts], vec![])?;
    b.next += 1;
    let normalise = Node::new(
        "LpNormalization",
        ONNX_DOMAIN,
        format!("n{}", b.next),
        [mean.as_str()],
        ["embeddings"],
        [attr("axis", -1)?, attr("p", 2)?],
    )
    .map_err(ort_error)?;
    b.graph.add_node(normalise).map_err(ort_error)?;

    let mut model =
        Model::new([Opset::new(ONNX_DOMAIN, 17).map_err(ort_error)?]).map_err(ort_error)?;
    model.set_graph(b.graph).map_err(ort_error)?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_mpnet() {
        // Hugging Face's relative_position_bucket(torch.arange(-130, 131)) with 32 buckets.
        let got: Vec<i64> = [-130, -128, -20, -8, -7, -1, 0, 1, 7, 8, 20, 128, 130]
            .iter()
            .map(|&r| relative_position_bucket(r, 32))
            .collect();
        assert_eq!(got, vec![15, 15, 10, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31]);
    }

    #[test]
    fn specs_of_both_families() {
        let bert = Spec::parse(
            r#"{"model_type":"bert","hidden_size":384,"num_attention_heads":12,"num_hidden_layers":6,"intermediate_size":1536,"max_position_embeddings":512,"layer_norm_eps":1e-12}"#,
        )
        .unwrap();
        assert_eq!(
            (bert.architecture, bert.max_tokens),
            (Architecture::Bert, 512)
        );
        // 6 layers × 2 × (4·384² + 2·384·1536) per token, without attention.
        assert_eq!(bert.flops(1, 1) as u64, 21_233_664 + 2 * 6 * 2 * 384);
        let mpnet = Spec::parse(
            r#"{"model_type":"mpnet","hidden_size":768,"num_attention_heads":12,"num_hidden_layers":12,"intermediate_size":3072,"max_position_embeddings":514}"#,
        )
        .unwrap();
        assert_eq!(
            (mpnet.architecture, mpnet.max_tokens),
            (Architecture::MpNet, 512)
        );
        let err = Spec::parse(r#"{"model_type":"gpt2"}"#).unwrap_err();
        assert!(err.contains("gpt2"), "{err}");
    }
}
