// Expectations that do not hold: tpc-opt --verify-diagnostics must fail on each (tpc-opt-cli.test).
func.func @wrong_rule(%x: tensor<16x128xbf16>, %w: tensor<512x96xbf16>) -> tensor<16x512xbf16> {
  // expected-error@+1 {{violates rule linear.n}}
  %y = "tp.linear"(%x, %w) : (tensor<16x128xbf16>, tensor<512x96xbf16>) -> tensor<16x512xbf16>
  return %y : tensor<16x512xbf16>
}

// -----

func.func @nothing_wrong(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  // expected-warning@below {{never emitted}}
  return %x : tensor<16x128xbf16>
}

// -----

func.func @no_braces(%x: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  // expected-error@+1 missing braces
  return %x : tensor<16x128xbf16>
}
