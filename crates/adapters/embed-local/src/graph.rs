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

/// ONNX Runtime's own operators (`DynamicQuantizeMatMul`).
const MICROSOFT_DOMAIN: &str = "com.microsoft";

/// The encoder family, from `config.json`'s `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// BERT: absolute position embeddings and token-type embeddings.
    Bert,
    /// MPNet: positions from the padding index plus relative-position buckets.
    MpNet,
}

/// The arithmetic of the encoder's linear layers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// 32-bit floats throughout: the model's weights as stored.
    #[default]
    Fp32,
    /// Five of the six linear layers of every encoder layer (query, key and
    /// value as one product, attention output, feed-forward in) as 8-bit
    /// integer products: weights quantized per output channel (symmetric,
    /// int8) when the graph is built, activations when it runs (uint8, one
    /// scale per forward pass: the unsigned × signed form of VNNI and AMX).
    /// The feed-forward output, embeddings, layer norms, attention scores
    /// and softmax, GELU and pooling stay fp32.
    Int8,
}

/// The version of the int8 recipe ([`Precision::Int8`]): it enters the
/// index identity, so vectors of another recipe are never mixed with these.
pub const INT8_RECIPE: &str = "int8.1";

impl Precision {
    /// `fp32` or `int8`, as `embedding.precision` names it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Int8 => "int8",
        }
    }

    /// What the precision adds to the model's part of the index identity:
    /// nothing for fp32 (the model's own vectors), `+int8.1` for int8.
    pub fn identity_suffix(self) -> String {
        match self {
            Precision::Fp32 => String::new(),
            Precision::Int8 => format!("+{INT8_RECIPE}"),
        }
    }

    /// Whether this CPU multiplies int8 faster than fp32: it has 8-bit
    /// dot-product instructions (AVX-512 VNNI or AVX-VNNI on x86-64; every
    /// CPU with AMX has AVX-512 VNNI too). Without them ONNX Runtime's int8
    /// kernels gain little over fp32, and the unsigned × signed products of
    /// AVX2 can saturate.
    pub fn int8_is_fast() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512vnni")
                || std::arch::is_x86_feature_detected!("avxvnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The precision of `auto`: int8 where [`Precision::int8_is_fast`],
    /// else fp32.
    pub fn fastest() -> Precision {
        if Precision::int8_is_fast() {
            Precision::Int8
        } else {
            Precision::Fp32
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fp32" => Ok(Precision::Fp32),
            "int8" => Ok(Precision::Int8),
            other => Err(format!("unknown precision {other:?} (fp32 or int8)")),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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

/// Learned changes to some of a model's weights (a query encoder's top
/// layers, [`crate::query_adapter`]): a safetensors file of F16 or F32
/// tensors named as in `model.safetensors` (without a `bert.` prefix), each
/// added to the model's tensor of the same name and shape when the graph is
/// built.
#[derive(Clone, PartialEq)]
pub struct WeightDelta {
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl std::fmt::Debug for WeightDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.tensors.keys().collect();
        names.sort();
        f.debug_struct("WeightDelta")
            .field("tensors", &names)
            .finish()
    }
}

impl WeightDelta {
    /// Reads a safetensors file's bytes: F16 or F32 tensors.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let mut tensors = HashMap::new();
        for (name, view) in file.tensors() {
            let values: Vec<f32> = match view.dtype() {
                safetensors::Dtype::F32 => view
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
                safetensors::Dtype::F16 => view
                    .data()
                    .chunks_exact(2)
                    .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                    .collect(),
                other => return Err(format!("{name}: {other:?} (F16 or F32 expected)")),
            };
            tensors.insert(name, (view.shape().to_vec(), values));
        }
        if tensors.is_empty() {
            return Err("no tensors".into());
        }
        Ok(Self { tensors })
    }

    /// This delta times `factor`: a built-in query encoder is the learned
    /// change taken part of the way from the model's weights (WiSE-FT).
    pub fn scaled(&self, factor: f32) -> Self {
        let tensors = self
            .tensors
            .iter()
            .map(|(name, (shape, values))| {
                let values = values.iter().map(|v| v * factor).collect();
                (name.clone(), (shape.clone(), values))
            })
            .collect();
        Self { tensors }
    }

    /// Checks that it fits the model in `bytes` (a `model.safetensors` of
    /// `spec`'s architecture): every tensor it changes is one of the
    /// model's, of the same shape. Cheap: reads the file's header only.
    pub fn check_fits(&self, spec: &Spec, bytes: &[u8]) -> Result<()> {
        Weights::new(bytes, spec.architecture, Some(self)).map(drop)
    }

    /// The names of the tensors it changes.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.tensors.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// Checks that `bytes` is a `model.safetensors` of `spec`'s architecture as
/// far as its header tells (its word embeddings, with or without the
/// architecture's prefix). Cheap; building the graph checks every tensor.
pub fn check_model(spec: &Spec, bytes: &[u8]) -> Result<()> {
    Weights::new(bytes, spec.architecture, None).map(drop)
}

/// An IEEE 754 half-precision value (its bits) as f32: exact.
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match exponent {
        // Zero and subnormals: mantissa · 2^-24.
        0 => {
            let value = mantissa as f32 / 16_777_216.0;
            return if sign == 0 { value } else { -value };
        }
        // Infinities and NaNs.
        0x1f => 0x7f80_0000 | (mantissa << 13),
        _ => ((exponent + 127 - 15) << 23) | (mantissa << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// The weights of `model.safetensors`, looked up with or without a
/// `bert.` / `mpnet.` prefix, with a [`WeightDelta`] added if one is given.
struct Weights<'a> {
    tensors: SafeTensors<'a>,
    prefix: &'static str,
    delta: Option<&'a WeightDelta>,
}

impl<'a> Weights<'a> {
    fn new(
        bytes: &'a [u8],
        architecture: Architecture,
        delta: Option<&'a WeightDelta>,
    ) -> Result<Self, String> {
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
        if let Some(delta) = delta {
            // Every changed tensor must be one of the model's, of its shape.
            for (name, (shape, _)) in &delta.tensors {
                let full = format!("{prefix}{name}");
                let view = tensors.tensor(&full).map_err(|_| {
                    format!("the delta changes {name}, which the model does not have")
                })?;
                if view.shape() != shape.as_slice() {
                    return Err(format!(
                        "the delta's {name} has shape {shape:?}, the model's {:?}",
                        view.shape()
                    ));
                }
            }
        }
        Ok(Weights {
            tensors,
            prefix,
            delta,
        })
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
        let mut values: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some((_, change)) = self.delta.and_then(|d| d.tensors.get(name)) {
            values.iter_mut().zip(change).for_each(|(v, d)| *v += d);
        }
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
    precision: Precision,
}

/// `[out, in]` weights (a linear layer's, as stored) as int8 `[in, out]`
/// (transposed, for `x · W`) with one scale per output channel: symmetric,
/// the channel's largest magnitude maps to 127.
pub fn quantize_per_channel(weight: &[f32], outputs: usize, inputs: usize) -> (Vec<i8>, Vec<f32>) {
    let mut quantized = vec![0i8; outputs * inputs];
    let mut scales = vec![0f32; outputs];
    for o in 0..outputs {
        let row = &weight[o * inputs..(o + 1) * inputs];
        let largest = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
        scales[o] = scale;
        for (i, v) in row.iter().enumerate() {
            quantized[i * outputs + o] = (v / scale).round().clamp(-127.0, 127.0) as i8;
        }
    }
    (quantized, scales)
}

fn ort_error(e: ort::Error) -> String {
    e.to_string()
}

impl Builder {
    /// Adds `op` over `inputs` and returns the name of its output.
    fn op(&mut self, op: &str, inputs: &[&str], attributes: Vec<Attribute>) -> Result<String> {
        self.op_in(ONNX_DOMAIN, op, inputs, attributes)
    }

    /// Adds `op` of the operator set `domain`.
    fn op_in(
        &mut self,
        domain: &str,
        op: &str,
        inputs: &[&str],
        attributes: Vec<Attribute>,
    ) -> Result<String> {
        self.next += 1;
        let output = format!("{op}_{}", self.next);
        let node = Node::new(
            op,
            domain,
            format!("n{}", self.next),
            inputs,
            [output.as_str()],
            attributes,
        )
        .map_err(ort_error)?;
        self.graph.add_node(node).map_err(ort_error)?;
        Ok(output)
    }

    /// Adds `op` with several outputs.
    fn op_n(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: usize,
        attributes: Vec<Attribute>,
    ) -> Result<Vec<String>> {
        self.next += 1;
        let names: Vec<String> = (0..outputs)
            .map(|i| format!("{op}_{}_{i}", self.next))
            .collect();
        let node = Node::new(
            op,
            ONNX_DOMAIN,
            format!("n{}", self.next),
            inputs,
            &names,
            attributes,
        )
        .map_err(ort_error)?;
        self.graph.add_node(node).map_err(ort_error)?;
        Ok(names)
    }

    /// An initializer `name` of `shape` holding `values` (f32, i64, i8 …).
    fn tensor<T: ort::value::PrimitiveTensorElementType + Copy + std::fmt::Debug + 'static>(
        &mut self,
        name: &str,
        shape: &[usize],
        values: &[T],
    ) -> Result<String> {
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let mut tensor =
            Tensor::<T>::new(&Allocator::default(), Shape::new(dims)).map_err(ort_error)?;
        tensor.extract_tensor_mut().1.copy_from_slice(values);
        self.graph
            .add_initializer(name, tensor, false)
            .map_err(ort_error)?;
        Ok(name.to_owned())
    }

    fn f32_tensor(&mut self, name: &str, shape: &[usize], values: &[f32]) -> Result<String> {
        self.tensor(name, shape, values)
    }

    fn i64_tensor(&mut self, name: &str, values: &[i64]) -> Result<String> {
        self.tensor(name, &[values.len()], values)
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

    /// `x · Wᵀ + b` for the linear layer `name` (`[out, in]` weights), in
    /// fp32 whatever the precision.
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

    /// The linear layers `names` over the same input `x`, each `inputs` →
    /// `outputs`, in the graph's precision. Int8: one product for all of
    /// them (their weights side by side, so `x` is quantized once and the
    /// product is wider), split after; ONNX Runtime's
    /// `DynamicQuantizeMatMul` quantizes `x` to uint8 as it runs (one scale
    /// and zero point per forward pass) and multiplies it by the int8
    /// weights ([`quantize_per_channel`]) with the CPU's 8-bit dot-product
    /// instructions.
    fn linears(
        &mut self,
        w: &Weights,
        x: &str,
        names: &[&str],
        inputs: usize,
        outputs: usize,
    ) -> Result<Vec<String>> {
        if self.precision == Precision::Fp32 {
            return names
                .iter()
                .map(|name| self.linear(w, x, name, inputs, outputs))
                .collect();
        }
        let mut weight = Vec::with_capacity(names.len() * outputs * inputs);
        let mut bias = Vec::with_capacity(names.len() * outputs);
        for name in names {
            weight.extend(w.shaped(&format!("{name}.weight"), &[outputs, inputs])?);
            bias.extend(w.shaped(&format!("{name}.bias"), &[outputs])?);
        }
        let y = self.quantized_linear(x, &names.join("+"), &weight, &bias, inputs)?;
        if names.len() == 1 {
            return Ok(vec![y]);
        }
        let sizes = self.ints(&vec![outputs as i64; names.len()])?;
        self.op_n(
            "Split",
            &[&y, &sizes],
            names.len(),
            vec![Attribute::new("axis", -1i64).map_err(ort_error)?],
        )
    }

    /// `x · Wᵀ + b` as an int8 product, for `[out, in]` weights `weight`.
    fn quantized_linear(
        &mut self,
        x: &str,
        name: &str,
        weight: &[f32],
        bias: &[f32],
        inputs: usize,
    ) -> Result<String> {
        let width = bias.len();
        let (quantized, scales) = quantize_per_channel(weight, width, inputs);
        let wq = self.tensor(&format!("{name}.weight_q"), &[inputs, width], &quantized)?;
        let ws = self.f32_tensor(&format!("{name}.weight_scale"), &[width], &scales)?;
        let b = self.f32_tensor(&format!("{name}.bias"), &[width], bias)?;
        self.op_in(
            MICROSOFT_DOMAIN,
            "DynamicQuantizeMatMul",
            &[x, &wq, &ws, "", &b],
            vec![],
        )
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
/// texts of at most `max_tokens` tokens, its linear layers in `precision`.
///
/// With `delta`, its tensors are added to the model's first (a query
/// encoder's weights); a tensor the model lacks, or of another shape, is an
/// error.
pub fn build(
    spec: &Spec,
    bytes: &[u8],
    max_tokens: usize,
    precision: Precision,
    delta: Option<&WeightDelta>,
) -> Result<Model> {
    let w = Weights::new(bytes, spec.architecture, delta)?;
    let mut b = Builder {
        graph: Graph::new().map_err(ort_error)?,
        next: 0,
        constants: HashMap::new(),
        precision,
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
        let projected = b.linears(
            &w,
            &x,
            &[&names.query, &names.key, &names.value],
            hidden,
            hidden,
        )?;
        let heads_of = |b: &mut Builder, projected: &str, perm: Vec<i64>| -> Result<String> {
            let split = b.op("Reshape", &[projected, &split], vec![])?;
            b.op("Transpose", &[&split], vec![attr_list("perm", perm)?])
        };
        let q = heads_of(&mut b, &projected[0], vec![0, 2, 1, 3])?;
        let k = heads_of(&mut b, &projected[1], vec![0, 2, 3, 1])?;
        let v = heads_of(&mut b, &projected[2], vec![0, 2, 1, 3])?;
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
        let attended = b
            .linears(&w, &context, &[&names.output], hidden, hidden)?
            .swap_remove(0);
        let residual = b.op("Add", &[&attended, &x], vec![])?;
        x = b.layer_norm(&w, &residual, &names.attention_norm, spec)?;

        let p = format!("encoder.layer.{layer}.");
        let inner = b
            .linears(
                &w,
                &x,
                &[&format!("{p}intermediate.dense")],
                hidden,
                spec.intermediate,
            )?
            .swap_remove(0);
        // GELU, exact: x/2 · (1 + erf(x/√2)).
        let scaled = b.op("Div", &[&inner, &sqrt2], vec![])?;
        let erf = b.op("Erf", &[&scaled], vec![])?;
        let erf = b.op("Add", &[&erf, &one_f], vec![])?;
        let halved = b.op("Mul", &[&inner, &half], vec![])?;
        let activated = b.op("Mul", &[&halved, &erf], vec![])?;
        // The feed-forward output stays fp32 in every precision: its input,
        // GELU's output, has the largest outliers of the encoder (in a few
        // channels), and one scale per text loses the small values: in int8
        // it took the mean cosine to fp32 from .9978 to .9947 on guava's
        // chunks (bench/RESULTS.md).
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

    let mut model = Model::new([
        Opset::new(ONNX_DOMAIN, 17).map_err(ort_error)?,
        Opset::new(MICROSOFT_DOMAIN, 1).map_err(ort_error)?,
    ])
    .map_err(ort_error)?;
    model.set_graph(b.graph).map_err(ort_error)?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_values_convert_exactly() {
        for (bits, value) in [
            (0x3c00, 1.0f32),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x7bff, 65504.0),
            (0x0400, 1.0 / 16384.0),          // the smallest normal, 2^-14
            (0x0001, 1.0 / 16_777_216.0),     // the smallest subnormal, 2^-24
            (0x83ff, -1023.0 / 16_777_216.0), // the largest subnormal, negative
            (0x0000, 0.0),
        ] {
            assert_eq!(f16_to_f32(bits), value, "{bits:#06x}");
        }
        assert!(f16_to_f32(0x8000).is_sign_negative());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
    }

    /// A safetensors file of F32 tensors.
    fn f32_file(tensors: &[(&str, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
            .collect();
        let views: Vec<(&str, safetensors::tensor::TensorView)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((name, shape, _), b)| {
                let view =
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b)
                        .unwrap();
                (*name, view)
            })
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn a_delta_is_added_to_the_model_and_must_fit_it() {
        let model = f32_file(&[
            (
                "embeddings.word_embeddings.weight",
                vec![2, 2],
                vec![0.0; 4],
            ),
            ("encoder.layer.0.output.dense.bias", vec![2], vec![1.0, 2.0]),
        ]);
        let delta = |name: &str, shape: Vec<usize>, values: Vec<f32>| {
            WeightDelta::parse(&f32_file(&[(name, shape, values)])).unwrap()
        };
        let fits = delta(
            "encoder.layer.0.output.dense.bias",
            vec![2],
            vec![0.5, -0.5],
        );
        let w = Weights::new(&model, Architecture::Bert, Some(&fits)).unwrap();
        assert_eq!(
            w.shaped("encoder.layer.0.output.dense.bias", &[2]).unwrap(),
            [1.5, 1.5]
        );
        // Tensors the delta does not name are the model's.
        let (_, words) = w.get("embeddings.word_embeddings.weight").unwrap();
        assert_eq!(words, [0.0; 4]);

        let shape = delta("encoder.layer.0.output.dense.bias", vec![3], vec![0.0; 3]);
        let Err(e) = Weights::new(&model, Architecture::Bert, Some(&shape)) else {
            panic!("a delta of another shape was accepted");
        };
        assert!(e.contains("has shape [3], the model's [2]"), "{e}");
        let missing = delta("encoder.layer.9.output.dense.bias", vec![2], vec![0.0; 2]);
        let Err(e) = Weights::new(&model, Architecture::Bert, Some(&missing)) else {
            panic!("a delta of a tensor the model lacks was accepted");
        };
        assert!(e.contains("which the model does not have"), "{e}");

        // Scaled, it adds that share of the change; check_fits says the same
        // as building would.
        let half = fits.scaled(0.5);
        let w = Weights::new(&model, Architecture::Bert, Some(&half)).unwrap();
        assert_eq!(
            w.shaped("encoder.layer.0.output.dense.bias", &[2]).unwrap(),
            [1.25, 1.75]
        );
        let spec = Spec::parse(
            r#"{"model_type":"bert","hidden_size":2,"num_attention_heads":1,"num_hidden_layers":1,"intermediate_size":2,"max_position_embeddings":8}"#,
        )
        .unwrap();
        assert_eq!(fits.check_fits(&spec, &model), Ok(()));
        let e = missing.check_fits(&spec, &model).unwrap_err();
        assert!(e.contains("which the model does not have"), "{e}");
    }

    #[test]
    fn a_delta_is_read_in_f16_and_f32_and_refuses_other_types() {
        let one = 0x3c00u16.to_le_bytes();
        let halves = [one, one, one].concat();
        let floats: Vec<u8> = [0.5f32, -0.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let file = safetensors::serialize(
            [
                (
                    "a.weight",
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F16, vec![3], &halves)
                        .unwrap(),
                ),
                (
                    "b.bias",
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], &floats)
                        .unwrap(),
                ),
            ],
            None,
        )
        .unwrap();
        let delta = WeightDelta::parse(&file).unwrap();
        assert_eq!(delta.names(), ["a.weight", "b.bias"]);
        assert_eq!(delta.tensors["a.weight"].1, [1.0, 1.0, 1.0]);
        assert_eq!(delta.tensors["b.bias"].1, [0.5, -0.25]);

        let bytes = [1u8, 2];
        let file = safetensors::serialize(
            [(
                "c",
                safetensors::tensor::TensorView::new(safetensors::Dtype::U8, vec![2], &bytes)
                    .unwrap(),
            )],
            None,
        )
        .unwrap();
        let e = WeightDelta::parse(&file).unwrap_err();
        assert!(e.contains("c: U8"), "{e}");
        assert!(WeightDelta::parse(b"not safetensors").is_err());
    }

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
    fn weights_are_quantized_per_output_channel_within_half_a_step() {
        // Two output channels of three inputs, [out, in]; one all zero.
        let weight = [0.5, -1.0, 0.25, 0.0, 0.0, 0.0];
        let (quantized, scales) = quantize_per_channel(&weight, 2, 3);
        assert_eq!(scales[0], 1.0 / 127.0, "the largest magnitude maps to 127");
        assert_eq!(scales[1], 1.0, "an empty channel keeps a usable scale");
        // Transposed to [in, out].
        assert_eq!(quantized, vec![64, 0, -127, 0, 32, 0]);
        for (i, w) in weight[..3].iter().enumerate() {
            let back = f32::from(quantized[i * 2]) * scales[0];
            assert!(
                (back - w).abs() <= scales[0] / 2.0,
                "{w} came back as {back}"
            );
        }
        assert_eq!("int8".parse::<Precision>(), Ok(Precision::Int8));
        assert!("int4".parse::<Precision>().unwrap_err().contains("int4"));
        assert_eq!(Precision::Fp32.identity_suffix(), "");
        assert_eq!(Precision::Int8.identity_suffix(), format!("+{INT8_RECIPE}"));
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
