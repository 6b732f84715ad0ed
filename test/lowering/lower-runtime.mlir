// RUN: tpc-opt %s --tp-lower-runtime --split-input-file | FileCheck %s

/// [Pattern: every tp op -> one runtime ABI call with a static descriptor]
/// IN:  "tp.rmsnorm", "tp.linear", "tp.glu", "tp.linear", "tp.add"
/// OUT: func.call @tprt_abi_<op>(%exec, %slots, @__tpc_desc_*) in program order, each checked.

/// The arena holds the four intermediates in FC1's and the GLU's bytes, 16384 + 8192, the live peak
/// at the GLU: the largest first, FC1 at 0 and the GLU at 16384; the rmsnorm output, dead before
/// the GLU is written, shares the GLU's bytes, and FC2's output, written after FC1's last reader,
/// shares FC1's. (First fit in program order needs 4096 bytes more.)
// CHECK-LABEL: module attributes {tp.arena_bytes = 24576 : i64
// CHECK-DAG:   func.func private @tprt_abi_rmsnorm(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-DAG:   func.func private @tprt_abi_linear(!llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: func.func @tpc_entry_mlp(
// CHECK:     llvm.mlir.constant(16384 : i64) : i64
// CHECK-NEXT: %[[NORM:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[FC1:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: llvm.mlir.constant(16384 : i64) : i64
// CHECK-NEXT: %[[ACT:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT: llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT: %[[FC2:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK:         call @tprt_abi_rmsnorm(
// CHECK:         call @tprt_abi_linear(
// CHECK:         call @tprt_abi_glu(
// CHECK:         call @tprt_abi_linear(
// CHECK:         call @tprt_abi_add(
// CHECK:         return
// CHECK:       llvm.mlir.global external constant @tpc_module_info("{\22abi\22:6,
module {
  func.func @mlp(%x: tensor<16x128xbf16>, %gamma: tensor<128xbf16>,
                 %w1: tensor<512x128xbf16>, %w2: tensor<128x256xbf16>) -> tensor<16x128xbf16> {
    %h = "tp.rmsnorm"(%x, %gamma) {eps = 1.0e-05 : f32} : (tensor<16x128xbf16>, tensor<128xbf16>) -> tensor<16x128xbf16>
    %u = "tp.linear"(%h, %w1) : (tensor<16x128xbf16>, tensor<512x128xbf16>) -> tensor<16x512xbf16>
    %a = "tp.glu"(%u) {kind = "swiglu"} : (tensor<16x512xbf16>) -> tensor<16x256xbf16>
    %d = "tp.linear"(%a, %w2) : (tensor<16x256xbf16>, tensor<128x256xbf16>) -> tensor<16x128xbf16>
    %y = "tp.add"(%x, %d) : (tensor<16x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
    return %y : tensor<16x128xbf16>
  }
}

// -----

/// A returned argument and a value returned twice are copied into the result buffers; the
/// first return of an op result is written in place (no arena, no copy).
// CHECK-LABEL: module attributes {tp.arena_bytes = 0 : i64
// CHECK-LABEL: func.func @tpc_entry_returns(
// CHECK:         call @tprt_abi_add(
// CHECK:         call @tprt_abi_copy(
// CHECK:         call @tprt_abi_copy(
// CHECK-NOT:     call @tprt_abi_copy(
// CHECK:         return
func.func @returns(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = "tp.add"(%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %y, %x : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

/// tp.wait's result shares the storage the future names; the collective's mesh and axes become
/// the descriptor entries: slots [f32 4x8] [f32 16x8], then 5 attributes: mesh [rank 2: 2, 4],
/// axes as a bitmask (tp is axis 1 -> 2), dim 0, the default blocks 1 and the default order "any"
/// (0). The waited value is returned, so the collective writes the caller's result buffer: no
/// arena, no copy.
// CHECK-LABEL: module attributes {tp.arena_bytes = 0 : i64
// CHECK:       llvm.mlir.global internal constant @__tpc_desc_gather_0(dense<[{{[0-9]+}}, 2, 2, 2, 4, 8, 2, 2, 16, 8, 5, 3, 2, 2, 4, 1, 2, 1, 0, 1, 1, 1, 0]>
// CHECK-LABEL: func.func @tpc_entry_gather(
// CHECK:         %[[RES:.*]] = llvm.getelementptr %arg2[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[BUF:.*]] = llvm.load %[[RES]] : !llvm.ptr -> !llvm.ptr
// CHECK:         call @tprt_abi_all_gather_start(
// CHECK:         llvm.store %[[BUF]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    llvm.store %[[BUF]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK:         call @tprt_abi_wait(
// CHECK-NOT:     call @tprt_abi_copy(
// CHECK:         return
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @gather(%x: tensor<4x8xf32>) -> tensor<16x8xf32> {
  %f = "tp.all_gather_start"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<4x8xf32>) -> !tp.future<tensor<16x8xf32>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<16x8xf32>>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}


// -----

/// An async collective's input stays live until its tp.wait (a device reads it on the comm
/// stream meanwhile): %b, defined between the start and the wait, must not take %a's bytes. The
/// arena holds %a [0, 256), the future [256, 512) and %b [512, 768); if %a died at the start,
/// %b would reuse offset 0 and the arena would be 512 bytes. (%s is not returned itself, which
/// would put the future in the caller's result buffer.)
// CHECK-LABEL: module attributes {tp.arena_bytes = 768 : i64
// CHECK-LABEL: func.func @tpc_entry_overlap(
// CHECK:         llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT:    %[[A:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:    llvm.mlir.constant(256 : i64) : i64
// CHECK-NEXT:    %[[F:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:    llvm.mlir.constant(512 : i64) : i64
// CHECK-NEXT:    %[[B:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK:         call @tprt_abi_add(
// CHECK:         call @tprt_abi_reduce_scatter_start(
// CHECK:         llvm.store %[[B]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK:         call @tprt_abi_add(
// CHECK:         call @tprt_abi_add(
// CHECK:         call @tprt_abi_wait(
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @overlap(%x: tensor<4x16xf32>) -> (tensor<4x4xf32>, tensor<4x16xf32>) {
  %a = "tp.add"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %f = "tp.reduce_scatter_start"(%a) {mesh = @world, axes = ["tp"], dim = 1 : i64, order = "canonical"}
      : (tensor<4x16xf32>) -> !tp.future<tensor<4x4xf32>>
  %b = "tp.add"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %c = "tp.add"(%b, %b) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %s = "tp.wait"(%f) : (!tp.future<tensor<4x4xf32>>) -> tensor<4x4xf32>
  %t = "tp.add"(%s, %s) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %t, %c : tensor<4x4xf32>, tensor<4x16xf32>
}

// -----

/// A future that no tp.wait consumes completes when the step ends: it and its start's input stay
/// live to the end of the function, so %b gets bytes of its own: %a [0, 256), the future
/// [256, 1280), %b [1280, 1536) (if either died early, %b would reuse its bytes).
// CHECK-LABEL: module attributes {tp.arena_bytes = 1536 : i64
// CHECK-LABEL: func.func @tpc_entry_unwaited(
// CHECK:         llvm.mlir.constant(0 : i64) : i64
// CHECK-NEXT:    llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:    llvm.mlir.constant(256 : i64) : i64
// CHECK-NEXT:    llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:    llvm.mlir.constant(1280 : i64) : i64
// CHECK-NEXT:    llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @unwaited(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %a = "tp.add"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %f = "tp.all_gather_start"(%a) {mesh = @world, axes = ["tp"], dim = 0 : i64}
      : (tensor<4x16xf32>) -> !tp.future<tensor<16x16xf32>>
  %b = "tp.add"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %c = "tp.add"(%b, %b) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}

// -----

/// A returned tp.wait result is written in place: the collective's output is the caller's result
/// buffer, so the arena holds only %b [0, 256), and nothing is copied at the end.
// CHECK-LABEL: module attributes {tp.arena_bytes = 256 : i64
// CHECK-LABEL: func.func @tpc_entry_returned_wait(
// CHECK:         call @tprt_abi_all_gather_start(
// CHECK:         call @tprt_abi_wait(
// CHECK:         call @tprt_abi_add(
// CHECK:         call @tprt_abi_add(
// CHECK-NOT:     call @tprt_abi_copy(
// CHECK:         return
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @returned_wait(%x: tensor<4x16xf32>) -> (tensor<16x16xf32>, tensor<4x16xf32>) {
  %f = "tp.all_gather_start"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64}
      : (tensor<4x16xf32>) -> !tp.future<tensor<16x16xf32>>
  %g = "tp.wait"(%f) : (!tp.future<tensor<16x16xf32>>) -> tensor<16x16xf32>
  %b = "tp.add"(%x, %x) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %c = "tp.add"(%b, %b) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  return %g, %c : tensor<16x16xf32>, tensor<4x16xf32>
}

// -----

/// Two waits of one future, both returned: the collective writes the first result buffer, and the
/// second is copied from it.
// CHECK-LABEL: module attributes {tp.arena_bytes = 0 : i64
// CHECK-LABEL: func.func @tpc_entry_twice(
// CHECK:         call @tprt_abi_all_gather_start(
// CHECK:         call @tprt_abi_wait(
// CHECK:         call @tprt_abi_wait(
// CHECK:         call @tprt_abi_copy(
// CHECK-NOT:     call @tprt_abi_copy(
// CHECK:         return
"tp.mesh"() {sym_name = "world", axes = ["dp", "tp"], shape = array<i64: 2, 4>} : () -> ()
func.func @twice(%x: tensor<4x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %f = "tp.all_gather_start"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<4x8xf32>) -> !tp.future<tensor<16x8xf32>>
  %y = "tp.wait"(%f) : (!tp.future<tensor<16x8xf32>>) -> tensor<16x8xf32>
  %z = "tp.wait"(%f) : (!tp.future<tensor<16x8xf32>>) -> tensor<16x8xf32>
  return %y, %z : tensor<16x8xf32>, tensor<16x8xf32>
}
