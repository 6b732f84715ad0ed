// Every rank holds the same x, so an all-reduce over the 4 ranks of "tp" is exactly 4x, which
// (x + x) + (x + x) also computes exactly; the async all-gather stacks the 4 copies.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<i64: 4>} : () -> ()
func.func @step(%x: tensor<8x16xbf16> {tp.name = "x"})
    -> (tensor<8x16xbf16> {tp.name = "reduced"}, tensor<8x16xbf16> {tp.name = "doubled"},
        tensor<32x16xbf16> {tp.name = "gathered"}) {
  %r = "tp.all_reduce"(%x) {mesh = @world, axes = ["tp"], order = "canonical"} : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %f = "tp.all_gather_start"(%x) {mesh = @world, axes = ["tp"], dim = 0 : i64} : (tensor<8x16xbf16>) -> !tp.future<tensor<32x16xbf16>>
  %d = "tp.add"(%x, %x) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %q = "tp.add"(%d, %d) : (tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %g = "tp.wait"(%f) : (!tp.future<tensor<32x16xbf16>>) -> tensor<32x16xbf16>
  return %r, %q, %g : tensor<8x16xbf16>, tensor<8x16xbf16>, tensor<32x16xbf16>
}
