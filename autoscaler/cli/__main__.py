from autoscaler.cli.main import main

main()
