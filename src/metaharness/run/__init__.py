"""The run loop and its options (`RunSpec`), shared by every adapter."""
