"""The live controller: the tick loop, observation building, leader election, its own metrics,
health server and logging."""
