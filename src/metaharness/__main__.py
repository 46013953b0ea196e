from metaharness.cli.main import main

main()
