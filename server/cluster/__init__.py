"""A cluster of brokers coordinated by ZooKeeper (issue 15)."""
