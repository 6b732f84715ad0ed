// "array<index: 1>" in a comment or a string is harmless.
"tp.mesh"() {sym_name = "world", axes = ["tp"], shape = array<index: 4>} : () -> ()
