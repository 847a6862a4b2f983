"""The `itbench` command line: one module per noun, thin wrappers over library calls."""
