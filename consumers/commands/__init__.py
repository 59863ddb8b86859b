"""The Kafka-facing ``ledger`` commands: publish, consume, health (one module each)."""
