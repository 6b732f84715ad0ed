// RUN: tpc-opt %s --split-input-file --tp-shard --tp-gtp --verify-diagnostics

/// A weight whose output features do not divide by the gtp size is refused, never left whole:
/// w1's 512 rows over gtp = 3. The error names the argument and what to change.
module {
  "tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 3>} : () -> ()
  // expected-error@+1 {{tp-gtp: argument 'w1' cannot be sharded over gtp = 3: its output features (dimension 0) have 512 rows on each tensor-parallel rank, not divisible by 3; change the gtp size or the model's width, or mark it}}
  func.func @mlp(%x: tensor<24x128xbf16> {tp.name = "x"}, %w1: tensor<512x128xbf16> {tp.name = "w1"},
                 %w2: tensor<128x256xbf16> {tp.name = "w2"}) -> tensor<24x128xbf16> {
    %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<24x128xbf16>, tensor<512x128xbf16>) -> tensor<24x512xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<24x512xbf16>) -> tensor<24x256xbf16>
    %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<24x256xbf16>, tensor<128x256xbf16>) -> tensor<24x128xbf16>
    return %d : tensor<24x128xbf16>
  }
}

// -----

/// A stride-2 weight is cut block by block: with tp = 2 each rank holds 2 blocks of 24 rows
/// (gate and up), and 24 does not divide by gtp = 16... the message names the blocks.
module {
  "tp.mesh"() {sym_name = "world", axes = ["gtp", "tp"], shape = array<i64: 16, 2>} : () -> ()
  // expected-error@+1 {{tp-gtp: argument 'w1' cannot be sharded over gtp = 16: its output features (dimension 0) have 48 rows on each tensor-parallel rank in 2 blocks of 24, not divisible by 16}}
  func.func @mlp(%x: tensor<32x64xbf16> {tp.name = "x"}, %w1: tensor<96x64xbf16> {tp.name = "w1"},
                 %w2: tensor<64x48xbf16> {tp.name = "w2", tp.gtp = false}) -> tensor<32x64xbf16> {
    %u = "tp.linear"(%x, %w1) {parallel = "column"} : (tensor<32x64xbf16>, tensor<96x64xbf16>) -> tensor<32x96xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<32x96xbf16>) -> tensor<32x48xbf16>
    %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<32x48xbf16>, tensor<64x48xbf16>) -> tensor<32x64xbf16>
    return %d : tensor<32x64xbf16>
  }
}

// -----

/// An explicit tp.gtp = true asks for a gtp axis; a mesh without one is an error, not a silently
/// unsharded weight.
module {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  // expected-error@+1 {{tp-gtp: argument 'w' is marked tp.gtp = true, but the module's mesh has no gtp axis; add one (--mesh tp=2,gtp=2) or drop the mark}}
  func.func @f(%x: tensor<8x64xbf16> {tp.name = "x"}, %w: tensor<64x64xbf16> {tp.name = "w", tp.gtp = true}) -> tensor<8x64xbf16> {
    %y = "tp.linear"(%x, %w) {parallel = "column"} : (tensor<8x64xbf16>, tensor<64x64xbf16>) -> tensor<8x64xbf16>
    return %y : tensor<8x64xbf16>
  }
}

// -----

/// Quantize-then-gather gathers rows of the quantized data: columnwise FP8 data is stored
/// transposed, so a gtp shard's rows are its columns; the error says so, never a whole weight.
module {
  "tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
  func.func @fp8_columnwise(%x: tensor<8x256xbf16> {tp.name = "x"}, %w: tensor<256x256xbf16> {tp.name = "w"}) -> tensor<8x256xbf16> {
    // expected-error@+1 {{tp-gtp: argument 'w' is quantized before its linear, and its shards cannot be gathered as quantized bytes: columnwise data is stored transposed, so the sharded rows are its columns; quantize it rowwise, or mark it {tp.gtp = false}}}
    %q, %s = "tp.quantize"(%w) {format = "fp8_e4m3", axis = "columnwise"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<1xf32>)
    %d = "tp.dequantize"(%q, %s) {format = "fp8_e4m3", axis = "columnwise"} : (tensor<256x256xf8E4M3FN>, tensor<1xf32>) -> tensor<256x256xbf16>
    %y = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<8x256xbf16>, tensor<256x256xbf16>) -> tensor<8x256xbf16>
    return %y : tensor<8x256xbf16>
  }
}

// -----

/// MXFP8 scales come in tiles of 128 rows: a shard of 64 rows would gather padded tiles.
module {
  "tp.mesh"() {sym_name = "world", axes = ["gtp"], shape = array<i64: 2>} : () -> ()
  func.func @mx(%x: tensor<8x256xbf16> {tp.name = "x"}, %w: tensor<128x256xbf16> {tp.name = "w"}) -> tensor<8x128xbf16> {
    // expected-error@+1 {{tp-gtp: argument 'w' is quantized to mxfp8, whose scales come in tiles of 128 rows: a gtp shard is gathered with its scales only when it holds whole, unpadded tiles (a multiple of 128 rows); this weight's shard holds 64 rows; change the gtp size or the width, or mark it {tp.gtp = false}}}
    %q, %s = "tp.quantize"(%w) {format = "mxfp8"} : (tensor<128x256xbf16>) -> (tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>)
    %d = "tp.dequantize"(%q, %s) {format = "mxfp8"} : (tensor<128x256xf8E4M3FN>, tensor<128x8xf8E8M0FNU>) -> tensor<128x256xbf16>
    %y = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<8x256xbf16>, tensor<128x256xbf16>) -> tensor<8x128xbf16>
    return %y : tensor<8x128xbf16>
  }
}

// -----

/// NVFP4's E4M3 block scales come in tiles of 128 rows too: w's 512 rows in 2 stride-2 blocks
/// (tp = 2: gate and up) leave each gtp shard 64 rows of each block.
module {
  "tp.mesh"() {sym_name = "world", axes = ["gtp", "tp"], shape = array<i64: 2, 2>} : () -> ()
  func.func @nv(%x: tensor<8x256xbf16> {tp.name = "x"}, %w: tensor<512x256xbf16> {tp.name = "w"}) -> tensor<8x256xbf16> {
    %a = "tp.amax"(%w) : (tensor<512x256xbf16>) -> tensor<1xf32>
    // expected-error@+1 {{tp-gtp: argument 'w' is quantized to nvfp4, whose scales come in tiles of 128 rows: a gtp shard is gathered with its scales only when it holds whole, unpadded tiles (a multiple of 128 rows in each of its 2 blocks); this weight's shard holds 64 rows in each; change the gtp size or the width, or mark it {tp.gtp = false}}}
    %q, %s, %g = "tp.quantize"(%w, %a) {format = "nvfp4"} : (tensor<512x256xbf16>, tensor<1xf32>) -> (tensor<512x256xf4E2M1FN>, tensor<512x16xf8E4M3FN>, tensor<1xf32>)
    %d = "tp.dequantize"(%q, %s, %g) {format = "nvfp4"} : (tensor<512x256xf4E2M1FN>, tensor<512x16xf8E4M3FN>, tensor<1xf32>) -> tensor<512x256xbf16>
    %u = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<8x256xbf16>, tensor<512x256xbf16>) -> tensor<8x512xbf16>
    %y = "tp.glu"(%u) {kind = "swiglu"} : (tensor<8x512xbf16>) -> tensor<8x256xbf16>
    return %y : tensor<8x256xbf16>
  }
}

// -----

/// tp-shard: a per-tensor FP8 scale of a sharded weight would be the shard's, not the weight's,
/// unless the quantize takes the whole tensor's amax as its operand.
module {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @fp8_tp(%x: tensor<8x256xbf16> {tp.name = "x"}, %w: tensor<256x256xbf16> {tp.name = "w"}) -> tensor<8x256xbf16> {
    // expected-error@+1 {{tp-shard: 'tp.quantize' input x is laid out [tp, -]; per-tensor scales (FP8, and NVFP4's global scale) need the whole tensor's amax, which a sharded tensor does not have; give the quantize an amax operand (tp.amax of the tensor: tp-shard completes it over the shards), quantize a replicated tensor, or use mxfp8}}
    %q, %s = "tp.quantize"(%w) {format = "fp8_e4m3"} : (tensor<256x256xbf16>) -> (tensor<256x256xf8E4M3FN>, tensor<1xf32>)
    %d = "tp.dequantize"(%q, %s) {format = "fp8_e4m3"} : (tensor<256x256xf8E4M3FN>, tensor<1xf32>) -> tensor<256x256xbf16>
    %y = "tp.linear"(%x, %d) {parallel = "column"} : (tensor<8x256xbf16>, tensor<256x256xbf16>) -> tensor<8x256xbf16>
    return %y : tensor<8x256xbf16>
  }
}

// -----

/// tp-shard: NVFP4 block scales of a row-parallel weight (sharded along K) are whole tiles only
/// when each rank holds a multiple of 4 blocks of 16 columns: 96 columns is 6 blocks.
module {
  "tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 2>} : () -> ()
  func.func @nvfp4_row(%x: tensor<8x192xbf16> {tp.name = "x"}, %w: tensor<128x192xbf16> {tp.name = "w"}) -> tensor<8x128xbf16> {
    %a = "tp.amax"(%w) : (tensor<128x192xbf16>) -> tensor<1xf32>
    // expected-error@+1 {{tp-shard: 'tp.quantize' input x is laid out [-, tp]; each rank's NVFP4 scales must be whole, unpadded tiles: sharded rows a multiple of 128 per rank, sharded columns a multiple of 64 per rank (4 blocks of 16)}}
    %q, %s, %g = "tp.quantize"(%w, %a) {format = "nvfp4"} : (tensor<128x192xbf16>, tensor<1xf32>) -> (tensor<128x192xf4E2M1FN>, tensor<128x12xf8E4M3FN>, tensor<1xf32>)
    %d = "tp.dequantize"(%q, %s, %g) {format = "nvfp4"} : (tensor<128x192xf4E2M1FN>, tensor<128x12xf8E4M3FN>, tensor<1xf32>) -> tensor<128x192xbf16>
    %y = "tp.linear"(%x, %d) {parallel = "row"} : (tensor<8x192xbf16>, tensor<128x192xbf16>) -> tensor<8x128xbf16>
    return %y : tensor<8x128xbf16>
  }
}
