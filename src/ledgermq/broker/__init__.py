"""The broker layer: RocketMQ's message store semantics over the replicated ledger."""
