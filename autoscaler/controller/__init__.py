"""The live controller: the tick loop, observation building, actuation (plan, write, settle),
leader election, its own metrics, health server and logging."""
