// The `tp` dialect: tensor-parallel transformer blocks.
//
// This file is the only definition of the dialect. It is embedded into every tpc binary at build
// time, loaded with mlirLoadIRDLDialects, and read by dialect/tpc_irdl_gen.c to generate the
// op-name constants and typed accessors in tp_ops.h. docs/dialect.md documents every op.
//
// Conventions (rely on them when editing):
// - Every operand, result and attribute is named. An SSA constraint value is an equality
//   variable in IRDL, so two slots share one value only when their types must be identical.
// - IRDL 22 has no optional attributes. Attributes that must always be present are listed in
//   `irdl.attributes`; optional ones are declared in the discardable dictionary
//   `tp.optional_attributes` on the `irdl.operation`, whose values are the defaults. An array of
//   strings declares an enumeration whose first element is the default; an empty array, an
//   optional list of mesh axes (absent: none); a symbol reference (`mesh = @none`), an optional
//   mesh (absent by default).
// - Rules IRDL cannot express (shapes, element types, divisibility, mesh axes) live in the C
//   verifier (dialect/tpc_verify*.c), one named rule per message.
irdl.dialect @tp {

  //===--------------------------------------------------------------------===//
  // Types
  //===--------------------------------------------------------------------===//

  // The pending result of an asynchronous collective; consumed by tp.wait.
  irdl.type @future {
    %value = irdl.base "!builtin.tensor"
    irdl.parameters(value: %value)
  }

  //===--------------------------------------------------------------------===//
  // Mesh
  //===--------------------------------------------------------------------===//

  // A named device mesh: ranks are the row-major coordinates of `shape` over `axes`.
  irdl.operation @mesh {
    %name = irdl.base "#builtin.string"
    %axes = irdl.base "#builtin.array"
    %shape = irdl.base "#builtin.dense_array"
    irdl.attributes {"sym_name" = %name, "axes" = %axes, "shape" = %shape}
  }

  //===--------------------------------------------------------------------===//
  // Compute
  //===--------------------------------------------------------------------===//

  // y[M,N] = x[M,K] · w[N,K]ᵀ (+ bias[N]). `chunks` as for the backward ops below.
  irdl.operation @linear attributes {tp.optional_attributes = {
      parallel = ["none", "column", "row"], sequence_parallel = false, partial = false, chunks = 0 : i64}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %bias = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, bias: optional %bias)
    irdl.results(y: %y)
  }

  // y[T,N] = x[T,K] · w[e,N,K]ᵀ for the rows of expert e; rows are sorted by expert and
  // group_sizes counts them. With group_sizes[S*E] for w[E,N,K] the rows form S equal segments
  // (what an expert-parallel rank receives from S peers), each holding its experts' rows in order
  // and then zero padding, whose outputs are zero.
  irdl.operation @grouped_linear attributes {tp.optional_attributes = {
      parallel = ["none", "column", "row", "expert"], sequence_parallel = false, partial = false,
      chunks = 0 : i64}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, group_sizes: %group_sizes)
    irdl.results(y: %y)
  }

  // Gated linear unit: y[...,F] = act(gate) * up from x[...,2F].
  irdl.operation @glu attributes {tp.optional_attributes = {
      interleave = 0 : i64, alpha = 1.702 : f32, limit = 7.0 : f32}} {
    %swiglu = irdl.is "swiglu"
    %geglu = irdl.is "geglu"
    %quick_geglu = irdl.is "quick_geglu"
    %kind = irdl.any_of(%swiglu, %geglu, %quick_geglu)
    %x = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(x: %x)
    irdl.results(y: %y)
    irdl.attributes {"kind" = %kind}
  }

  // y[M,H] = x / sqrt(mean(x²) + eps) * gamma.
  irdl.operation @rmsnorm {
    %eps = irdl.base "#builtin.float"
    %x = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, gamma: %gamma)
    irdl.results(y: %x)
    irdl.attributes {"eps" = %eps}
  }

  // y[M,H] = (x - mean) / sqrt(var + eps) * gamma + beta.
  irdl.operation @layernorm {
    %eps = irdl.base "#builtin.float"
    %x = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    %beta = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, gamma: %gamma, beta: %beta)
    irdl.results(y: %x)
    irdl.attributes {"eps" = %eps}
  }

  // Elementwise c = a + b; the result has lhs's type, rhs has it too or is a rank-1 bias of
  // lhs's last dimension, broadcast over the rows; an f32 lhs (a reduced sum) plus a bias may
  // round once to the bias's type (the verifier checks which).
  irdl.operation @add {
    %t = irdl.base "!builtin.tensor"
    %rhs = irdl.base "!builtin.tensor"
    %result = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %t, rhs: %rhs)
    irdl.results(result: %result)
  }

  // Elementwise c = a * b; all three have one type.
  irdl.operation @mul {
    %t = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %t, rhs: %t)
    irdl.results(result: %t)
  }

  // Rotary position embedding of every head of x[T,H*D] (the Hugging Face convention): per
  // head, y = x*cos + rotate_half(x)*sin with rotate_half(x) = [-x[D/2:], x[:D/2]] and cos,
  // sin[T,D] per token. `inverse` rotates by -angle (rope's gradient).
  irdl.operation @rope attributes {tp.optional_attributes = {inverse = false}} {
    %x = irdl.base "!builtin.tensor"
    %table = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, cos: %table, sin: %table)
    irdl.results(y: %x)
  }

  // Scaled dot-product attention with grouped-query heads over sequences of seq_len tokens:
  // q[T,Hq*D], k and v[T,Hkv*D] with D = head_dim, T = batch * seq_len, Hq a multiple of Hkv
  // (query head h reads key/value head h / (Hq/Hkv)); y[T,Hq*D]. `causal` masks the keys after
  // each query; `scale` 0 means 1/sqrt(D). The optional result lse[T,Hq] (f32) is each row's
  // log-sum-exp of its scaled scores, the softmax statistic tp.attention_grad can take.
  irdl.operation @attention attributes {tp.optional_attributes = {causal = true, scale = 0.0 : f32}} {
    %q = irdl.base "!builtin.tensor"
    %kv = irdl.base "!builtin.tensor"
    %lse = irdl.base "!builtin.tensor"
    %seq_len = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    irdl.operands(q: %q, k: %kv, v: %kv)
    irdl.results(y: %q, lse: optional %lse)
    irdl.attributes {"seq_len" = %seq_len, "head_dim" = %head_dim}
  }

  // tp.attention while decoding with a KV cache: k_cache and v_cache [B*C,Hkv*D] hold C rows per
  // sequence, of which the first cache_len[b] (tensor<Bxi32>) are sequence b's earlier tokens
  // (rotated keys and values). The seq_len new tokens of each sequence sit after them and attend
  // to them first, then to the new keys as tp.attention does. The op reads the caches only: the
  // caller appends k and v.
  irdl.operation @attention_kvcache attributes {tp.optional_attributes = {causal = true, scale = 0.0 : f32}} {
    %q = irdl.base "!builtin.tensor"
    %kv = irdl.base "!builtin.tensor"
    %cache = irdl.base "!builtin.tensor"
    %cache_len = irdl.base "!builtin.tensor"
    %seq_len = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    irdl.operands(q: %q, k: %kv, v: %kv, k_cache: %cache, v_cache: %cache, cache_len: %cache_len)
    irdl.results(y: %q)
    irdl.attributes {"seq_len" = %seq_len, "head_dim" = %head_dim}
  }

  // Writes the seq_len new rows of each of the B sequences into its KV cache: row b*S + i of
  // new[B*S,W] becomes row b*C + cache_len[b] + i of cache[B*C,W] (C rows per sequence), the other
  // rows are the cache's. Run in place (the result in the cache's buffer) it writes only the new rows.
  irdl.operation @kvcache_write {
    %cache = irdl.base "!builtin.tensor"
    %new = irdl.base "!builtin.tensor"
    %cache_len = irdl.base "!builtin.tensor"
    %seq_len = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    irdl.operands(cache: %cache, new: %new, cache_len: %cache_len)
    irdl.results(out: %cache)
    irdl.attributes {"seq_len" = %seq_len, "head_dim" = %head_dim}
  }

  // One token per row of logits[B,V]: the Gumbel-max draw from softmax(logits / temperature)
  // restricted to the row's top_k largest logits and then to its nucleus of mass top_p, with the
  // Philox noise of (seed[b], request[b], position[b], vocabulary id) only, so a row's token never
  // depends on the other rows; temperature <= 0 is greedy (docs/numerics.md, "Sampling").
  irdl.operation @sample {
    %logits = irdl.base "!builtin.tensor"
    %seed = irdl.base "!builtin.tensor"
    %request = irdl.base "!builtin.tensor"
    %position = irdl.base "!builtin.tensor"
    %temperature = irdl.base "!builtin.tensor"
    %top_k = irdl.base "!builtin.tensor"
    %top_p = irdl.base "!builtin.tensor"
    %token = irdl.base "!builtin.tensor"
    irdl.operands(logits: %logits, seed: %seed, request: %request, position: %position,
                  temperature: %temperature, top_k: %top_k, top_p: %top_p)
    irdl.results(token: %token)
  }

  // amax[1] (f32) = max |x| over every element of x, NaN skipped: the per-tensor amax that
  // tp.quantize takes (as its `amax` operand) when x is a shard of the tensor it quantizes.
  irdl.operation @amax {
    %x = irdl.base "!builtin.tensor"
    %amax = irdl.base "!builtin.tensor"
    irdl.operands(x: %x)
    irdl.results(amax: %amax)
  }

  // Casts x[M,K] to a quantized format: data, block or tensor scales, and for NVFP4 the
  // per-tensor global scale. With `amax` (fp8 and nvfp4 only) the per-tensor scale comes from
  // that amax (the whole tensor's, when x is a shard of it) instead of x's own.
  irdl.operation @quantize attributes {tp.optional_attributes = {
      axis = ["rowwise", "columnwise"]}} {
    %fp8_e4m3 = irdl.is "fp8_e4m3"
    %fp8_e5m2 = irdl.is "fp8_e5m2"
    %mxfp8 = irdl.is "mxfp8"
    %nvfp4 = irdl.is "nvfp4"
    %format = irdl.any_of(%fp8_e4m3, %fp8_e5m2, %mxfp8, %nvfp4)
    %x = irdl.base "!builtin.tensor"
    %amax = irdl.base "!builtin.tensor"
    %data = irdl.base "!builtin.tensor"
    %scale = irdl.base "!builtin.tensor"
    %global_scale = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, amax: optional %amax)
    irdl.results(data: %data, scale: %scale, global_scale: optional %global_scale)
    irdl.attributes {"format" = %format}
  }

  // The inverse of tp.quantize.
  irdl.operation @dequantize attributes {tp.optional_attributes = {
      axis = ["rowwise", "columnwise"]}} {
    %fp8_e4m3 = irdl.is "fp8_e4m3"
    %fp8_e5m2 = irdl.is "fp8_e5m2"
    %mxfp8 = irdl.is "mxfp8"
    %nvfp4 = irdl.is "nvfp4"
    %format = irdl.any_of(%fp8_e4m3, %fp8_e5m2, %mxfp8, %nvfp4)
    %data = irdl.base "!builtin.tensor"
    %scale = irdl.base "!builtin.tensor"
    %global_scale = irdl.base "!builtin.tensor"
    %x = irdl.base "!builtin.tensor"
    irdl.operands(data: %data, scale: %scale, global_scale: optional %global_scale)
    irdl.results(x: %x)
    irdl.attributes {"format" = %format}
  }

  // Top-k routing: softmax over logits[T,E], the k largest per token (ties to the lower expert).
  irdl.operation @moe_route attributes {tp.optional_attributes = {normalize = false}} {
    %top_k = irdl.base "#builtin.integer"
    %logits = irdl.base "!builtin.tensor"
    %indices = irdl.base "!builtin.tensor"
    %weights = irdl.base "!builtin.tensor"
    irdl.operands(logits: %logits)
    irdl.results(indices: %indices, weights: %weights)
    irdl.attributes {"top_k" = %top_k}
  }

  // Copies each token once per selected expert into expert-sorted rows y[T*k,H]; row_map[T*k]
  // gives the source slot t*k+j of every row, group_sizes[E] the rows per expert.
  irdl.operation @moe_permute {
    %x = irdl.base "!builtin.tensor"
    %indices = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    %row_map = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, indices: %indices)
    irdl.results(y: %y, group_sizes: %group_sizes, row_map: %row_map)
  }

  // out[t] = Σ_j weights[t,j] · y[row of slot (t,j)], summed in increasing j in f32.
  irdl.operation @moe_unpermute {
    %y = irdl.base "!builtin.tensor"
    %row_map = irdl.base "!builtin.tensor"
    %weights = irdl.base "!builtin.tensor"
    %out = irdl.base "!builtin.tensor"
    irdl.operands(y: %y, row_map: %row_map, weights: %weights)
    irdl.results(out: %out)
  }

  // Expert-parallel dispatch: copies the expert-sorted rows x[R,H] into `buckets` fixed-capacity
  // buckets y[buckets*R, H]; bucket b holds the rows of experts [b*E/buckets, (b+1)*E/buckets)
  // followed by zero rows, ready for an all-to-all along dim 0.
  irdl.operation @moe_bucket {
    %buckets = irdl.base "#builtin.integer"
    %x = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, group_sizes: %group_sizes)
    irdl.results(y: %y)
    irdl.attributes {"buckets" = %buckets}
  }

  // The inverse of tp.moe_bucket: gathers the real rows of every bucket back into expert order.
  irdl.operation @moe_unbucket {
    %buckets = irdl.base "#builtin.integer"
    %x = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, group_sizes: %group_sizes)
    irdl.results(y: %y)
    irdl.attributes {"buckets" = %buckets}
  }

  //===--------------------------------------------------------------------===//
  // Vocabulary: the token embedding and the LM head's cross-entropy (docs/dialect.md,
  // "Embedding and loss"). `parallel = "vocab"` is the plan tp-shard reads (the table's rows split
  // over tp, Megatron's vocab-parallel layers). The optional `mesh` and `axes` mark a per-rank op
  // whose table or head is one group member's share of the vocabulary: member g of the group
  // holds rows [g*V, (g+1)*V) of the logical vocabulary (V the local rows).
  //===--------------------------------------------------------------------===//

  // y[T,H] = table[ids[t]] (ids[T] i32, table[V,H], y of table's dtype). With mesh and axes,
  // tokens whose id lies outside this rank's rows give -0.0, so the sum over the group (in any
  // order) is the lookup, bit for bit.
  irdl.operation @embedding attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false, mesh = @none, axes = []}} {
    %ids = irdl.base "!builtin.tensor"
    %table = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    irdl.operands(ids: %ids, table: %table)
    irdl.results(y: %y)
  }

  // The mean-free LM loss of every token: logits z[t,v] = x[t]·w[v] (rounded to x's dtype, as
  // tp.linear computes them), loss[t] = logsumexp_v z[t,v] - z[t,targets[t]] (f32; +0.0 where
  // targets[t] < 0, an ignored token) and lse[t] the log-sum-exp (f32), which the gradients take.
  // The [T,V] logits are never stored. The sum over the vocabulary runs over C = tp.chunks blocks
  // combined by the pairwise tree (docs/numerics.md, "Cross-entropy").
  irdl.operation @cross_entropy attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, targets: %targets)
    irdl.results(loss: %f32, lse: %f32)
  }

  // tp.cross_entropy's loss and lse from the logits themselves: z[T,V] (a float type; the whole
  // vocabulary) and targets[T] -> loss[T], lse[T] (f32), by the same blocks and tree. Of z =
  // tp.linear(x, w) (same chunks, z in x's type) it is tp.cross_entropy(x, w, targets) bit for bit;
  // tp-fuse writes it where a module computes both (a decoding step's head and the drawn token's
  // log-probability), so the head's GEMM runs once. tp-shard gathers vocabulary-parallel logits first.
  irdl.operation @cross_entropy_logits {
    %z = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    irdl.operands(z: %z, targets: %targets)
    irdl.results(loss: %f32, lse: %f32)
  }

  // Vocabulary-parallel cross-entropy, per rank: stats[T,3] (f32) = this rank's subtree of the
  // vocabulary blocks (its running max m and sum s of exp(z - m)) and the target's logit when
  // this rank holds the target's row (else -0.0). tp.cross_entropy_combine finishes the tree.
  irdl.operation @cross_entropy_stats {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %stats = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, targets: %targets)
    irdl.results(stats: %stats)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes}
  }

  // stats[T,3R] (the R ranks' tp.cross_entropy_stats gathered along dim 1 in rank order) ->
  // tp.cross_entropy's loss and lse: the top levels of the block tree, in rank order.
  irdl.operation @cross_entropy_combine {
    %stats = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    irdl.operands(stats: %stats, targets: %targets)
    irdl.results(loss: %f32, lse: %f32)
  }

  //===--------------------------------------------------------------------===//
  // Backward (produced by tp-autodiff, also writable by hand). Contractions use the canonical
  // chunked accumulation over the contracted dimension; `partial` marks an unreduced f32 sum
  // that a following collective completes, as for tp.linear. `chunks` (0: the module's
  // tp.chunks) is the chunk count of this op's contraction; tp-invariant sets it to C/R on a
  // partial whose R-rank reduction completes the canonical tree. `segments` and `blocks` (dgrad
  // only) visit N in the chunk order of docs/numerics.md, "Segmented contractions".
  //===--------------------------------------------------------------------===//

  // dx[M,K] = dy[M,N] · w[N,K] (the input gradient of tp.linear; contracts N). With the optional
  // acc[M,K] (dx's type, not partial; made by tp-fuse from a tp.add of the result), dx = acc + the
  // product rounded to dx's type first: the bits of the add (fast numerics may round once).
  irdl.operation @linear_dgrad attributes {tp.optional_attributes = {
      parallel = ["none", "column", "row"], sequence_parallel = false, partial = false, chunks = 0 : i64,
      segments = 1 : i64, blocks = 1 : i64}} {
    %dy = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, w: %w, acc: optional %dx)
    irdl.results(dx: %dx)
  }

  // dw[N,K] = dy[M,N]ᵀ · x[M,K] (the weight gradient of tp.linear; contracts the tokens M).
  irdl.operation @linear_wgrad attributes {tp.optional_attributes = {
      parallel = ["none", "column", "row"], sequence_parallel = false, partial = false, chunks = 0 : i64}} {
    %dy = irdl.base "!builtin.tensor"
    %x = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, x: %x)
    irdl.results(dw: %dw)
  }

  // db[N] = Σ_m dy[m,N] (the bias gradient of tp.linear).
  irdl.operation @bias_grad attributes {tp.optional_attributes = {partial = false, chunks = 0 : i64}} {
    %dy = irdl.base "!builtin.tensor"
    %db = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy)
    irdl.results(db: %db)
  }

  // dx[T,K] = dy[T,N] · w[e,N,K] for the rows of expert e (segments as tp.grouped_linear).
  irdl.operation @grouped_linear_dgrad attributes {tp.optional_attributes = {
      parallel = ["none", "column", "row", "expert"], sequence_parallel = false, partial = false,
      chunks = 0 : i64, segments = 1 : i64, blocks = 1 : i64}} {
    %dy = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, w: %w, group_sizes: %group_sizes)
    irdl.results(dx: %dx)
  }

  // dw[e,N,K] = Σ over expert e's rows of dy[t,N]ᵀ · x[t,K].
  irdl.operation @grouped_linear_wgrad attributes {tp.optional_attributes = {
      parallel = ["none", "column", "row", "expert"], sequence_parallel = false, partial = false,
      chunks = 0 : i64}} {
    %dy = irdl.base "!builtin.tensor"
    %x = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, x: %x, group_sizes: %group_sizes)
    irdl.results(dw: %dw)
  }

  // dx[...,2F] from x[...,2F] and dy[...,F] for the tp.glu with the same attributes.
  irdl.operation @glu_grad attributes {tp.optional_attributes = {
      interleave = 0 : i64, alpha = 1.702 : f32, limit = 7.0 : f32}} {
    %swiglu = irdl.is "swiglu"
    %geglu = irdl.is "geglu"
    %quick_geglu = irdl.is "quick_geglu"
    %kind = irdl.any_of(%swiglu, %geglu, %quick_geglu)
    %x = irdl.base "!builtin.tensor"
    %dy = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, dy: %dy)
    irdl.results(dx: %x)
    irdl.attributes {"kind" = %kind}
  }

  // dx[M,H] and dgamma[H] of tp.rmsnorm (dgamma sums over the tokens M). With the optional acc[M,H]
  // (dx's type; made by tp-fuse from a tp.add of dx), dx = acc + the gradient rounded to dx's type
  // first: the bits of the add.
  irdl.operation @rmsnorm_grad attributes {tp.optional_attributes = {partial = false, chunks = 0 : i64}} {
    %eps = irdl.base "#builtin.float"
    %x = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    %dgamma = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, gamma: %gamma, dy: %x, acc: optional %x)
    irdl.results(dx: %x, dgamma: %dgamma)
    irdl.attributes {"eps" = %eps}
  }

  // dq, dk and dv of tp.attention from its inputs, its output y and dy (the softmax is
  // recomputed, or taken from the forward's lse when given; docs/numerics.md, "Attention").
  irdl.operation @attention_grad attributes {tp.optional_attributes = {causal = true, scale = 0.0 : f32}} {
    %q = irdl.base "!builtin.tensor"
    %kv = irdl.base "!builtin.tensor"
    %lse = irdl.base "!builtin.tensor"
    %seq_len = irdl.base "#builtin.integer"
    %head_dim = irdl.base "#builtin.integer"
    irdl.operands(q: %q, k: %kv, v: %kv, y: %q, dy: %q, lse: optional %lse)
    irdl.results(dq: %q, dk: %kv, dv: %kv)
    irdl.attributes {"seq_len" = %seq_len, "head_dim" = %head_dim}
  }

  // dx[M,H], dgamma[H] and dbeta[H] of tp.layernorm.
  irdl.operation @layernorm_grad attributes {tp.optional_attributes = {partial = false, chunks = 0 : i64}} {
    %eps = irdl.base "#builtin.float"
    %x = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    %dgamma = irdl.base "!builtin.tensor"
    %dbeta = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, gamma: %gamma, dy: %x)
    irdl.results(dx: %x, dgamma: %dgamma, dbeta: %dbeta)
    irdl.attributes {"eps" = %eps}
  }

  // dy[T*k,H] and dweights[T,k] of tp.moe_unpermute from its output gradient dout[T,H].
  irdl.operation @moe_unpermute_grad {
    %dout = irdl.base "!builtin.tensor"
    %y = irdl.base "!builtin.tensor"
    %row_map = irdl.base "!builtin.tensor"
    %weights = irdl.base "!builtin.tensor"
    irdl.operands(dout: %dout, y: %y, row_map: %row_map, weights: %weights)
    irdl.results(dy: %y, dweights: %weights)
  }

  // dx[T,H] = Σ_j dy[row of (t,j)] of tp.moe_permute (j increasing).
  irdl.operation @moe_permute_grad {
    %top_k = irdl.base "#builtin.integer"
    %dy = irdl.base "!builtin.tensor"
    %row_map = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    irdl.operands(dy: %dy, row_map: %row_map)
    irdl.results(dx: %dx)
    irdl.attributes {"top_k" = %top_k}
  }

  // dlogits[T,E] of tp.moe_route's weights (the top-k selection is constant).
  irdl.operation @moe_route_grad attributes {tp.optional_attributes = {normalize = false}} {
    %top_k = irdl.base "#builtin.integer"
    %logits = irdl.base "!builtin.tensor"
    %indices = irdl.base "!builtin.tensor"
    %dweights = irdl.base "!builtin.tensor"
    irdl.operands(logits: %logits, indices: %indices, dweights: %dweights)
    irdl.results(dlogits: %logits)
    irdl.attributes {"top_k" = %top_k}
  }

  // dtable[V,H] (f32) = Σ_t [ids[t] = v] dy[t] (the gradient of tp.embedding; contracts the
  // tokens in the canonical chunk order, duplicate ids summed in token order). With mesh and axes,
  // the rows of this rank's share of the vocabulary. With the optional acc[V,H] (dtable's type, not
  // partial; made by tp-fuse from a tp.add of the result, the tied LM head's gradient), dtable =
  // acc + the sums, a row no token names acc + 0.0: the add's bits.
  irdl.operation @embedding_grad attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false, partial = false, chunks = 0 : i64,
      mesh = @none, axes = []}} {
    %ids = irdl.base "!builtin.tensor"
    %dy = irdl.base "!builtin.tensor"
    %dtable = irdl.base "!builtin.tensor"
    irdl.operands(ids: %ids, dy: %dy, acc: optional %dtable)
    irdl.results(dtable: %dtable)
  }

  // dx[T,H] = dz · w, with dz[t,v] = (exp(z[t,v] - lse[t]) - [v = targets[t]]) · dloss[t]
  // rounded to x's dtype (the logits' gradient; +0.0 for an ignored token): tp.cross_entropy's
  // input gradient, contracting the vocabulary V. The logits are recomputed, never stored.
  irdl.operation @cross_entropy_dgrad attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false, partial = false, chunks = 0 : i64,
      mesh = @none, axes = []}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, targets: %targets, lse: %f32, dloss: %f32)
    irdl.results(dx: %dx)
  }

  // dw[V,H] (f32) = dzᵀ · x with dz as for tp.cross_entropy_dgrad: the head's weight gradient,
  // contracting the tokens.
  irdl.operation @cross_entropy_wgrad attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false, partial = false, chunks = 0 : i64,
      mesh = @none, axes = []}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, targets: %targets, lse: %f32, dloss: %f32)
    irdl.results(dw: %dw)
  }

  // Both gradients at once, dx as tp.cross_entropy_dgrad (contracting V in |chunks| blocks) and dw
  // as tp.cross_entropy_wgrad (contracting T in |token_chunks|), bitwise: the logits are recomputed
  // once for both. tp-fuse writes it for a dgrad and a wgrad of the same operands and attributes;
  // |partial| is the dgrad's.
  irdl.operation @cross_entropy_grad attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false, partial = false, chunks = 0 : i64,
      token_chunks = 0 : i64, mesh = @none, axes = []}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, targets: %targets, lse: %f32, dloss: %f32)
    irdl.results(dx: %dx, dw: %dw)
  }

  // The loss and both gradients in one pass over the logits, for a head whose whole vocabulary is
  // on this rank and whose loss gradient dloss is known before the loss (a training step's
  // cotangent): bitwise tp.cross_entropy followed by tp.cross_entropy_grad of its lse (|chunks|
  // and |token_chunks| as there). Each piece of tokens' logits is computed once, for the
  // statistics, the loss and the gradients (Liger's fused linear cross-entropy); tp-fuse writes it.
  irdl.operation @cross_entropy_with_grad attributes {tp.optional_attributes = {
      parallel = ["none", "vocab"], sequence_parallel = false, chunks = 0 : i64, token_chunks = 0 : i64}} {
    %x = irdl.base "!builtin.tensor"
    %w = irdl.base "!builtin.tensor"
    %targets = irdl.base "!builtin.tensor"
    %f32 = irdl.base "!builtin.tensor"
    %dx = irdl.base "!builtin.tensor"
    %dw = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w: %w, targets: %targets, dloss: %f32)
    irdl.results(loss: %f32, lse: %f32, dx: %dx, dw: %dw)
  }

  //===--------------------------------------------------------------------===//
  // Optimizer (docs/dialect.md, "Optimizer"; docs/numerics.md, "Optimizer"). tp-adamw appends
  // them to a training step.
  //===--------------------------------------------------------------------===//

  // acc'[21] (i64) = acc (absent: zero) plus the exact sum of g's squared elements, a fixed-point
  // integer of 20 limbs and a count of non-finite elements. With mesh and axes (the axes over
  // which g is replicated), only member 0 of that group adds; the others pass acc on, so an
  // element is counted once however the gradient is laid out.
  irdl.operation @sumsq attributes {tp.optional_attributes = {mesh = @none, axes = []}} {
    %g = irdl.base "!builtin.tensor"
    %acc = irdl.base "!builtin.tensor"
    irdl.operands(g: %g, acc: optional %acc)
    irdl.results(acc_out: %acc)
  }

  // norm[1] (f32) = sqrt of the sum of the accumulators acc[R*21] (R ranks' tp.sumsq results side
  // by side): exact integer sums, one rounding to f64, sqrt, one rounding to f32. NaN if any
  // element was NaN, +inf if any was infinite.
  irdl.operation @global_norm {
    %acc = irdl.base "!builtin.tensor"
    %norm = irdl.base "!builtin.tensor"
    irdl.operands(acc: %acc)
    irdl.results(norm: %norm)
  }

  // One AdamW step of one parameter, elementwise (PyTorch's torch.optim.AdamW after
  // clip_grad_norm_): master, grad, m, v (f32, one shape); hyper[8] (f32) = [step size
  // lr/(1-beta1^t), 1-beta1, beta2, 1-beta2, eps, 1-lr*weight_decay, sqrt(1-beta2^t), max_norm
  // (0: no clipping)]; norm[1] the global gradient norm. Results: the new master, m and v, and
  // the new master rounded to the compute weight's type. With mesh and axes (ZeRO-1), master, m,
  // v and the outputs are this rank's share of one dimension d of grad (member g of R holds
  // [g*N/R, (g+1)*N/R) of its N), the one where their sizes differ.
  irdl.operation @adamw attributes {tp.optional_attributes = {mesh = @none, axes = []}} {
    %f32 = irdl.base "!builtin.tensor"
    %grad = irdl.base "!builtin.tensor"
    %hyper = irdl.base "!builtin.tensor"
    %norm = irdl.base "!builtin.tensor"
    %weight = irdl.base "!builtin.tensor"
    irdl.operands(master: %f32, grad: %grad, m: %f32, v: %f32, hyper: %hyper, norm: %norm)
    irdl.results(master_out: %f32, m_out: %f32, v_out: %f32, weight: %weight)
  }

  //===--------------------------------------------------------------------===//
  // Collectives (all have side effects; none is Pure)
  //===--------------------------------------------------------------------===//

  // Sums `input` over the ranks of the group; the result has the input's shape and may round
  // to another float type (f32 partials -> bf16). With reduce = "max", the elementwise maximum
  // (exact and order-free; the input's element type).
  irdl.operation @all_reduce attributes {tp.optional_attributes = {
      order = ["any", "canonical"], reduce = ["sum", "max"]}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %input = irdl.base "!builtin.tensor"
    %output = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    irdl.results(output: %output)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes}
  }

  // Concatenates the group's inputs along `dim` in rank order. With `blocks` = B the input's
  // `dim` is B equal blocks and the result holds, block by block, every rank's block in rank
  // order (a weight stored in B blocks per rank, such as a stride-2 GLU weight, comes back whole).
  irdl.operation @all_gather attributes {tp.optional_attributes = {
      order = ["any", "canonical"], blocks = 1 : i64}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %dim = irdl.base "#builtin.integer"
    %input = irdl.base "!builtin.tensor"
    %output = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    irdl.results(output: %output)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "dim" = %dim}
  }

  // Sums the group's inputs and keeps this rank's slice along `dim`; with `blocks` = B, the
  // slice of each of the B blocks of `dim` (the inverse of all_gather's blocks).
  irdl.operation @reduce_scatter attributes {tp.optional_attributes = {
      order = ["any", "canonical"], blocks = 1 : i64}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %dim = irdl.base "#builtin.integer"
    %input = irdl.base "!builtin.tensor"
    %output = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    irdl.results(output: %output)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "dim" = %dim}
  }

  // Splits `input` along split_dim, sends slice r to rank r and concatenates what arrives along
  // concat_dim in rank order. With `blocks` = B split_dim is B equal blocks and slice r is the r-th
  // piece of every block, in block order.
  irdl.operation @all_to_all attributes {tp.optional_attributes = {
      order = ["any", "canonical"], blocks = 1 : i64}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %split_dim = irdl.base "#builtin.integer"
    %concat_dim = irdl.base "#builtin.integer"
    %input = irdl.base "!builtin.tensor"
    %output = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    irdl.results(output: %output)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "split_dim" = %split_dim,
                     "concat_dim" = %concat_dim}
  }

  // Starts tp.all_gather asynchronously; tp.wait yields its result.
  irdl.operation @all_gather_start attributes {tp.optional_attributes = {
      order = ["any", "canonical"], blocks = 1 : i64}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %dim = irdl.base "#builtin.integer"
    %input = irdl.base "!builtin.tensor"
    %value = irdl.base "!builtin.tensor"
    %future = irdl.parametric @tp::@future<%value>
    irdl.operands(input: %input)
    irdl.results(future: %future)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "dim" = %dim}
  }

  // Starts tp.reduce_scatter asynchronously; tp.wait yields its result.
  irdl.operation @reduce_scatter_start attributes {tp.optional_attributes = {
      order = ["any", "canonical"], blocks = 1 : i64}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %dim = irdl.base "#builtin.integer"
    %input = irdl.base "!builtin.tensor"
    %value = irdl.base "!builtin.tensor"
    %future = irdl.parametric @tp::@future<%value>
    irdl.operands(input: %input)
    irdl.results(future: %future)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "dim" = %dim}
  }

  // Starts tp.all_to_all asynchronously; tp.wait yields its result (tp-gtp's weight gradients
  // from every rank's tokens: this rank's columns of each rank's output gradient).
  irdl.operation @all_to_all_start attributes {tp.optional_attributes = {
      order = ["any", "canonical"], blocks = 1 : i64}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %split_dim = irdl.base "#builtin.integer"
    %concat_dim = irdl.base "#builtin.integer"
    %input = irdl.base "!builtin.tensor"
    %value = irdl.base "!builtin.tensor"
    %future = irdl.parametric @tp::@future<%value>
    irdl.operands(input: %input)
    irdl.results(future: %future)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "split_dim" = %split_dim,
                     "concat_dim" = %concat_dim}
  }

  // Blocks until an asynchronous collective completes; the result is the future's tensor.
  irdl.operation @wait {
    %value = irdl.base "!builtin.tensor"
    %future = irdl.parametric @tp::@future<%value>
    irdl.operands(future: %future)
    irdl.results(value: %value)
  }

  //===--------------------------------------------------------------------===//
  // Fused ops (produced by tp-fuse, also writable by hand)
  //===--------------------------------------------------------------------===//

  // sum = residual + y (tp.add); normed = rmsnorm(sum, gamma) (tp.rmsnorm): the pair in one pass
  // over the rows, the same bits in every numerics. tp-fuse writes it where no collective comes
  // first (one rank: a block's residual add and the next norm).
  irdl.operation @add_rmsnorm {
    %eps = irdl.base "#builtin.float"
    %x = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    irdl.operands(residual: %x, y: %x, gamma: %gamma)
    irdl.results(normed: %x, sum: %x)
    irdl.attributes {"eps" = %eps}
  }

  // residual_out = all_reduce(partial) + residual; normed = rmsnorm(residual_out, gamma).
  // `algorithm` picks how it runs: "auto" lets the backend choose, "one_shot" takes the one-shot
  // fused kernel wherever the backend can run it, "two_shot" the two-shot one (a reduce-scatter of
  // the partial to row owners, then an all-gather of the rows' sums, each member adding its own
  // residual),
  // "composition" runs the all-reduce, add and rmsnorm. Values are appended last: the runtime
  // numbers them as listed (TPRT_ALGORITHM_*).
  // `sum_type` is the sum's type before the add: "f32" (the add rounds once), or "residual" (the
  // sum is rounded to the residual's element type first, as tp.all_reduce then tp.add does: the
  // chain's bits, which tp-fuse writes in invariant and exact numerics).
  irdl.operation @fused_allreduce_add_rmsnorm attributes {tp.optional_attributes = {
      order = ["any", "canonical"], algorithm = ["auto", "one_shot", "composition", "two_shot"],
      sum_type = ["f32", "residual"]}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %eps = irdl.base "#builtin.float"
    %partial = irdl.base "!builtin.tensor"
    %residual = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    irdl.operands(partial: %partial, residual: %residual, gamma: %gamma)
    irdl.results(normed: %residual, residual_out: %residual)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "eps" = %eps}
  }

  // The sequence-parallel form: reduce_scatter(partial) along dim 0, then add and RMSNorm on this
  // rank's token shard. `algorithm` and `sum_type` as above (one list, so one enum); "one_shot"
  // and "two_shot" are refused (rule fused_norm.algorithm): there is no fused kernel of this form.
  irdl.operation @fused_reduce_scatter_add_rmsnorm attributes {tp.optional_attributes = {
      order = ["any", "canonical"], algorithm = ["auto", "one_shot", "composition", "two_shot"],
      sum_type = ["f32", "residual"]}} {
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %eps = irdl.base "#builtin.float"
    %partial = irdl.base "!builtin.tensor"
    %residual = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    irdl.operands(partial: %partial, residual: %residual, gamma: %gamma)
    irdl.results(normed: %residual, residual_out: %residual)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "eps" = %eps}
  }

  // tp.fused_allreduce_add_rmsnorm, then tp.quantize of normed (rowwise) in `format`: data, scale
  // and for nvfp4 global_scale are tp.quantize(normed, amax)'s bit for bit. The quantization must
  // be local to a row so that a fused kernel can do it where it normalizes: mxfp8 (a scale per 32
  // columns), or fp8_e4m3 / fp8_e5m2 / nvfp4 with the per-tensor `amax` given (from a tp.amax, a
  // calibration, or a previous step: static or delayed scaling). `order`, `algorithm` and
  // `sum_type` as above. Produced by tp-fuse from a fused norm whose normed feeds a tp.quantize.
  irdl.operation @fused_allreduce_add_rmsnorm_quantize attributes {tp.optional_attributes = {
      order = ["any", "canonical"], algorithm = ["auto", "one_shot", "composition", "two_shot"],
      sum_type = ["f32", "residual"]}} {
    %fp8_e4m3 = irdl.is "fp8_e4m3"
    %fp8_e5m2 = irdl.is "fp8_e5m2"
    %mxfp8 = irdl.is "mxfp8"
    %nvfp4 = irdl.is "nvfp4"
    %format = irdl.any_of(%fp8_e4m3, %fp8_e5m2, %mxfp8, %nvfp4)
    %mesh = irdl.base "#builtin.symbol_ref"
    %axes = irdl.base "#builtin.array"
    %eps = irdl.base "#builtin.float"
    %partial = irdl.base "!builtin.tensor"
    %residual = irdl.base "!builtin.tensor"
    %gamma = irdl.base "!builtin.tensor"
    %amax = irdl.base "!builtin.tensor"
    %data = irdl.base "!builtin.tensor"
    %scale = irdl.base "!builtin.tensor"
    %global_scale = irdl.base "!builtin.tensor"
    irdl.operands(partial: %partial, residual: %residual, gamma: %gamma, amax: optional %amax)
    irdl.results(normed: %residual, residual_out: %residual, data: %data, scale: %scale,
                 global_scale: optional %global_scale)
    irdl.attributes {"mesh" = %mesh, "axes" = %axes, "eps" = %eps, "format" = %format}
  }

  // y = grouped_linear(glu(grouped_linear(x, w1)), w2) with FC1 rows laid out for the GLU.
  irdl.operation @fused_grouped_mlp attributes {tp.optional_attributes = {
      interleave = 0 : i64, alpha = 1.702 : f32, limit = 7.0 : f32}} {
    %swiglu = irdl.is "swiglu"
    %geglu = irdl.is "geglu"
    %quick_geglu = irdl.is "quick_geglu"
    %kind = irdl.any_of(%swiglu, %geglu, %quick_geglu)
    %x = irdl.base "!builtin.tensor"
    %w1 = irdl.base "!builtin.tensor"
    %w2 = irdl.base "!builtin.tensor"
    %group_sizes = irdl.base "!builtin.tensor"
    irdl.operands(x: %x, w1: %w1, w2: %w2, group_sizes: %group_sizes)
    irdl.results(y: %x)
    irdl.attributes {"kind" = %kind}
  }
}
