"""The `metaharness` command line: thin click commands over the library."""
