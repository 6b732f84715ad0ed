// RUN: tpc-opt %s --mesh dp=2,tp=2,mb=2 --sequence-parallel --tp-autodiff --tp-adamw --tp-shard --tp-invariant --tp-micro-batch | FileCheck %s
// RUN: not tpc-opt %s --mesh tp=2,mb=2 --pass-pipeline 'builtin.module(tp-invariant{strategy=gather})' --tp-autodiff --tp-adamw --tp-shard --tp-invariant --tp-micro-batch 2>&1 | FileCheck %s --check-prefix=GATHER
// RUN: tpc-opt %s --mesh gtp=2,mb=2 --tp-autodiff --tp-adamw --tp-shard --tp-gtp --tp-invariant --tp-micro-batch | FileCheck %s --check-prefix=GTP
// RUN: sed 's/^module attributes {\(.*\)} {$/module attributes {\1} {\n  "tp.mesh"() {axes = ["gtp", "mb"], shape = array<i64: 2, 2>, sym_name = "world"} : () -> ()/' %s | not tpc-opt --tp-autodiff --tp-adamw --tp-shard --tp-gtp --tp-invariant --tp-micro-batch 2>&1 | FileCheck %s --check-prefix=GTPFIRST

// tp-micro-batch on the tiny whole model (tp=2 x dp=2 with sequence parallelism, 2 micro-batches):
// @lm is one micro-batch's forward and backward; it returns the loss and the partial gradients,
// each summed over the mesh axes after mb (tp: the norm weights' gradients under sequence
// parallelism) but not over mb or dp; @lm_update takes the partials (summed over the micro-batches
// by the driver), reduces them over dp (mb now has one member) and runs the norm and AdamW.
// CHECK: "tp.mesh"() {axes = ["dp", "mb", "tp"], shape = array<i64: 2, 1, 2>, sym_name = "world"}
// CHECK-LABEL: func.func @lm(
// CHECK-SAME: tensor<4xi32> {tp.name = "ids", tp.shard = {axes = {{\[\["dp", "mb"\]\]}}, blocks = array<i64: 1>, logical = array<i64: 8>}}
// CHECK-NOT: tp.master
// CHECK-SAME: -> (tensor<4xf32> {tp.name = "loss"{{.*}}, tensor<32x32xf32> {tp.name = "grad_partial.0"}
// CHECK: "tp.rmsnorm_grad"
// CHECK-NEXT: "tp.all_reduce"({{.*}}) {axes = ["tp"], mesh = @world, order = "canonical"} : (tensor<32xf32>) -> tensor<32xf32>
// CHECK-NOT: "tp.adamw"
// CHECK: return
// CHECK-LABEL: func.func @lm_update(
// CHECK-SAME: tp.name = "emb.master"
// CHECK-SAME: tp.name = "optimizer.hyper"
// CHECK-SAME: tp.name = "grad_partial.0"
// CHECK: "tp.all_reduce"(%arg{{[0-9]+}}) {axes = ["dp", "mb"], mesh = @world, order = "canonical"}
// CHECK: "tp.sumsq"
// CHECK: "tp.global_norm"
// CHECK: "tp.adamw"

// GATHER: error: tp-micro-batch: tp.all_gather communicates across micro-batches (over mesh axis mb)

// With a gtp axis, --mesh puts mb before gtp (a micro-batch's tokens split over gtp), so @lm
// reduce-scatters each weight's gradient over gtp (the inner level of the canonical tree) and
// returns its gtp shard's partial; @lm_update sums the micro-batches' (the driver) and updates the
// shard. A module that declares gtp before mb is refused.
// GTP: "tp.mesh"() {axes = ["mb", "gtp"], shape = array<i64: 1, 2>, sym_name = "world"}
// GTP-LABEL: func.func @lm(
// GTP-SAME: tp.shard = {axes = {{\[\["mb", "gtp"\]\]}}
// GTP: "tp.all_gather_start"({{.*}}) {axes = ["gtp"]
// GTP: {axes = ["gtp"]
// GTP-NOT: "tp.adamw"
// GTP: return
// GTP-LABEL: func.func @lm_update(
// GTP: "tp.all_reduce"(%arg{{[0-9]+}}) {axes = ["mb"], mesh = @world, order = "canonical"}
// GTP: "tp.adamw"
// GTPFIRST: error: tp-micro-batch: the mesh declares gtp before mb
module attributes {tp.numerics = "invariant", tp.chunks = 8 : i64} {
  func.func @lm(%ids: tensor<16xi32> {tp.name = "ids"}, %targets: tensor<16xi32> {tp.name = "targets"},
                %emb: tensor<64x32xf32> {tp.name = "emb"}, %g1: tensor<32xf32> {tp.name = "g1"},
                %w1: tensor<128x32xf32> {tp.name = "w1"}, %w2: tensor<32x64xf32> {tp.name = "w2"},
                %gf: tensor<32xf32> {tp.name = "gf"}, %head: tensor<64x32xf32> {tp.name = "head"})
      -> (tensor<16xf32> {tp.name = "loss"}) {
    %x = "tp.embedding"(%ids, %emb) {parallel = "vocab"} : (tensor<16xi32>, tensor<64x32xf32>) -> tensor<16x32xf32>
    %h = "tp.rmsnorm"(%x, %g1) {eps = 1.0e-05 : f32} : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
    %u = "tp.linear"(%h, %w1) {parallel = "column"} : (tensor<16x32xf32>, tensor<128x32xf32>) -> tensor<16x128xf32>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x128xf32>) -> tensor<16x64xf32>
    %d = "tp.linear"(%a, %w2) {parallel = "row"} : (tensor<16x64xf32>, tensor<32x64xf32>) -> tensor<16x32xf32>
    %y = "tp.add"(%x, %d) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    %n = "tp.rmsnorm"(%y, %gf) {eps = 1.0e-05 : f32} : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
    %loss, %lse = "tp.cross_entropy"(%n, %head, %targets) {parallel = "vocab"} : (tensor<16x32xf32>, tensor<64x32xf32>, tensor<16xi32>) -> (tensor<16xf32>, tensor<16xf32>)
    return %loss : tensor<16xf32>
  }
}
